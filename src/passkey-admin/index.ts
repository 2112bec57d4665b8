// The passkey administration API: /2/passkey/<org_id>. Each endpoint is a pipeline of small
// named steps; the order of the steps is the order of the checks documented in docs/passkey-api.md.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { authenticate, requireScopes, type AccessToken, type TokenVerifier } from '../http/bearer.ts';
import { methodNotAllowed } from '../http/errors.ts';
import {
  checkClientActive,
  checkClientGrant,
  checkRealm,
  loadOrganization,
  organizationAccessCache,
  parseQuery,
  positiveId,
  requireOrganization,
  type GrantedOrganization as Organization,
} from '../http/organization-grant.ts';
import { badRequest, notFound } from '../errors.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';
import {
  listOrganizationPasskeys,
  listPasskeysByEppn,
  listPasskeysOfEppn,
  type PasskeyListRow,
} from '../store/passkeys.ts';
import { passkeyDetails, passkeyObject, type PasskeyObject } from '../webauthn/passkey-object.ts';
import { removeOrganizationPasskey, removeUserPasskeys, type Actor } from '../webauthn/passkey-removal.ts';
import { mintOffset, readOffset, type ListRequest } from './cursor.ts';
import { deleteOneSchema, deleteUserSchema, listSchema } from './schemas.ts';
import { cachingVerifier } from './verified-token-cache.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';

export interface PasskeyAdminDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  verifier: TokenVerifier;
  now: () => number;
  /** the authorization server, whose sessions end when a user's passkeys are all deleted */
  provider: ProviderHolder;
}

export const MAX_PER_PAGE = 1000;
const READ = 'passkey.read';
const DELETE = 'passkey.delete';

type QueryName = 'eppn' | 'per_page' | 'offset' | 'details';
type Query = Partial<Record<QueryName, string>>;

// ---- steps -------------------------------------------------------------------------------

function checkEppn(raw: string): string {
  const eppn = normalizeEppn(raw);
  const problem = eppnProblem(eppn);
  if (problem) throw badRequest(`Invalid 'eppn' query parameter -- ${problem}`);
  return eppn;
}

function requireEppn(query: Query): string {
  if (query.eppn === undefined)
    throw badRequest("Missing 'eppn' query parameter -- passkeys are deleted one user at a time");
  return checkEppn(query.eppn);
}

function checkPerPage(raw: string | undefined): number {
  if (raw === undefined) return MAX_PER_PAGE;
  const n = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : 0;
  if (n < 1 || n > MAX_PER_PAGE)
    throw badRequest(`Invalid 'per_page' query parameter -- must be an integer from 1 to ${MAX_PER_PAGE}`);
  return n;
}

/** A path segment that is not a positive integer names nothing: the same 404 as an unknown id. */
interface UserList {
  org: Organization;
  rows: PasskeyListRow[];
  /** the offset's problem, refused after the organization's checks like on the organization path */
  offsetProblem?: string;
}

/**
 * One user's list in one round trip: the user's passkeys, with the organization and the caller's
 * grant when they are not kept already (an offset that does not open lists from the start until it
 * is refused).
 */
async function loadUserList(
  deps: PasskeyAdminDeps,
  token: AccessToken,
  rawOrgId: string,
  eppn: string,
  perPage: number,
  offset: string | undefined,
): Promise<UserList> {
  const orgId = positiveId(rawOrgId);
  if (orgId === undefined) throw notFound('Organization does not exist');
  const read =
    offset === undefined
      ? undefined
      : readOffset(deps.keys.cursor, offset, { path: 'user', orgId, eppn, perPage }, deps.now());
  const after = read?.ok ? read.lastId : 0;
  const offsetProblem = read && !read.ok ? { offsetProblem: read.reason } : {};
  const cache = organizationAccessCache(deps.store);
  const kept = cache.get(token.clientId, orgId);
  if (kept) {
    return {
      org: kept,
      rows: await listPasskeysOfEppn(deps.store.db, orgId, eppn, after, perPage + 1),
      ...offsetProblem,
    };
  }
  const mark = cache.mark();
  const found = await listPasskeysByEppn(deps.store.db, { orgId, clientId: token.clientId }, eppn, after, perPage + 1);
  cache.remember(token.clientId, found.organization, mark);
  return { org: requireOrganization(found.organization), rows: found.passkeys, ...offsetProblem };
}

