// Audit events: written in the same transaction as the change they record.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { AuditEventsTable, DB } from './schema.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type AuditRow = Selectable<AuditEventsTable>;

export interface AuditEvent {
  at: number;
  kind: string;
  clientId?: string | null;
  orgId?: number | null;
  eppn?: string | null;
  passkeyIds?: number[];
  requestId?: string | null;
  details?: Record<string, unknown>;
  actorType?: string | null;
  actor?: string | null;
  subject?: string | null;
  source?: string | null;
}

function auditRow(e: AuditEvent) {
  return {
    at: e.at,
    kind: e.kind,
    client_id: e.clientId ?? null,
    org_id: e.orgId ?? null,
    eppn: e.eppn ?? null,
    passkey_ids: JSON.stringify(e.passkeyIds ?? []),
    request_id: e.requestId ?? null,
    details: JSON.stringify(e.details ?? {}),
    actor_type: e.actorType ?? null,
    actor: e.actor ?? null,
    subject: e.subject ?? e.eppn ?? null,
    source: e.source ?? null,
  };
}

export async function insertAuditEvent(db: Q, e: AuditEvent): Promise<void> {
  await db.insertInto('audit_events').values(auditRow(e)).execute();
}

/** Many records, each the row insertAuditEvent writes, many to a statement (in their order). */
export async function insertAuditEvents(db: Q, events: AuditEvent[]): Promise<void> {
  for (const part of chunks(events)) await db.insertInto('audit_events').values(part.map(auditRow)).execute();
}

export interface AuditFilter {
  orgId?: number;
  actor?: string;
  subject?: string;
  /** an action, or a prefix ending in '.' ('passkey.') */
  action?: string;
  since?: number;
  until?: number;
  /** keyset pagination, newest first: only records with a smaller id */
  before?: number;
  /** oldest first (export): only records with a larger id */
  after?: number;
  limit?: number;
}

/** Audit records matching the filter: newest first, or oldest first when walking with `after`. */
export function listAuditEvents(db: Q, filter: AuditFilter): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_events').selectAll();
  if (filter.orgId !== undefined) q = q.where('org_id', '=', filter.orgId);
  if (filter.actor !== undefined) q = q.where('actor', '=', filter.actor);
  if (filter.subject !== undefined) q = q.where('subject', '=', filter.subject);
  if (filter.action !== undefined)
    q = filter.action.endsWith('.')
      ? q.where('kind', '>=', filter.action).where('kind', '<', `${filter.action.slice(0, -1)}/`)
      : q.where('kind', '=', filter.action);
  if (filter.since !== undefined) q = q.where('at', '>=', filter.since);
  if (filter.until !== undefined) q = q.where('at', '<', filter.until);
  if (filter.before !== undefined) q = q.where('id', '<', filter.before);
  if (filter.after !== undefined) q = q.where('id', '>', filter.after);
  return q
    .orderBy('id', filter.after !== undefined ? 'asc' : 'desc')
    .limit(filter.limit ?? 1000)
    .execute();
}

/** Retention: removes records older than `before`, at most `limit` at a time; returns how many went. */
export async function deleteAuditEventsBefore(db: Q, before: number, limit = 10_000): Promise<number> {
  const r = await db
    .deleteFrom('audit_events')
    .where('id', 'in', (eb) => eb.selectFrom('audit_events').select('id').where('at', '<', before).limit(limit))
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}
