// The OpenID Connect relying party of an upstream provider (docs/upstream.md), with openid-client:
// discovery from the issuer (cached a while), the authorization code flow with PKCE, state and
// nonce, the ID token checked (issuer, audience, signature from the upstream's JWKS, expiry, nonce,
// an allow-list of algorithms) and userinfo read when the ID token lacks claims. Every request to
// the upstream has a timeout; what fails is an UpstreamError saying which kind of failure it was.
import * as client from 'openid-client';
import { importJWK } from 'jose';
import type { OidcCredentials } from './providers.ts';
import { KNOWN_AMR, type UpstreamAssertion, type UpstreamProvider, type UpstreamRequest } from './types.ts';

/** Signature algorithms accepted on an upstream's ID tokens: asymmetric only, never `none` or HMAC. */
export const ID_TOKEN_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const;

/** The claim each attribute of ours comes from unless `--map` says otherwise. */
export const DEFAULT_CLAIMS: Record<string, string> = {
  email: 'email',
  email_verified: 'email_verified',
  eppn: 'eduperson_principal_name',
  name: 'name',
  given_name: 'given_name',
  family_name: 'family_name',
};

export type UpstreamFailure =
  /** the upstream (or its user) refused: error=access_denied and the like */
  | 'denied'
  /** the upstream could not be reached, or answered with something that is not its protocol */
  | 'unreachable'
  /** the upstream did not answer in time */
  | 'timeout'
  /** an answer failed a check: signature, issuer, audience, nonce, state, expiry */
  | 'invalid';

export class UpstreamError extends Error {
  readonly kind: UpstreamFailure;
  /** what the log says (never a secret, never the token) */
  readonly detail: string;
  constructor(kind: UpstreamFailure, detail: string) {
    super(`upstream ${kind}: ${detail}`);
    this.kind = kind;
    this.detail = detail;
  }
}

const LOOPBACK = /^(localhost|127\.[0-9.]+|\[::1\])$/;

interface Cached {
  key: string;
  at: number;
  config: client.Configuration;
}

const DISCOVERY_TTL_MS = 5 * 60 * 1000;
const configurations = new Map<string, Cached>();

function failureOf(err: unknown): UpstreamError {
  if (err instanceof UpstreamError) return err;
  const e = err as { name?: string; code?: string; message?: string; error?: string; cause?: unknown };
  const message = String(e.message ?? err).slice(0, 300);
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.code === 'OAUTH_TIMEOUT')
    return new UpstreamError('timeout', message);
  if (err instanceof client.AuthorizationResponseError)
    return new UpstreamError(err.error === 'access_denied' ? 'denied' : 'invalid', `${err.error}: ${message}`);
  if (err instanceof client.ResponseBodyError) return new UpstreamError('invalid', `${err.error}: ${message}`);
  if (err instanceof TypeError && /fetch failed/.test(message)) {
    const cause = (e.cause as { code?: string; name?: string } | undefined) ?? {};
    if (cause.name === 'TimeoutError' || cause.code === 'UND_ERR_CONNECT_TIMEOUT')
      return new UpstreamError('timeout', message);
    return new UpstreamError('unreachable', `${message}${cause.code ? ` (${cause.code})` : ''}`);
  }
  if (e.code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || e.code === 'OAUTH_RESPONSE_IS_NOT_JSON')
    return new UpstreamError('unreachable', message);
  return new UpstreamError('invalid', `${e.code ?? e.name ?? 'error'}: ${message}`);
}

async function clientAuth(provider: UpstreamProvider, creds: OidcCredentials): Promise<client.ClientAuth> {
  const method = provider.oidc!.authMethod;
  if (method === 'private_key_jwt') {
    if (!creds.privateJwk)
      throw new UpstreamError('invalid', 'the private_key_jwt key cannot be opened (IDP_SECRET changed?)');
    const key = (await importJWK(creds.privateJwk, 'ES256')) as CryptoKey;
    return client.PrivateKeyJwt({ key, kid: String(creds.privateJwk.kid) });
  }
  if (creds.clientSecret === undefined)
    throw new UpstreamError('invalid', 'the client secret cannot be opened (IDP_SECRET changed?)');
  return method === 'client_secret_post'
    ? client.ClientSecretPost(creds.clientSecret)
    : client.ClientSecretBasic(creds.clientSecret);
}

/** The upstream's configuration from its discovery document, kept a few minutes per provider. */
export async function configurationOf(
  provider: UpstreamProvider,
  creds: OidcCredentials,
  timeoutMs: number,
  now = Date.now(),
): Promise<client.Configuration> {
  const oidc = provider.oidc!;
  const key = `${oidc.issuer}|${oidc.clientId}|${oidc.authMethod}|${provider.updatedAt}`;
  const cached = configurations.get(provider.id);
  if (cached && cached.key === key && now - cached.at < DISCOVERY_TTL_MS) return cached.config;
  const issuer = new URL(oidc.issuer);
  const insecure = issuer.protocol === 'http:' && LOOPBACK.test(issuer.host.replace(/:\d+$/, ''));
  const timeout = Math.max(1, Math.ceil(timeoutMs / 1000));
  try {
    const config = await client.discovery(issuer, oidc.clientId, undefined, await clientAuth(provider, creds), {
      // The ID token's signature is checked with the upstream's JWKS even though it comes straight
      // from the token endpoint (openid-client leaves that to TLS unless told otherwise).
      execute: insecure
        ? [client.allowInsecureRequests, client.enableNonRepudiationChecks]
        : [client.enableNonRepudiationChecks],
      timeout,
    });
    config.timeout = timeout;
    configurations.set(provider.id, { key, at: now, config });
    return config;
  } catch (err) {
    throw failureOf(err);
  }
}

