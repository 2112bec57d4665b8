// The OAuth 2.0 / OpenID Connect authorization server: oidc-provider configured for this service.
import { cookieSigner } from './cookie-signer.ts';
import { auditClientAuthFailures } from './client-auth-audit.ts';
import { countIssuedTokens } from './metrics.ts';
import Provider, {
  errors,
  type AccessToken,
  type Account,
  type Client,
  type ClientCredentials,
  type Configuration,
  type KoaContextWithOIDC,
  type RefreshToken,
} from 'oidc-provider';
import { INTROSPECTION_METADATA, introspectionEndpoint, introspectionPolicy } from './introspection.ts';
import { userinfoDpopChallenge } from './userinfo-dpop.ts';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { rememberingSecretCheck } from '../clients/index.ts';
import { KNOWN_SCOPES, resourceForScopes, resourceServers } from '../vocabulary.ts';
import { adapterFactory, keepClientInstances } from './adapter.ts';
import { ACR_VALUES, signInPolicy, withAuthenticationClaims } from './authentication-context.ts';
import { keepingOfflineAccess } from './offline-access.ts';
import { EXTERNAL_SIGNING_ACK, NodeSigningKey, signInline } from './signing-key.ts';
import { deviceFlowFeature, devicePollPace, type DeviceFlowSources } from './device-flow.ts';
import { DPOP_ALGS } from '../http/dpop.ts';
import { outgoingFetch, recordBackchannelLogouts } from './backchannel-logout.ts';
import { answerDatabaseOutages } from './database-outage.ts';
import {
  FRONTCHANNEL_METADATA,
  frontchannelLogout,
  includeSidForFrontchannelClients,
  type FrontchannelLogoutSource,
  type SessionLogoutHook,
} from './frontchannel-logout.ts';
import type { KeySet } from './keys.ts';

export const ROUTES = {
  authorization: '/oauth/authorization',
  token: '/oauth/token',
  jwks: '/openid/jwks',
  userinfo: '/openid/userinfo',
  end_session: '/openid/endsession',
  revocation: '/oauth/revoke',
  introspection: '/oauth/introspect',
  pushed_authorization_request: '/oauth/par',
  device_authorization: '/oauth/device_authorization',
  code_verification: '/device',
} as const;

export const INTERACTION_PREFIX = '/interaction';

/** Lifetime (seconds) of a signed-in session, and the options of its cookie. */
export const SESSION_TTL = 8 * 3600;
export const SESSION_COOKIE = { httpOnly: true, sameSite: 'lax' } as const;

/** Cookie names: on https the session cookie (Path=/) gets `__Host-`, the path-scoped interaction
 * cookies `__Secure-`, so browsers refuse them from plain http or another (sub)domain. */
export function cookieNames(publicUrl: string): { session: string; interaction: string; resume: string } {
  return publicUrl.startsWith('https:')
    ? { session: '__Host-session', interaction: '__Secure-interaction', resume: '__Secure-interaction_resume' }
    : { session: '_session', interaction: '_interaction', resume: '_interaction_resume' };
}

/** What the sign-in and userinfo features plug into the provider. */
export interface AccountSource {
  findAccount: (ctx: KoaContextWithOIDC, sub: string) => Promise<Account | undefined>;
  /** claim names each scope may release (oidc-provider's `claims` setting) */
  claims: Record<string, string[]>;
  scopes: string[];
  renderError?: Configuration['renderError'];
  logoutSource?: NonNullable<NonNullable<Configuration['features']>['rpInitiatedLogout']>['logoutSource'];
  postLogoutSuccessSource?: NonNullable<
    NonNullable<Configuration['features']>['rpInitiatedLogout']
  >['postLogoutSuccessSource'];
  /** the user-code, confirmation and success pages of the device flow */
  deviceFlowSources?: DeviceFlowSources;
  /** the signed-out page that loads the session's front-channel logout URIs (frontchannel-logout.ts) */
  frontchannelLogoutSource?: FrontchannelLogoutSource;
  /** what else an ended session was signed in to hears of the logout (SAML SPs; frontchannel-logout.ts) */
  sessionLogout?: SessionLogoutHook;
  /** the grant a signed-in user already has for the client (remembered consent, first-party clients) */
  loadExistingGrant?: Configuration['loadExistingGrant'];
}

export const basicAccounts: AccountSource = {
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
  claims: { openid: ['sub'] },
  scopes: ['openid', 'offline_access'],
};

