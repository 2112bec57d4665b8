// Bearer JWT verification for the service's own resource APIs (RFC 9068 access tokens).
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { FastifyRequest } from 'fastify';
import { AppError, forbidden, unauthorized } from '../errors.ts';
import { DPOP_ALGS, DpopProofError, type DpopVerifier } from './dpop.ts';

// Access tokens are signed with the ES256 key only (RS256 is the ID-token key).
export const ACCEPTED_ALGS = ['ES256'];
const CLOCK_SKEW_SECONDS = 30;

export interface AccessToken {
  clientId: string;
  sub: string;
  scopes: Set<string>;
  jti: string;
  exp: number;
  /** cnf.jkt of a DPoP-bound token: the thumbprint of the key every request must prove */
  jkt?: string;
}

export interface TokenVerifier {
  /** the issuer whose tokens are accepted; also the realm of WWW-Authenticate challenges */
  issuer: string;
  verify(token: string, audience: string): Promise<AccessToken>;
  /** checks the proofs of DPoP-bound tokens; without it such tokens are refused */
  dpop?: DpopVerifier;
}

/** What an Authorization header holds, for a resource that takes bearer tokens (RFC 6750 2.1). */
export type BearerHeader = { kind: 'absent' } | { kind: 'malformed' } | { kind: 'token'; token: string };

// RFC 6750 b64token; the service's tokens are far shorter than the cap.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^Bearer(\s|$)/i;
const MAX_TOKEN_LENGTH = 2048;
const DPOP = /^DPoP +([A-Za-z0-9\-._~+/]+=*) *$/i;

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
  dpop?: DpopVerifier,
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
    ...(dpop ? { dpop } : {}),
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
      // A sender-constrained token must come with proof of possession of its key; the only
      // binding these APIs know is DPoP's (cnf.jkt), checked by authenticate().
      const jkt = boundKey((payload as { cnf?: unknown }).cnf);
      if (jkt === null) throw unauthorized();
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
      const scopes = new Set((scope ?? '').split(' ').filter(Boolean));
      return { clientId, sub, jti, exp, scopes, ...(jkt ? { jkt } : {}) };
    },
  };
}

/** cnf of a token: undefined when unbound, the jkt when DPoP-bound, null for anything else. */
function boundKey(cnf: unknown): string | undefined | null {
  if (cnf === undefined) return undefined;
  if (typeof cnf !== 'object' || cnf === null) return null;
  const { jkt } = cnf as { jkt?: unknown };
  return typeof jkt === 'string' && Object.keys(cnf).length === 1 ? jkt : null;
}

/** The DPoP scheme's token (RFC 9449 7.1), or undefined. */
function dpopToken(header: unknown): string | undefined {
  if (typeof header !== 'string') return undefined;
  const match = DPOP.exec(header.trim());
  return match && match[1]!.length <= MAX_TOKEN_LENGTH ? match[1] : undefined;
}

type Challenge = (scheme: 'Bearer' | 'DPoP', error?: string, description?: string) => Record<string, string>;

function challenges(realm: string): Challenge {
  return (scheme, error, description) => ({
    'www-authenticate':
      `${scheme} realm="${realm}"` +
      (error ? `, error="${error}"` : '') +
      (description ? `, error_description="${description}"` : '') +
      (scheme === 'DPoP' ? `, algs="${DPOP_ALGS.join(' ')}"` : ''),
  });
}

/** A DPoP-bound token with its proof: the token must be bound and the proof must bind this request. */
async function checkDpop(request: FastifyRequest, verifier: TokenVerifier, value: string, token: AccessToken) {
  const challenge = challenges(verifier.issuer);
  if (!token.jkt || !verifier.dpop)
    throw new AppError(401, 'Token is not bound to a DPoP key', challenge('DPoP', 'invalid_token'));
  try {
    await verifier.dpop.verify({
      proof: request.headers.dpop,
      method: request.method,
      url: `${verifier.issuer}${request.url.split('?')[0]!}`,
      accessToken: value,
      jkt: token.jkt,
    });
  } catch (err) {
    if (!(err instanceof DpopProofError)) throw err;
    throw new AppError(401, err.message, { ...challenge('DPoP', err.code, err.message), 'dpop-nonce': err.nonce });
  }
}

/**
 * The verified access token of a request. A 401 carries the challenge of the scheme used (RFC 6750,
 * RFC 9449 7.1): realm, and error="invalid_token" when a token was presented. A DPoP-bound token
 * is accepted only under the DPoP scheme with a valid proof; a plain one only as a bearer token.
 */
export async function authenticate(
  request: FastifyRequest,
  verifier: TokenVerifier,
  audience: string,
): Promise<AccessToken> {
  const challenge = challenges(verifier.issuer);
  const dpop = dpopToken(request.headers.authorization);
  const parsed = parseBearer(request.headers.authorization);
  const value = dpop ?? (parsed.kind === 'token' ? parsed.token : undefined);
  // no token at all (no header, another scheme, malformed): the bare challenge
  if (!value) throw new AppError(401, 'Token missing or invalid', challenge('Bearer'));
  const scheme = dpop ? 'DPoP' : 'Bearer';
  let token: AccessToken;
  try {
    token = await verifier.verify(value, audience);
  } catch (err) {
    if (err instanceof AppError && err.status === 401)
      throw new AppError(401, err.message, challenge(scheme, 'invalid_token'));
    throw err;
  }
  if (dpop) await checkDpop(request, verifier, value, token);
  else if (token.jkt)
    throw new AppError(401, 'Token is bound to a DPoP key; use the DPoP scheme', challenge('Bearer', 'invalid_token'));
  return token;
}

/** A 401 for a token that verified but may no longer be used (its client was disabled). */
export function tokenNoLongerValid(request: FastifyRequest, verifier: TokenVerifier, message: string): AppError {
  const scheme = dpopToken(request.headers.authorization) ? 'DPoP' : 'Bearer';
  return new AppError(401, message, challenges(verifier.issuer)(scheme, 'invalid_token'));
}

export function requireScopes(
  token: AccessToken,
  required: string[],
  message = 'Token must have all required scopes',
): void {
  if (!required.every((s) => token.scopes.has(s))) throw forbidden(message);
}

export { AppError };
