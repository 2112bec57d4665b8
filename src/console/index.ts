// The console feature: the helpdesk and organization-admin web console under /console
// (console-pages.ts) and its API twins under /2/ for programs. The API is authorized like the
// passkey API — a client_credentials token with the action's scope, from a client granted the
// organization — and both call the same functions as the admin CLI: recovery links
// (/2/recovery-link), the audit trail (/2/audit), the report (/2/report), bulk offboarding (/2/offboard).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { methodNotAllowed } from '../http/errors.ts';
import { checkRealm, positiveId } from '../http/organization-grant.ts';
import { AppError, badRequest, notFound } from '../errors.ts';
import { actorOf, checkEppn, organizationAccess, parseQuery, type OrgRequest, type StaffApiDeps } from './access.ts';
import { auditRoutes } from './audit-api.ts';
import { reportRoutes } from './report-api.ts';
import { offboardRoutes } from './offboard-api.ts';
import { createRecoveryLink, recoveryLinks, revokeLink } from '../webauthn/recovery-links.ts';
import { createSchema, listSchema, revokeSchema } from './recovery-schemas.ts';
import { consolePages } from './console-pages.ts';
import type { Keyring } from '../crypto.ts';
import type { Branding } from '../ui/page-brand.ts';
import { createCsrf } from '../ui/csrf.ts';

const MANAGE = 'recovery.manage';

// ---- steps -------------------------------------------------------------------------------

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
  const { eppn } = parseQuery(request, ['eppn']);
  return eppn === undefined ? null : checkEppn(eppn, 'eppn');
}

// ---- endpoints -----------------------------------------------------------------------------

function staffApi(deps: StaffApiDeps) {
  const { config, store } = deps;
  const access = organizationAccess(deps);
  const organizationOf = (request: OrgRequest) => access(request, MANAGE);

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
    await app.register(auditRoutes(deps));
    await app.register(reportRoutes(deps));
    await app.register(offboardRoutes(deps));
    app.post('/2/recovery-link/:org_id', { schema: createSchema, validatorCompiler: noSchemaValidation }, create);
    app.get('/2/recovery-link/:org_id', { schema: listSchema, validatorCompiler: noSchemaValidation }, list);
    app.delete('/2/recovery-link/:org_id/:id', { schema: revokeSchema, validatorCompiler: noSchemaValidation }, revoke);
    methodNotAllowed(app, '/2/recovery-link/:org_id', ['GET', 'POST']);
    methodNotAllowed(app, '/2/recovery-link/:org_id/:id', ['DELETE']);
  };
}

export interface ConsolePluginDeps extends StaffApiDeps {
  keys: Keyring;
  branding: Branding;
}

export function consolePlugin(deps: ConsolePluginDeps) {
  const pages = consolePages({ ...deps, csrf: createCsrf(deps.config, deps.keys) });
  return async function consoleFeature(app: FastifyInstance) {
    await app.register(staffApi(deps));
    await app.register(pages);
  };
}