/** Signing algorithms the provider accepts and offers; none of the `none` or HMAC kind. */
const ENABLED_JWA: Configuration['enabledJWA'] = {
  idTokenSigningAlgValues: ['RS256', 'ES256'],
  userinfoSigningAlgValues: ['RS256', 'ES256'],
  clientAuthSigningAlgValues: ['RS256', 'ES256', 'PS256'],
  requestObjectSigningAlgValues: ['RS256', 'ES256', 'PS256'],
  introspectionSigningAlgValues: ['RS256', 'ES256'],
  authorizationSigningAlgValues: ['RS256', 'ES256'],
  dPoPSigningAlgValues: DPOP_ALGS as NonNullable<Configuration['enabledJWA']>['dPoPSigningAlgValues'],
};

function lifetimes(config: Config): Configuration['ttl'] {
  return {
    AccessToken: config.accessTokenTtl,
    ClientCredentials: config.accessTokenTtl,
    IdToken: config.idTokenTtl,
    AuthorizationCode: 60,
    Interaction: 3600,
    Session: SESSION_TTL,
    Grant: 14 * 24 * 3600,
    RefreshToken: 14 * 24 * 3600,
    DeviceCode: config.deviceCodeTtl,
  };
}

/** Authorization-code flows get userinfo tokens; client_credentials gets the API its scope names. */
function resourceIndicators(config: Config, keySet: KeySet) {
  const servers = resourceServers(config.publicUrl);
  const requestedScope = (ctx: KoaContextWithOIDC) => {
    const scope = ctx.oidc.params?.scope;
    return typeof scope === 'string' ? scope : undefined;
  };
  return {
    enabled: true,
    defaultResource: (ctx: KoaContextWithOIDC) => {
      if (ctx.oidc.params?.grant_type !== 'client_credentials') return undefined;
      const server = resourceForScopes(config.publicUrl, requestedScope(ctx));
      if (!server)
        throw new errors.InvalidScope('scope must name the API scopes the token is for', requestedScope(ctx) ?? '');
      return server.id;
    },
    useGrantedResource: async () => false,
    getResourceServerInfo: (ctx: KoaContextWithOIDC, indicator: string) => {
      const server = servers.find((s) => s.id === indicator);
      if (!server || ctx.oidc.params?.grant_type !== 'client_credentials') throw new errors.InvalidTarget();
      return {
        scope: server.scopes.join(' '),
        audience: server.id,
        accessTokenTTL: config.accessTokenTtl,
        accessTokenFormat: 'jwt' as const,
        jwt: { sign: { alg: 'ES256' as const, kid: keySet.active.ES256 } },
      };
    },
  } as NonNullable<Configuration['features']>['resourceIndicators'];
}

/** A client revokes only tokens issued to itself (RFC 7009 2.1); a confidential client is told
 * when it tries another's, a public one (which proved nothing) is not. */
const revocationAllowed = async (
  _ctx: KoaContextWithOIDC,
  client: Client,
  token: AccessToken | ClientCredentials | RefreshToken,
): Promise<boolean> => {
  if (token.clientId === client.clientId) return true;
  if (client.clientAuthMethod === 'none') return false;
  throw new errors.InvalidRequest('client is not authorized to revoke the presented token');
};

function features(
  config: Config,
  keySet: KeySet,
  accounts: AccountSource,
  keys: Keyring,
  store: Store,
): Configuration['features'] {
  return {
    devInteractions: { enabled: false },
    // RFC 9449: DPoP-bound tokens (token_type DPoP, cnf.jkt) for clients that send proofs, with
    // nonces from a secret every instance derives alike (src/http/dpop.ts computes the same ones).
    dPoP: { enabled: true, nonceSecret: keys.dpopNonce, requireNonce: () => true, allowReplay: false },
    // RFC 9126 at /oauth/par for every client; required of clients registered with --require-par
    // (require_pushed_authorization_requests in their metadata).
    pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: false },
    clientCredentials: { enabled: true },
    revocation: { enabled: true, allowedPolicy: revocationAllowed },
    // who sees which token: src/oauth/introspection.ts, docs/tokens.md
    introspection: { enabled: true, allowedPolicy: introspectionPolicy(store) },
    // Accept: application/token-introspection+jwt gets the answer as a signed JWT (RFC 9701)
    jwtIntrospection: { enabled: true },
    userinfo: { enabled: true },
    // an essential acr (step-up to a passkey) may be asked for through the claims parameter
    claimsParameter: { enabled: true },
    // clients registered with userinfo_signed_response_alg get application/jwt userinfo
    jwtUserinfo: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      ...(accounts.logoutSource ? { logoutSource: accounts.logoutSource } : {}),
      ...(accounts.postLogoutSuccessSource ? { postLogoutSuccessSource: accounts.postLogoutSuccessSource } : {}),
    },
    // logout tokens to clients registered with a back-channel logout URI (backchannel-logout.ts)
    backchannelLogout: { enabled: true },
    resourceIndicators: resourceIndicators(config, keySet),
    deviceFlow: deviceFlowFeature(accounts.deviceFlowSources),
    externalSigningSupport: { enabled: true, ack: EXTERNAL_SIGNING_ACK },
  };
}

