// The staff API: what the helpdesk console does, for programs. Authorized like the passkey API —
// a client_credentials token with the action's scope, from a client granted the organization —
// and calling the same functions as the admin CLI. Today: recovery links (/2/recovery-link).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { authenticate, requireScopes, type AccessToken, type TokenVerifier } from '../http/bearer.ts';
import { methodNotAllowed } from '../http/errors.ts';
import {
  checkClientActive,
  checkClientGrant,
  checkRealm,
  loadOrganization,
  positiveId,
  type GrantedOrganization,
} from '../http/organization-grant.ts';
import { AppError, badRequest, notFound } from '../errors.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';
import type { Actor } from '../audit/index.ts';
import { createRecoveryLink, recoveryLinks, revokeLink } from '../webauthn/recovery-links.ts';
import { createSchema, listSchema, revokeSchema } from './recovery-schemas.ts';

export interface StaffApiDeps {
  config: Config;
  store: Store;
  verifier: TokenVerifier;
  now: () => number;
}

const MANAGE = 'recovery.manage';
type OrgRequest = FastifyRequest<{ Params: { org_id: string } }>;

// ---- steps -------------------------------------------------------------------------------

function checkEppn(raw: unknown, where: string): string {
  if (typeof raw !== 'string') throw badRequest(`Invalid '${where}' -- eppn is required`);
  const eppn = normalizeEppn(raw);
  const problem = eppnProblem(eppn);
  if (problem) throw badRequest(`Invalid '${where}' -- ${problem}`);
  return eppn;
}

interface CreateBody {
  eppn: string;
  ttlMs: number | undefined;
  deleteOthers: boolean;
}

/** The body, field by field: unknown fields are refused, not ignored. */
function readCreateBody(body: unknown): CreateBody {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a JSON object');
  const { eppn, ttl_seconds: ttl, delete_others: deleteOthers, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw badRequest(`Unknown field '${unknown.slice(0, 40)}'`);
  if (ttl !== undefined && (!Number.isInteger(ttl) || (ttl as number) < 60 || (ttl as number) > 2_592_000))
    throw badRequest("Invalid 'ttl_seconds' -- must be an integer from 60 to 2592000");
  if (deleteOthers !== undefined && typeof deleteOthers !== 'boolean')
    throw badRequest("Invalid 'delete_others' -- must be true or false");
  return {
    eppn: checkEppn(eppn, 'eppn'),
    ttlMs: ttl === undefined ? undefined : (ttl as number) * 1000,
    deleteOthers: deleteOthers === true,
  };
}

/** One query parameter at most (eppn), given once. */
function readListQuery(request: FastifyRequest): string | null {
  const at = request.url.indexOf('?');
  let eppn: string | null = null;
  if (at < 0) return eppn;
  for (const [name, value] of new URLSearchParams(request.url.slice(at + 1))) {
    if (name !== 'eppn') throw badRequest(`Unknown query parameter '${name.slice(0, 40)}'`);
    if (eppn !== null) throw badRequest("Invalid 'eppn' query parameter -- given more than once");
    eppn = checkEppn(value, 'eppn');
  }
  return eppn;
}

const actorOf = (token: AccessToken, request: FastifyRequest): Actor => ({
  type: 'client',
  id: token.clientId,
  requestId: request.id,
  ip: request.ip,
});

// ---- endpoints -----------------------------------------------------------------------------

export function staffApiPlugin(deps: StaffApiDeps) {
  const { config, store, verifier } = deps;
  const audience = `${config.publicUrl}/2/passkey`;

  /** authenticate -> requireScopes -> loadOrganization -> checkClientActive -> checkClientGrant */
  async function organizationOf(request: OrgRequest): Promise<{ token: AccessToken; org: GrantedOrganization }> {
    const token = await authenticate(request, verifier, audience);
    requireScopes(token, [MANAGE]);
    const org = await loadOrganization(store, token, request.params.org_id);
    checkClientActive(request, verifier, org);
    checkClientGrant(org);
    return { token, org };
  }

  async function create(request: OrgRequest, reply: FastifyReply) {
    const { token, org } = await organizationOf(request);
    const body = readCreateBody(request.body);
    checkRealm(body.eppn, org);
    const link = await createRecoveryLink(
      store,
      config.publicUrl,
      { eppn: body.eppn, ttlMs: body.ttlMs, deleteOthers: body.deleteOthers, orgId: org.id },
      { actor: actorOf(token, request), now: deps.now() },
    );
    return reply.code(201).header('cache-control', 'no-store').send(link);
  }

  async function list(request: OrgRequest) {
    const { org } = await organizationOf(request);
    const eppn = readListQuery(request);
    checkRealm(eppn, org);
    try {
      return await recoveryLinks(store, { eppn: eppn ?? undefined, orgId: org.id }, deps.now());
    } catch (err) {
      // An eppn nobody has in this organization simply lists nothing, as in the passkey API.
      if (err instanceof AppError && err.status === 404) return [];
      throw err;
    }
  }

  async function revoke(request: FastifyRequest<{ Params: { org_id: string; id: string } }>) {
    const { token, org } = await organizationOf(request);
    const id = positiveId(request.params.id);
    if (id === undefined) throw notFound('Recovery link does not exist');
    try {
      await revokeLink(store, id, { actor: actorOf(token, request), now: deps.now() }, org.id);
    } catch (err) {
      if (err instanceof AppError && err.status === 404) throw notFound('Recovery link does not exist');
      throw err;
    }
    return { id, revoked: true };
  }

  const noSchemaValidation = () => () => true;
  return async function staffApi(app: FastifyInstance) {
    app.post('/2/recovery-link/:org_id', { schema: createSchema, validatorCompiler: noSchemaValidation }, create);
    app.get('/2/recovery-link/:org_id', { schema: listSchema, validatorCompiler: noSchemaValidation }, list);
    app.delete('/2/recovery-link/:org_id/:id', { schema: revokeSchema, validatorCompiler: noSchemaValidation }, revoke);
    methodNotAllowed(app, '/2/recovery-link/:org_id', ['GET', 'POST']);
    methodNotAllowed(app, '/2/recovery-link/:org_id/:id', ['DELETE']);
  };
}
