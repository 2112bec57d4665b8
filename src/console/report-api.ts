// The organization report for programs: GET /2/report/<org_id>, scope report.read — users and
// passkey coverage, passkeys by authenticator model, synced or device-bound, without user
// verification, not used for N days (unused_days, default 180), users with no way to sign in.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { passkeyTotals, passkeysByModel, userTotals } from '../store/reports.ts';
import { authenticatorName } from '../webauthn/aaguid.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { badRequest } from '../errors.ts';
import { organizationAccess, parseQuery, type OrgRequest, type StaffApiDeps } from './access.ts';
import { reportSchema } from './report-schemas.ts';

const READ = 'report.read';
const DAY = 86_400_000;

function unusedDays(raw: string | undefined): number {
  if (raw === undefined) return 180;
  if (!/^[0-9]{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 3650)
    throw badRequest("Invalid 'unused_days' query parameter -- must be an integer from 1 to 3650");
  return Number(raw);
}

export function reportRoutes(deps: StaffApiDeps) {
  const access = organizationAccess(deps);

  async function report(request: OrgRequest, reply: FastifyReply) {
    const { org } = await access(request, READ);
    const days = unusedDays(parseQuery(request, ['unused_days']).unused_days);
    const db = deps.store.db;
    const [users, totals, models] = await Promise.all([
      userTotals(db, org.id),
      passkeyTotals(db, org.id, deps.now() - days * DAY),
      passkeysByModel(db, org.id),
    ]);
    reply.header('cache-control', 'no-store');
    return {
      org_id: org.id,
      users: users.users,
      users_with_passkey: totals.usersWithPasskey,
      coverage_percent: users.users === 0 ? 0 : Math.round((1000 * totals.usersWithPasskey) / users.users) / 10,
      users_without_sign_in_method: users.noSignInMethod,
      passkeys: totals.passkeys,
      synced: totals.synced,
      device_bound: totals.passkeys - totals.synced,
      without_user_verification: totals.withoutUserVerification,
      unused_days: days,
      unused: totals.unusedSince,
      by_model: models.map((m) => ({
        aaguid: m.aaguid,
        name: authenticatorName(m.aaguid, deps.config.aaguidData) ?? null,
        passkeys: m.count,
      })),
    };
  }

  const noSchemaValidation = () => () => true;
  return async function reports(app: FastifyInstance) {
    app.get('/2/report/:org_id', { schema: reportSchema, validatorCompiler: noSchemaValidation }, report);
    methodNotAllowed(app, '/2/report/:org_id', ['GET']);
  };
}