/** The provider's own middleware, in order: the first sees every answer of those after it and of the routes. */
function useMiddleware(provider: Provider, config: Config, store: Store, keySet: KeySet, accounts: AccountSource) {
  answerDatabaseOutages(provider);
  provider.use(
    introspectionEndpoint({
      store,
      issuer: config.publicUrl,
      publicJwks: keySet.publicJwks,
      audiences: resourceServers(config.publicUrl).map((server) => server.id),
    }),
  );
  provider.use(userinfoDpopChallenge());
  if (accounts.frontchannelLogoutSource)
    provider.use(frontchannelLogout(store, accounts.frontchannelLogoutSource, accounts.sessionLogout));
  provider.use(devicePollPace(store, config.deviceCodeTtl));
}

export function createProvider(
  config: Config,
  store: Store,
  keys: Keyring,
  keySet: KeySet,
  accounts: AccountSource,
  log?: FastifyBaseLogger,
): Provider {
  const signing = { inline: signInline(config.workers) };
  const configuration: Configuration = {
    adapter: adapterFactory(store, config.publicUrl),
    jwks: { keys: keySet.providerJwks.map((jwk) => (jwk.key_ops ? jwk : new NodeSigningKey(jwk, signing))) },
    cookies: {
      // a Keygrip-compatible signer (src/oauth/cookie-signer.ts), which oidc-provider passes on as is
      keys: cookieSigner(keys.cookies) as unknown as string[],
      names: cookieNames(config.publicUrl),
      long: { ...SESSION_COOKIE },
      short: { httpOnly: true, sameSite: 'lax' },
    },
    routes: ROUTES,
    findAccount: accounts.findAccount,
    claims: withAuthenticationClaims(accounts.claims),
    acrValues: [...ACR_VALUES],
    scopes: [...new Set([...accounts.scopes, ...KNOWN_SCOPES])],
    conformIdTokenClaims: true,
    interactions: { policy: signInPolicy(), url: (_ctx, interaction) => `${INTERACTION_PREFIX}/${interaction.uid}` },
    clientDefaults: {
      id_token_signed_response_alg: 'RS256',
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    enabledJWA: ENABLED_JWA,
    clientAuthMethods: ['client_secret_basic', 'client_secret_post', 'none'],
    // 'none' is for the SAML service providers' clients only (their registration lists nothing else)
    responseTypes: ['code', 'none'],
    pkce: { required: (_ctx, client) => client.clientAuthMethod === 'none' },
    // Every use of a refresh token returns a new one, for every kind of client, so a reused
    // (stolen) one is always detected and revokes its grant.
    rotateRefreshToken: true,
    ttl: lifetimes(config),
    features: features(config, keySet, accounts, keys, store),
    extraClientMetadata: { properties: [INTROSPECTION_METADATA, FRONTCHANNEL_METADATA] },
    // `upstream=<provider id>`: sign in through that upstream identity provider straight away (docs/upstream.md)
    extraParams: ['upstream'],
    fetch: outgoingFetch(config.publicUrl),
    // Front-channel logout is this service's own (frontchannel-logout.ts): iss and sid are always sent.
    discovery: {
      claim_types_supported: ['normal'],
      frontchannel_logout_supported: true,
      frontchannel_logout_session_supported: true,
    },
    extraTokenClaims: async (_ctx, token) => {
      // RFC 9068: client_credentials tokens name the client as subject.
      if (token.kind === 'ClientCredentials') return { sub: token.clientId };
      return undefined;
    },
    // Browser-based relying parties may call userinfo from the origins of their redirect URIs.
    clientBasedCORS: (_ctx, origin, client) =>
      (client.redirectUris ?? []).some((uri) => new URL(uri).origin === origin),
    ...(accounts.renderError ? { renderError: accounts.renderError } : {}),
    loadExistingGrant: keepingOfflineAccess(accounts.loadExistingGrant),
  };
  const provider = new Provider(config.publicUrl, configuration);
  keepClientInstances(provider, store, config.publicUrl);
  includeSidForFrontchannelClients(provider);
  recordBackchannelLogouts(provider, store, log);
  auditClientAuthFailures(provider, store, log);
  countIssuedTokens(provider, log);
  useMiddleware(provider, config, store, keySet, accounts);
  provider.proxy = true; // the Fastify mount sets X-Forwarded-* from PUBLIC_URL, never from the client
  // Client secrets are stored as keyed hashes; compare in constant time against the hash.
  const secretCheck = rememberingSecretCheck(keys);
  provider.Client.prototype.compareClientSecret = function compareClientSecret(
    this: { clientSecret?: string },
    actual: string,
  ) {
    return secretCheck(this, this.clientSecret ?? null, actual);
  };
  return provider;
}
