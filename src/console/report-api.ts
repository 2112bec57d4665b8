// The organization report for programs: GET /2/report/<org_id>, scope report.read — users and
// passkey coverage, passkeys by authenticator model, synced or device-bound, without user
// verification, not used for N days (unused_days, default 180), users with no way to sign in.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DEFAULT_UNUSED_DAYS, organizationReport } from './report.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { badRequest } from '../errors.ts';
import { organizationAccess, parseQuery, type OrgRequest, type StaffApiDeps } from './access.ts';
import { reportSchema } from './report-schemas.ts';

const READ = 'report.read';

export function unusedDays(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_UNUSED_DAYS;
  if (!/^[0-9]{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 3650)
    throw badRequest("Invalid 'unused_days' query parameter -- must be an integer from 1 to 3650");
  return Number(raw);
}

export function reportRoutes(deps: StaffApiDeps) {
  const access = organizationAccess(deps);

  async function report(request: OrgRequest, reply: FastifyReply) {
    const { org } = await access(request, READ);
    const days = unusedDays(parseQuery(request, ['unused_days']).unused_days);
    reply.header('cache-control', 'no-store');
    return organizationReport(deps, org.id, days);
  }

  const noSchemaValidation = () => () => true;
  return async function reports(app: FastifyInstance) {
    app.get('/2/report/:org_id', { schema: reportSchema, validatorCompiler: noSchemaValidation }, report);
    methodNotAllowed(app, '/2/report/:org_id', ['GET']);
  };
}