/** Where the browser goes to sign in upstream. */
export async function authorizationUrl(
  provider: UpstreamProvider,
  creds: OidcCredentials,
  request: UpstreamRequest,
  {
    redirectUri,
    timeoutMs,
    loginHint,
    reauthenticate,
  }: { redirectUri: string; timeoutMs: number; loginHint?: string; reauthenticate?: Reauthenticate },
): Promise<URL> {
  const config = await configurationOf(provider, creds, timeoutMs);
  const params: Record<string, string> = {
    redirect_uri: redirectUri,
    response_type: 'code',
    scope: provider.oidc!.scopes.join(' '),
    state: request.id,
    nonce: request.nonce!,
    code_challenge: await client.calculatePKCECodeChallenge(request.codeVerifier!),
    code_challenge_method: 'S256',
  };
  if (loginHint) params.login_hint = loginHint;
  if (reauthenticate?.prompt) params.prompt = 'login';
  if (reauthenticate?.maxAge !== undefined) params.max_age = String(reauthenticate.maxAge);
  return client.buildAuthorizationUrl(config, params);
}

/** What a relying party asked of the sign-in's freshness: prompt=login, and/or max_age (seconds). */
export interface Reauthenticate {
  prompt: boolean;
  maxAge?: number;
}

/** A fresh PKCE verifier and nonce for a request about to start. */
export function newChecks(): { codeVerifier: string; nonce: string } {
  return { codeVerifier: client.randomPKCECodeVerifier(), nonce: client.randomNonce() };
}

function headerAlg(idToken: string | undefined): string | undefined {
  try {
    const header = JSON.parse(Buffer.from(idToken?.split('.')[0] ?? '', 'base64url').toString('utf8')) as {
      alg?: unknown;
    };
    return typeof header.alg === 'string' ? header.alg : undefined;
  } catch {
    return undefined;
  }
}

function stringValue(value: unknown): string | string[] | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean' || typeof value === 'number') return String(value);
  if (Array.isArray(value)) {
    const strings = value.filter((v): v is string => typeof v === 'string').slice(0, 100);
    return strings.length ? strings : undefined;
  }
  return undefined;
}

/** Our attributes from the upstream's claims, through the defaults and the provider's `--map`. */
export function attributesFrom(
  provider: UpstreamProvider,
  claims: Record<string, unknown>,
): UpstreamAssertion['attributes'] {
  const mapping = { ...DEFAULT_CLAIMS, ...provider.mappings };
  const attributes: UpstreamAssertion['attributes'] = {};
  for (const [attribute, claim] of Object.entries(mapping)) {
    const value = stringValue(claims[claim]);
    if (value !== undefined) attributes[attribute] = typeof value === 'string' ? value.slice(0, 1024) : value;
  }
  return attributes;
}

/**
 * The browser came back to the redirect URI: the code is exchanged and the ID token checked
 * against this request (state, nonce, PKCE verifier); userinfo fills claims the ID token lacks.
 */
export async function completeSignIn(
  provider: UpstreamProvider,
  creds: OidcCredentials,
  request: UpstreamRequest,
  { currentUrl, timeoutMs }: { currentUrl: URL; timeoutMs: number },
): Promise<UpstreamAssertion> {
  const config = await configurationOf(provider, creds, timeoutMs);
  try {
    const tokens = await client.authorizationCodeGrant(config, currentUrl, {
      pkceCodeVerifier: request.codeVerifier,
      expectedState: request.id,
      expectedNonce: request.nonce,
      idTokenExpected: true,
    });
    const alg = headerAlg(tokens.id_token);
    if (!alg || !(ID_TOKEN_ALGORITHMS as readonly string[]).includes(alg))
      throw new UpstreamError(
        'invalid',
        `ID token signed with ${alg ?? 'no algorithm'}, not one of ${ID_TOKEN_ALGORITHMS.join(', ')}`,
      );
    const idClaims = tokens.claims();
    if (!idClaims) throw new UpstreamError('invalid', 'no ID token');
    let claims: Record<string, unknown> = { ...idClaims };
    const wanted = Object.values({ ...DEFAULT_CLAIMS, ...provider.mappings });
    const missing = wanted.some((c) => !(c in claims) && c !== DEFAULT_CLAIMS.eppn);
    if (missing && tokens.access_token && config.serverMetadata().userinfo_endpoint) {
      const userinfo = await client.fetchUserInfo(config, tokens.access_token, idClaims.sub);
      // The ID token's own claims win: they are signed. An address and its verification are taken
      // together from one source: never the ID token's email with userinfo's email_verified.
      const { email, email_verified } = { ...DEFAULT_CLAIMS, ...provider.mappings };
      const fromUserinfo: Record<string, unknown> = { ...userinfo };
      if (email! in claims || email_verified! in claims) {
        delete fromUserinfo[email!];
        delete fromUserinfo[email_verified!];
      }
      claims = { ...fromUserinfo, ...claims };
    }
    const amr = Array.isArray(idClaims.amr)
      ? idClaims.amr.filter((m): m is string => typeof m === 'string' && KNOWN_AMR.has(m))
      : [];
    return {
      providerId: provider.id,
      subject: idClaims.sub,
      attributes: attributesFrom(provider, claims),
      amr: [...new Set(amr)],
      ...(typeof idClaims.acr === 'string' && idClaims.acr.length <= 256 ? { acr: idClaims.acr } : {}),
      ...(typeof idClaims.auth_time === 'number' && Number.isFinite(idClaims.auth_time)
        ? { authTime: idClaims.auth_time * 1000 }
        : {}),
    };
  } catch (err) {
    throw failureOf(err);
  }
}
