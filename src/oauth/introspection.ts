// Who may introspect which token (RFC 7662), and the parts of introspection oidc-provider leaves
// out: its answer about the service's own JWT access tokens (RFC 9068; oidc-provider refuses every
// structured token with unsupported_token_type) and a 401 for a caller that did not authenticate.
// docs/tokens.md states the rules.
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type Provider from 'oidc-provider';
import type { AccessToken, Client, ClientCredentials, KoaContextWithOIDC, RefreshToken } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import { isUserOfGrantedOrganization } from '../store/clients.ts';
import { findUserBySub } from '../store/directory.ts';
import { accountDisabled } from '../directory/account-state.ts';
import { ACCEPTED_ALGS } from '../http/bearer.ts';

/** The client metadata property that marks a resource server allowed to introspect (src/oauth/adapter.ts). */
export const INTROSPECTION_METADATA = 'introspection_allowed';

const JWT_ANSWER = 'application/token-introspection+jwt';

type Middleware = Parameters<Provider['use']>[0];
type Introspected = AccessToken | ClientCredentials | RefreshToken;

/** The audiences a token names (oidc-provider keeps one as a string, several as an array). */
function audiences(aud: unknown): string[] {
  if (typeof aud === 'string') return [aud];
  return Array.isArray(aud) ? aud.filter((a): a is string => typeof a === 'string') : [];
}

/** A client the operator registered with --introspection. */
function isResourceServer(client: Client): boolean {
  return (client.metadata() as Record<string, unknown>)[INTROSPECTION_METADATA] === true;
}

/**
 * A user's token is live only while the user may sign in: a disabled user's, or a user's of a
 * disabled organization, is `{ active: false }` (accountDisabled in src/directory/).
 */
async function accountLive(store: Store, sub: string): Promise<boolean> {
  const user = await findUserBySub(store.db, sub);
  return user !== undefined && !accountDisabled(user);
}

/**
 * features.introspection.allowedPolicy: the answer about a token goes to the client it was issued
 * to, to a client its audience names, and, for a user's access token, to a resource server granted
 * the user's organization. Anyone else gets `{ active: false }`, as for an unknown token. Refresh
 * tokens are seen only by their own client.
 */
export function introspectionPolicy(store: Store) {
  const callerMay = async (client: Client, token: Introspected): Promise<boolean> => {
    if (client.clientAuthMethod === 'none') return false;
    if (token.clientId === client.clientId) return true;
    if ('aud' in token && audiences(token.aud).includes(client.clientId)) return true;
    if (token.kind !== 'AccessToken' || !token.accountId || !isResourceServer(client)) return false;
    return isUserOfGrantedOrganization(store.db, client.clientId, token.accountId);
  };
  return async (_ctx: KoaContextWithOIDC, client: Client, token: Introspected): Promise<boolean> =>
    (await callerMay(client, token)) &&
    (token.kind === 'ClientCredentials' || !token.accountId || (await accountLive(store, token.accountId)));
}

/** Whether the request presented any client credentials at all (Basic, a secret, an assertion, an id). */
function presentedCredentials(ctx: KoaContextWithOIDC): boolean {
  if (ctx.headers.authorization !== undefined) return true;
  const params = (ctx.oidc.params ?? {}) as Record<string, unknown>;
  return ['client_id', 'client_secret', 'client_assertion'].some((name) => params[name] !== undefined);
}

/**
 * RFC 7662 2.1 and 4: the endpoint requires the caller to authenticate. Without credentials, or as a
 * public client (which has none to prove), the answer is 401 invalid_client with a Basic challenge,
 * whatever the token: nothing about it is told.
 */
function refuseUnauthenticated(ctx: KoaContextWithOIDC): boolean {
  const client = ctx.oidc.client;
  const anonymous = !client && ctx.status === 400 && !presentedCredentials(ctx);
  if (!anonymous && client?.clientAuthMethod !== 'none') return false;
  ctx.status = 401;
  ctx.set('www-authenticate', `Basic realm="${ctx.oidc.issuer}"`);
  ctx.type = 'application/json; charset=utf-8';
  ctx.body = {
    error: 'invalid_client',
    error_description: 'the introspection endpoint requires client authentication (a confidential client)',
  };
  return true;
}