function checkOffset(problem: string | undefined): void {
  if (problem !== undefined) throw badRequest(`Invalid 'offset' query parameter -- ${problem}`);
}

/** The organization, checked in the documented order, and the rows of the page asked for. */
async function pageOf(
  deps: PasskeyAdminDeps,
  request: FastifyRequest<{ Params: { org_id: string } }>,
  verifier: TokenVerifier,
  token: AccessToken,
  asked: { eppn: string | null; perPage: number; offset: string | undefined },
): Promise<{ org: Organization; rows: PasskeyListRow[] }> {
  const { eppn, perPage } = asked;
  if (eppn === null) {
    const org = await loadOrganization(deps.store, token, request.params.org_id);
    checkClientActive(request, verifier, org);
    checkClientGrant(org);
    const after = startAfter(deps, asked.offset, { path: 'organization', orgId: org.id, eppn, perPage });
    return { org, rows: await listOrganizationPasskeys(deps.store.db, org.id, after, perPage + 1) };
  }
  const list = await loadUserList(deps, token, request.params.org_id, eppn, perPage, asked.offset);
  checkClientActive(request, verifier, list.org);
  checkClientGrant(list.org);
  checkRealm(eppn, list.org);
  checkOffset(list.offsetProblem);
  return list;
}

/** `details=authenticator` (the only value) adds what is known of each passkey's authenticator. */
function checkDetails(raw: string | undefined): boolean {
  if (raw === undefined) return false;
  if (raw !== 'authenticator') throw badRequest("Invalid 'details' query parameter -- must be authenticator");
  return true;
}

async function withAuthenticators(deps: PasskeyAdminDeps, body: PasskeyObject[]) {
  const found = await passkeyDetails(
    deps.store.db,
    body.map((p) => p.id),
    deps.config.aaguidData,
  );
  return body.map((p) => ({ ...p, authenticator: found.get(p.id) }));
}

function startAfter(deps: PasskeyAdminDeps, offset: string | undefined, list: ListRequest): number {
  if (offset === undefined) return 0;
  const result = readOffset(deps.keys.cursor, offset, list, deps.now());
  if (!result.ok) throw badRequest(`Invalid 'offset' query parameter -- ${result.reason}`);
  return result.lastId;
}

/** The next page's URL: PUBLIC_URL, the canonical path, the query as the client sent it, a new offset. */
function nextPageUrl(config: Config, request: FastifyRequest, orgId: number, offset: string): string {
  const at = request.url.indexOf('?');
  const kept =
    at < 0
      ? []
      : request.url
          .slice(at + 1)
          .split('&')
          .filter((part) => part !== '' && new URLSearchParams(part).keys().next().value !== 'offset');
  return `${config.publicUrl}/2/passkey/${orgId}?${[...kept, `offset=${offset}`].join('&')}`;
}

const actorOf = (token: AccessToken, request: FastifyRequest, at: number): Actor => ({
  clientId: token.clientId,
  requestId: request.id,
  at,
  ip: request.ip,
});

// ---- endpoints -----------------------------------------------------------------------------

