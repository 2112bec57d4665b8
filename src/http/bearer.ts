// Bearer JWT verification for the service's own resource APIs (RFC 9068 access tokens).
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { FastifyRequest } from 'fastify';
import { AppError, forbidden, unauthorized } from '../errors.ts';

// Access tokens are signed with the ES256 key only (RS256 is the ID-token key).
export const ACCEPTED_ALGS = ['ES256'];
const CLOCK_SKEW_SECONDS = 30;

export interface AccessToken {
  clientId: string;
  sub: string;
  scopes: Set<string>;
  jti: string;
  exp: number;
}

export interface TokenVerifier {
  /** the issuer whose tokens are accepted; also the realm of WWW-Authenticate challenges */
  issuer: string;
  verify(token: string, audience: string): Promise<AccessToken>;
}

/** What an Authorization header holds, for a resource that takes bearer tokens (RFC 6750 2.1). */
export type BearerHeader = { kind: 'absent' } | { kind: 'malformed' } | { kind: 'token'; token: string };

// RFC 6750 b64token; the service's tokens are far shorter than the cap.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^Bearer(\s|$)/i;
const MAX_TOKEN_LENGTH = 2048;

/**
 * The one reading of the Authorization header for every resource endpoint. No header, an empty one
 * or another scheme is `absent` (answered with the bare challenge); the Bearer scheme with a value
 * that is not one b64token is `malformed`.
 */
export function parseBearer(header: unknown): BearerHeader {
  if (typeof header !== 'string' || !BEARER_SCHEME.test(header.trim())) return { kind: 'absent' };
  const match = BEARER.exec(header.trim());
  if (!match || match[1]!.length > MAX_TOKEN_LENGTH) return { kind: 'malformed' };
  return { kind: 'token', token: match[1]! };
}

/**
 * jwks() returns the currently published public keys; refresh() reloads them (called once when a
 * token names an unknown kid, so a key rotated on another instance is picked up at once).
 */
export function createTokenVerifier(
  issuer: string,
  jwks: () => JSONWebKeySet,
  refresh: () => Promise<void>,
): TokenVerifier {
  // jwks() returns the same object until the keys change, so imported keys are reused.
  let cached: { set: JSONWebKeySet; keys: ReturnType<typeof createLocalJWKSet> } | undefined;
  const keySource = () => {
    const set = jwks();
    if (cached?.set !== set) cached = { set, keys: createLocalJWKSet(set) };
    return cached.keys;
  };
  const verifyOnce = (token: string, audience: string) =>
    jwtVerify(token, keySource(), {
      issuer,
      audience,
      algorithms: ACCEPTED_ALGS,
      typ: 'at+jwt',
      clockTolerance: CLOCK_SKEW_SECONDS,
      requiredClaims: ['exp', 'iat', 'jti', 'client_id', 'sub'],
    });
  return {
    issuer,
    async verify(token, audience) {
      let payload: JWTPayload;
      try {
        try {
          ({ payload } = await verifyOnce(token, audience));
        } catch (err) {
          if (!(err instanceof joseErrors.JWKSNoMatchingKey)) throw err;
          await refresh();
          ({ payload } = await verifyOnce(token, audience));
        }
      } catch (err) {
        if (err instanceof joseErrors.JOSEError || err instanceof TypeError) throw unauthorized();
        throw err;
      }
      // A sender-constrained token (cnf) must come with proof of possession; these APIs take
      // plain bearer tokens only, so a bound token presented as a bearer is refused.
      if ((payload as { cnf?: unknown }).cnf !== undefined) throw unauthorized();
      const {
        client_id: clientId,
        scope,
        sub,
        jti,
        exp,
      } = payload as JWTPayload & { client_id: unknown; scope?: unknown };
      if (typeof clientId !== 'string' || typeof sub !== 'string' || typeof jti !== 'string' || typeof exp !== 'number')
        throw unauthorized();
      if (scope !== undefined && typeof scope !== 'string') throw unauthorized();
      return { clientId, sub, jti, exp, scopes: new Set((scope ?? '').split(' ').filter(Boolean)) };
    },
  };
}

/**
 * The verified access token of a request. A 401 carries the RFC 6750 challenge: the Bearer scheme
 * and realm, and error="invalid_token" when a token was presented.
 */
export async function authenticate(
  request: FastifyRequest,
  verifier: TokenVerifier,
  audience: string,
): Promise<AccessToken> {
  const parsed = parseBearer(request.headers.authorization);
  const token = parsed.kind === 'token' ? parsed.token : undefined;
  const challenge = (error?: string) => ({
    'www-authenticate': `Bearer realm="${verifier.issuer}"${error ? `, error="${error}"` : ''}`,
  });
  // no bearer token at all (no header, another scheme, malformed): the bare challenge
  if (!token) throw new AppError(401, 'Token missing or invalid', challenge());
  try {
    return await verifier.verify(token, audience);
  } catch (err) {
    if (err instanceof AppError && err.status === 401) throw new AppError(401, err.message, challenge('invalid_token'));
    throw err;
  }
}

export function requireScopes(
  token: AccessToken,
  required: string[],
  message = 'Token must have all required scopes',
): void {
  if (!required.every((s) => token.scopes.has(s))) throw forbidden(message);
}

export { AppError };
