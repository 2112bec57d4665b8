// Bulk offboarding for programs: POST /2/offboard/<org_id> with a list of eppns and a reason.
// With dry_run it only says what would go; without, every listed user's passkeys are deleted
// exactly as DELETE /2/passkey/<org_id>?eppn= does (the same function, audit record and events,
// the user's sessions ended), with the reason in each record. A list with any bad line is
// refused as a whole, before anything is deleted.
import type { FastifyInstance } from 'fastify';
import { methodNotAllowed } from '../http/errors.ts';
import type { GrantedOrganization } from '../http/organization-grant.ts';
import { badRequest } from '../errors.ts';
import { checkEppnList, MAX_OFFBOARD, offboardUsers, previewOffboarding } from './offboarding.ts';
import { organizationAccess, type OrgRequest, type StaffApiDeps } from './access.ts';
import { offboardSchema } from './offboard-schemas.ts';

const DELETE = 'passkey.delete';
const CONTROL = /[\u0000-\u001f\u007f]/;

interface Offboarding {
  eppns: string[];
  reason: string;
  dryRun: boolean;
}

/** Every line checked; the first problems are named (line numbers from 1), and nothing happens. */
function readBody(body: unknown, org: GrantedOrganization): Offboarding {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a JSON object');
  const { eppns, reason, dry_run: dryRun, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw badRequest(`Unknown field '${unknown.slice(0, 40)}'`);
  if (!Array.isArray(eppns) || eppns.length === 0) throw badRequest("Invalid 'eppns' -- a non-empty array of eppns");
  if (eppns.length > MAX_OFFBOARD) throw badRequest(`Invalid 'eppns' -- at most ${MAX_OFFBOARD} per request`);
  if (typeof reason !== 'string' || !reason.trim() || reason.length > 500 || CONTROL.test(reason))
    throw badRequest("Invalid 'reason' -- one line of 1 to 500 characters");
  if (dryRun !== undefined && typeof dryRun !== 'boolean') throw badRequest("Invalid 'dry_run' -- true or false");
  const list = checkEppnList(eppns, org.realm);
  if (!list.ok)
    throw badRequest(`Invalid 'eppns' -- ${list.bad} bad line(s), nothing done: ${list.problems.join('; ')}`);
  return { eppns: list.eppns, reason: reason.trim(), dryRun: dryRun === true };
}

export function offboardRoutes(deps: StaffApiDeps) {
  const access = organizationAccess(deps);

  async function offboard(request: OrgRequest) {
    const { token, org } = await access(request, DELETE);
    const asked = readBody(request.body, org);
    if (asked.dryRun) {
      const { found, notFound, passkeys } = await previewOffboarding(deps, org.id, asked.eppns);
      return { dry_run: true, not_found: notFound, found, passkeys };
    }
    const actor = { clientId: token.clientId, requestId: request.id, ip: request.ip, reason: asked.reason };
    const { found, notFound, passkeys } = await offboardUsers(deps, org.id, asked.eppns, actor);
    request.log.info({ client_id: token.clientId, org_id: org.id, users: found.length }, 'bulk offboarding');
    return { dry_run: false, not_found: notFound, found, passkeys };
  }

  const noSchemaValidation = () => () => true;
  return async function offboarding(app: FastifyInstance) {
    app.post(
      '/2/offboard/:org_id',
      { schema: offboardSchema, validatorCompiler: noSchemaValidation, bodyLimit: 1024 * 1024 },
      offboard,
    );
    methodNotAllowed(app, '/2/offboard/:org_id', ['POST']);
  };
}