/** The RFC 7662 answer about a verified JWT access token. */
function jwtAnswer(payload: JWTPayload): Record<string, unknown> {
  const { scope, client_id, sub, exp, iat, iss, aud, jti, cnf } = payload as JWTPayload & Record<string, unknown>;
  const bound = typeof cnf === 'object' && cnf !== null && 'jkt' in cnf;
  return {
    active: true,
    ...(typeof scope === 'string' && scope ? { scope } : {}),
    client_id,
    sub,
    exp,
    iat,
    iss,
    aud,
    jti,
    token_type: bound ? 'DPoP' : 'Bearer',
    ...(cnf === undefined ? {} : { cnf }),
  };
}

interface JwtSources {
  store: Store;
  issuer: string;
  /** the public keys the service publishes at /openid/jwks */
  publicJwks: JWK[];
  /** the audiences of the service's own APIs (resource servers of src/vocabulary.ts) */
  audiences: string[];
}

/**
 * One of the service's JWT access tokens, as the caller may see it: verified against the published
 * keys (signature, issuer, one of the service's audiences, typ at+jwt, not expired), issued to a
 * client that still exists and is enabled, for a user who may still sign in, and asked about by that client, a client its audience
 * names or a resource server granted introspection. Otherwise `{ active: false }`.
 */
async function introspectJwt(
  ctx: KoaContextWithOIDC,
  token: string,
  keys: ReturnType<typeof createLocalJWKSet>,
  sources: JwtSources,
): Promise<Record<string, unknown>> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keys, {
      issuer: sources.issuer,
      audience: sources.audiences,
      algorithms: ACCEPTED_ALGS,
      typ: 'at+jwt',
      requiredClaims: ['exp', 'iat', 'jti', 'client_id', 'sub'],
    }));
  } catch {
    return { active: false };
  }
  const caller = ctx.oidc.client!;
  const issuedTo = typeof payload.client_id === 'string' ? payload.client_id : undefined;
  // a disabled or removed client is unknown to the provider: its tokens are no longer live
  if (!issuedTo || !(await ctx.oidc.provider.Client.find(issuedTo))) return { active: false };
  // a user's token (a client's own, RFC 9068 2.2, has the client as its sub)
  if (payload.sub !== issuedTo && !(await accountLive(sources.store, String(payload.sub)))) return { active: false };
  const allowed =
    issuedTo === caller.clientId || audiences(payload.aud).includes(caller.clientId) || isResourceServer(caller);
  return allowed ? jwtAnswer(payload) : { active: false };
}

/** The answer as JSON, or as the signed JWT of RFC 9701 when asked for, exactly as oidc-provider renders its own. */
async function respond(ctx: KoaContextWithOIDC, answer: Record<string, unknown>): Promise<void> {
  const client = ctx.oidc.client!;
  ctx.status = 200;
  ctx.remove('www-authenticate');
  const signed = client.introspectionSignedResponseAlg || client.introspectionEncryptedResponseAlg;
  if (signed && ctx.accepts('json', JWT_ANSWER) === JWT_ANSWER) {
    const jwt = new ctx.oidc.provider.IdToken({}, { ctx });
    Object.assign(jwt.extra, { token_introspection: answer, aud: answer.aud });
    ctx.body = await jwt.issue({ use: 'introspection' });
    ctx.type = `${JWT_ANSWER}; charset=utf-8`;
    return;
  }
  ctx.type = 'application/json; charset=utf-8';
  ctx.body = answer;
}

function isJwt(token: unknown): token is string {
  if (typeof token !== 'string') return false;
  try {
    return Boolean(decodeProtectedHeader(token));
  } catch {
    return false;
  }
}

/**
 * Runs around oidc-provider's introspection endpoint: refuses unauthenticated callers with 401, and
 * answers about JWT access tokens, which oidc-provider refuses (unsupported_token_type) after it
 * has authenticated the caller.
 */
export function introspectionEndpoint(sources: JwtSources): Middleware {
  const keys = createLocalJWKSet({ keys: sources.publicJwks });
  return async (ctx, next) => {
    await next();
    const oidcCtx = ctx as KoaContextWithOIDC;
    if (oidcCtx.oidc?.route !== 'introspection') return;
    if (refuseUnauthenticated(oidcCtx)) return;
    const token = oidcCtx.oidc.params?.token;
    const refused = ctx.status === 400 && (ctx.body as { error?: unknown } | undefined)?.error;
    if (refused !== 'unsupported_token_type' || !oidcCtx.oidc.client || !isJwt(token)) return;
    await respond(oidcCtx, await introspectJwt(oidcCtx, token, keys, sources));
  };
}