export function passkeyAdminPlugin(deps: PasskeyAdminDeps) {
  const { config, store } = deps;
  const verifier = cachingVerifier(deps.verifier);
  const audience = `${config.publicUrl}/2/passkey`;

  async function list(request: FastifyRequest<{ Params: { org_id: string } }>, reply: FastifyReply) {
    const token = await authenticate(request, verifier, audience);
    requireScopes(token, [READ]);
    const query = parseQuery(request, ['eppn', 'per_page', 'offset', 'details']);
    const eppn = query.eppn === undefined ? null : checkEppn(query.eppn);
    const details = checkDetails(query.details);
    const perPage = checkPerPage(query.per_page);
    const { org, rows } = await pageOf(deps, request, verifier, token, { eppn, perPage, offset: query.offset });
    const listRequest: ListRequest = { path: eppn === null ? 'organization' : 'user', orgId: org.id, eppn, perPage };

    // One row more than the page tells whether a next page exists, so the last page has no Link.
    // An eppn nobody has in this organization simply lists nothing.
    if (rows.length > perPage) {
      rows.length = perPage;
      const offset = mintOffset(
        deps.keys.cursor,
        listRequest,
        rows[perPage - 1]!.id,
        deps.now() + config.paginationTokenTtl * 1000,
      );
      reply.header('link', `<${nextPageUrl(config, request, org.id, offset)}>; rel="next"`);
    }
    const body = new Array<PasskeyObject>(rows.length);
    for (let i = 0; i < rows.length; i++) body[i] = passkeyObject(rows[i]!);
    return details ? withAuthenticators(deps, body) : body;
  }

  async function deleteUser(request: FastifyRequest<{ Params: { org_id: string } }>) {
    const token = await authenticate(request, verifier, audience);
    requireScopes(token, [DELETE]);
    const eppn = requireEppn(parseQuery(request, ['eppn']));
    const org = await loadOrganization(store, token, request.params.org_id);
    checkClientActive(request, verifier, org);
    checkClientGrant(org);
    checkRealm(eppn, org);

    const { ids, sub } = await removeUserPasskeys(store, actorOf(token, request, deps.now()), org.id, eppn);
    request.log.info(
      { client_id: token.clientId, org_id: org.id, eppn, passkey_ids: ids, deleted_count: ids.length },
      'passkeys deleted',
    );
    // Whoever holds the user's sessions may be who the passkeys were removed from: sign them out everywhere.
    if (sub !== undefined) {
      const ended = await endUserSessions(store, deps.provider.current(), sub, deps.now);
      request.log.info({ client_id: token.clientId, org_id: org.id, eppn, sessions: ended.sessions }, 'sessions ended');
    }
    return { deleted_count: ids.length, eppn };
  }

  async function deleteOne(request: FastifyRequest<{ Params: { org_id: string; id: string } }>) {
    const token = await authenticate(request, verifier, audience);
    requireScopes(token, [DELETE]);
    parseQuery(request, []);
    const org = await loadOrganization(store, token, request.params.org_id);
    checkClientActive(request, verifier, org);
    checkClientGrant(org);
    const id = positiveId(request.params.id);
    if (id === undefined) throw notFound('Passkey does not exist');

    // Another organization's passkey is "not found" too: its existence is not this client's business.
    const deleted = await removeOrganizationPasskey(store, actorOf(token, request, deps.now()), org.id, id);
    if (!deleted) throw notFound('Passkey does not exist');
    const owner = deleted.eppn;
    request.log.info(
      { client_id: token.clientId, org_id: org.id, eppn: owner, passkey_ids: [id], deleted_count: 1 },
      'passkeys deleted',
    );
    return { deleted: true, id };
  }

  // Schemas document the routes and serialize responses; the steps above do the validation, so
  // that each rejection has its documented status, message and place in the order of checks.
  const noSchemaValidation = () => () => true;

  return async function passkeyAdmin(app: FastifyInstance) {
    app.get('/2/passkey/:org_id', { schema: listSchema, validatorCompiler: noSchemaValidation }, list);
    app.delete('/2/passkey/:org_id', { schema: deleteUserSchema, validatorCompiler: noSchemaValidation }, deleteUser);
    app.delete('/2/passkey/:org_id/:id', { schema: deleteOneSchema, validatorCompiler: noSchemaValidation }, deleteOne);
    methodNotAllowed(app, '/2/passkey/:org_id', ['GET', 'DELETE']);
    methodNotAllowed(app, '/2/passkey/:org_id/:id', ['DELETE']);
  };
}
