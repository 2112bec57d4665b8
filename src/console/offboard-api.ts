// Bulk offboarding for programs: POST /2/offboard/<org_id> with a list of eppns and a reason.
// With dry_run it only says what would go; without, every listed user's passkeys are deleted
// exactly as DELETE /2/passkey/<org_id>?eppn= does (the same function, audit record and events,
// the user's sessions ended), with the reason in each record. A list with any bad line is
// refused as a whole, before anything is deleted.
import type { FastifyInstance } from 'fastify';
import { findUserByEppn } from '../store/directory.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { removeUserPasskeys } from '../webauthn/passkey-removal.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';
import { methodNotAllowed } from '../http/errors.ts';
import type { GrantedOrganization } from '../http/organization-grant.ts';
import { badRequest } from '../errors.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';
import { organizationAccess, type OrgRequest, type StaffApiDeps } from './access.ts';
import { offboardSchema } from './offboard-schemas.ts';

const DELETE = 'passkey.delete';
export const MAX_OFFBOARD = 10_000;
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
  const problems: string[] = [];
  const list: string[] = [];
  eppns.forEach((raw, i) => {
    const eppn = typeof raw === 'string' ? normalizeEppn(raw) : '';
    const problem = typeof raw !== 'string' ? 'is not a string' : eppnProblem(eppn);
    const realm = eppn.slice(eppn.lastIndexOf('@') + 1);
    if (problem) problems.push(`line ${i + 1}: eppn ${problem}`);
    else if (realm !== org.realm) problems.push(`line ${i + 1}: realm '${realm}' is not the organization's`);
    else list.push(eppn);
  });
  if (problems.length)
    throw badRequest(
      `Invalid 'eppns' -- ${problems.length} bad line(s), nothing done: ${problems.slice(0, 5).join('; ')}`,
    );
  return { eppns: [...new Set(list)], reason: reason.trim(), dryRun: dryRun === true };
}

export function offboardRoutes(deps: StaffApiDeps) {
  const access = organizationAccess(deps);

  /** Who is found and how many passkeys each has now. */
  async function preview(orgId: number, eppns: string[]) {
    const found: { eppn: string; passkeys: number }[] = [];
    const notFound: string[] = [];
    for (const eppn of eppns) {
      const user = await findUserByEppn(deps.store.db, eppn);
      if (!user || user.org_id !== orgId) notFound.push(eppn);
      else found.push({ eppn, passkeys: (await listUserCredentials(deps.store.db, user.id)).length });
    }
    return { found, notFound };
  }

  async function offboard(request: OrgRequest) {
    const { token, org } = await access(request, DELETE);
    const asked = readBody(request.body, org);
    const { found, notFound } = await preview(org.id, asked.eppns);
    const base = { dry_run: asked.dryRun, not_found: notFound };
    if (asked.dryRun) return { ...base, found, passkeys: found.reduce((n, f) => n + f.passkeys, 0) };
    const done: { eppn: string; passkeys: number }[] = [];
    const actor = { clientId: token.clientId, requestId: request.id, ip: request.ip, reason: asked.reason };
    for (const { eppn } of found) {
      const { ids, sub } = await removeUserPasskeys(deps.store, { ...actor, at: deps.now() }, org.id, eppn);
      if (sub !== undefined) await endUserSessions(deps.store, deps.provider.current(), sub, deps.now);
      done.push({ eppn, passkeys: ids.length });
    }
    request.log.info({ client_id: token.clientId, org_id: org.id, users: done.length }, 'bulk offboarding');
    return { ...base, found: done, passkeys: done.reduce((n, d) => n + d.passkeys, 0) };
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
