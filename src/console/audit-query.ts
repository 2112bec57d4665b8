// The audit trail's query, shared by the API (GET /2/audit) and the console's pages: each
// parameter checked, the organization always the caller's; and the CSV form of the records, with
// formula-looking fields defused so a spreadsheet shows them as text.
import { AUDIT_ACTIONS, type auditView } from '../audit/index.ts';
import type { AuditFilter } from '../store/audit.ts';
import { badRequest } from '../errors.ts';
import { checkEppn } from './access.ts';

export const AUDIT_QUERY = ['eppn', 'action', 'actor', 'since', 'until', 'before', 'limit', 'format'] as const;
export type AuditQuery = Partial<Record<(typeof AUDIT_QUERY)[number], string>>;
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
export function filterOf(query: AuditQuery, orgId: number): { filter: AuditFilter; eppn: string | null; csv: boolean } {
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
export function csvField(value: unknown): string {
  let text = value === null || value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function toCsv(records: ReturnType<typeof auditView>[]): string {
  const lines = records.map((r) => CSV_COLUMNS.map((c) => csvField(r[c as keyof typeof r])).join(','));
  return [CSV_COLUMNS.join(','), ...lines].join('\r\n') + '\r\n';
}
