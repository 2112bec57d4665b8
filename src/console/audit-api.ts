// The audit trail of one organization for programs: GET /2/audit/<org_id>, scope audit.read,
// newest first, keyset-paginated on the record id (`before`, and a Link to the next page),
// filtered by user, action, actor and time; JSON, or CSV with format=csv. The records are the
// admin CLI's (`audit list`), in the same shape.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AUDIT_ACTIONS, auditView } from '../audit/index.ts';
import { listAuditEvents, type AuditFilter } from '../store/audit.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { checkRealm } from '../http/organization-grant.ts';
import { badRequest } from '../errors.ts';
import { checkEppn, organizationAccess, parseQuery, type OrgRequest, type StaffApiDeps } from './access.ts';
import { auditSchema } from './audit-schemas.ts';

const READ = 'audit.read';
const QUERY = ['eppn', 'action', 'actor', 'since', 'until', 'before', 'limit', 'format'] as const;
type Query = Partial<Record<(typeof QUERY)[number], string>>;
const MAX_LIMIT = 1000;

function time(raw: string | undefined, name: string): number | undefined {
  if (raw === undefined) return undefined;
  const at = Date.parse(raw);
  if (Number.isNaN(at)) throw badRequest(`Invalid '${name}' query parameter -- not an ISO 8601 time`);
  return at;
}

function count(raw: string | undefined, name: string, max: number, fallback?: number): number | undefined {
  if (raw === undefined) return fallback;
  if (!/^[0-9]{1,15}$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
    throw badRequest(`Invalid '${name}' query parameter -- must be an integer from 1 to ${max}`);
  return Number(raw);
}

function action(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const known = raw.endsWith('.')
    ? AUDIT_ACTIONS.some((a) => a.startsWith(raw))
    : (AUDIT_ACTIONS as readonly string[]).includes(raw);
  if (!known) throw badRequest("Invalid 'action' query parameter -- not an audit action");
  return raw;
}

/** The filter, each parameter checked; the organization is always the path's. */
function filterOf(query: Query, orgId: number): { filter: AuditFilter; eppn: string | null; csv: boolean } {
  if (query.format !== undefined && query.format !== 'csv' && query.format !== 'json')
    throw badRequest("Invalid 'format' query parameter -- must be json or csv");
  const eppn = query.eppn === undefined ? null : checkEppn(query.eppn, 'eppn');
  const filter: AuditFilter = {
    orgId,
    subject: eppn ?? undefined,
    action: action(query.action),
    actor: query.actor,
    since: time(query.since, 'since'),
    until: time(query.until, 'until'),
    before: count(query.before, 'before', Number.MAX_SAFE_INTEGER),
    limit: count(query.limit, 'limit', MAX_LIMIT, 100),
  };
  return { filter, eppn, csv: query.format === 'csv' };
}

const CSV_COLUMNS = ['id', 'at', 'action', 'actor_type', 'actor', 'subject', 'eppn', 'client_id', 'source', 'details'];

/** One CSV field: quoted when it must be; a leading = + - @ is defused so a spreadsheet shows it as text. */
function csvField(value: unknown): string {
  let text = value === null || value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

function toCsv(records: ReturnType<typeof auditView>[]): string {
  const lines = records.map((r) => CSV_COLUMNS.map((c) => csvField(r[c as keyof typeof r])).join(','));
  return [CSV_COLUMNS.join(','), ...lines].join('\r\n') + '\r\n';
}

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
    const { filter, eppn, csv } = filterOf(parseQuery(request, QUERY), org.id);
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
