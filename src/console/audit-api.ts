// The audit trail of one organization for programs: GET /2/audit/<org_id>, scope audit.read,
// newest first, keyset-paginated on the record id (`before`, and a Link to the next page),
// filtered by user, action, actor and time; JSON, or CSV with format=csv. The records are the
// admin CLI's (`audit list`), in the same shape.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { auditView } from '../audit/index.ts';
import { listAuditEvents } from '../store/audit.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { checkRealm } from '../http/organization-grant.ts';
import { organizationAccess, parseQuery, type OrgRequest, type StaffApiDeps } from './access.ts';
import { AUDIT_QUERY, filterOf, toCsv } from './audit-query.ts';
import { auditSchema } from './audit-schemas.ts';

const READ = 'audit.read';
/** The next page: the query as sent, with before = the last record's id. */
function nextPage(publicUrl: string, request: OrgRequest, lastId: number): string {
  const params = new URLSearchParams(request.url.slice(request.url.indexOf('?') + 1 || request.url.length));
  params.set('before', String(lastId));
  return `${publicUrl}/2/audit/${request.params.org_id}?${params.toString()}`;
}

export function auditRoutes(deps: StaffApiDeps) {
  const access = organizationAccess(deps);

  async function list(request: OrgRequest, reply: FastifyReply) {
    const { org } = await access(request, READ);
    const { filter, eppn, csv } = filterOf(parseQuery(request, AUDIT_QUERY), org.id);
    checkRealm(eppn, org);
    const records = (await listAuditEvents(deps.store.db, filter)).map(auditView);
    if (records.length === filter.limit)
      reply.header('link', `<${nextPage(deps.config.publicUrl, request, records.at(-1)!.id)}>; rel="next"`);
    reply.header('cache-control', 'no-store');
    if (!csv) return records;
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="audit-${org.id}.csv"`)
      .send(toCsv(records));
  }

  const noSchemaValidation = () => () => true;
  return async function audit(app: FastifyInstance) {
    app.get('/2/audit/:org_id', { schema: auditSchema, validatorCompiler: noSchemaValidation }, list);
    methodNotAllowed(app, '/2/audit/:org_id', ['GET']);
  };
}
