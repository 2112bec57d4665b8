// The token step of the endpoints that answer about the signed-in user (extended userinfo, the
// groups API): a user access token, checked as resolveUserToken checks it; a client-credentials
// token of this service, which is bound to no user, is refused with 403 rather than called invalid.
import type { FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import type { TokenVerifier } from '../http/bearer.ts';
import { AppError } from '../errors.ts';
import { resourceServers } from '../vocabulary.ts';
import { insufficientScope, readBearer, resolveUserToken, type TokenDeps, type UserToken } from './tokens.ts';

export interface UserBoundDeps extends TokenDeps {
  verifier: TokenVerifier;
}

export const NOT_BOUND = 'The access token is not bound to a user';

/** The audience of a JWT that names one of the service's resource servers, if the value is one. */
export function resourceAudience(publicUrl: string, value: string): string | undefined {
  let aud: unknown;
  try {
    aud = decodeJwt(value).aud;
  } catch {
    return undefined;
  }
  return typeof aud === 'string' && resourceServers(publicUrl).some((r) => r.id === aud) ? aud : undefined;
}

/** A valid client-credentials token of this service: 403; anything else stays the user token's 401. */
async function refuseClientToken(deps: UserBoundDeps, request: FastifyRequest, failure: unknown): Promise<never> {
  const value = readBearer(deps.config, request);
  const audience = resourceAudience(deps.config.publicUrl, value);
  if (audience !== undefined) {
    const verified = await deps.verifier.verify(value, audience).then(
      () => true,
      () => false,
    );
    if (verified) throw insufficientScope(deps.config, NOT_BOUND);
  }
  throw failure;
}

export async function authenticateUser(deps: UserBoundDeps, request: FastifyRequest): Promise<UserToken> {
  try {
    return await resolveUserToken(deps, request);
  } catch (err) {
    if (err instanceof AppError && err.status === 401 && request.headers.authorization !== undefined)
      return refuseClientToken(deps, request, err);
    throw err;
  }
}

/** What every answer about a user carries: never stored by a cache. */
export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' } as const;
