// GET /userinfo/v1/userinfo (the signed-in user's directory attributes, released per attribute
// group and granted scope) and GET /userinfo/v1/lookup/<eppn or sub> (a user of an organization
// the calling client is granted, for client-credentials clients with scope system-all-users,
// released per the client's attribute groups).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, parseBearer, requireScopes, tokenNoLongerValid, type AccessToken } from '../http/bearer.ts';
import { findClient } from '../store/clients.ts';
import { findGrantedUser } from '../store/group-queries.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';
import { forbidden, notFound } from '../errors.ts';
import { words } from '../vocabulary.ts';
import { releasedGroups } from './claims.ts';
import { clientGroups, directoryAttributes } from './directory-attributes.ts';
import { checkOrigin } from './browser-access.ts';
import { authenticateUser, NO_STORE, resourceAudience, type UserBoundDeps } from './user-bound.ts';

export const EXTENDED_PATH = '/userinfo/v1/userinfo';
export const LOOKUP_PATH = '/userinfo/v1/lookup';
export const LOOKUP_SCOPE = 'system-all-users';
/** The organization grant a lookup client needs: the one the passkey API checks. */
const LOOKUP_GRANT = 'admin';
const UNKNOWN_USER = 'User does not exist';
const SCOPE_MISSING = 'Token must have all required scopes';
const SUB = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function extendedUserinfoHandler(deps: UserBoundDeps) {
  return async function extendedUserinfo(request: FastifyRequest, reply: FastifyReply) {
    const token = await authenticateUser(deps, request);
    checkOrigin(deps.config, request, reply, token.client);
    const groups = releasedGroups(words(token.client.groups), token.scopes);
    return reply.headers(NO_STORE).send(directoryAttributes(token.user, groups));
  };
}

export function lookupHandler(deps: UserBoundDeps) {
  const audience = `${deps.config.publicUrl}${LOOKUP_PATH}`;

  /**
   * A verified token of a client that is still enabled, with the client's row (its groups). A valid
   * token of another of the service's APIs is verified for its own audience, so that it is refused
   * for its scopes (403) rather than called invalid.
   */
  const authenticateClient = async (request: FastifyRequest) => {
    const value = parseBearer(request.headers.authorization);
    const aud = (value.kind === 'token' && resourceAudience(deps.config.publicUrl, value.token)) || audience;
    const token = await authenticate(request, deps.verifier, aud);
    const client = await findClient(deps.store.db, token.clientId);
    if (!client || client.disabled_at !== null)
      throw tokenNoLongerValid(request, deps.verifier, 'The client of this token is disabled or removed');
    return { token, client, forLookup: aud === audience };
  };

  /** system-all-users, on a token for this API (another API's token has other scopes only). */
  const requireLookupScope = (token: AccessToken, forLookup: boolean) => {
    if (!forLookup) throw forbidden(SCOPE_MISSING);
    requireScopes(token, [LOOKUP_SCOPE], SCOPE_MISSING);
  };

  /** A sub (UUID) or an eppn; anything else names nobody: the same 404 as an unknown user. */
  const parseIdentifier = (raw: string): { sub: string } | { eppn: string } => {
    if (SUB.test(raw)) return { sub: raw.toLowerCase() };
    const eppn = normalizeEppn(raw);
    if (eppnProblem(eppn)) throw notFound(UNKNOWN_USER);
    return { eppn };
  };

  const loadUser = async (clientId: string, raw: string) => {
    const user = await findGrantedUser(deps.store.db, parseIdentifier(raw), clientId, LOOKUP_GRANT);
    if (!user) throw notFound(UNKNOWN_USER);
    return user;
  };

  return async function lookup(request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) {
    const { token, client, forLookup } = await authenticateClient(request);
    requireLookupScope(token, forLookup);
    const user = await loadUser(token.clientId, request.params.id);
    return reply.headers(NO_STORE).send(directoryAttributes(user, clientGroups(client.groups)));
  };
}
