// Audit events: written in the same transaction as the change they record.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { AuditEventsTable, DB } from './schema.ts';

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

export async function insertAuditEvent(db: Q, e: AuditEvent): Promise<void> {
  await db
    .insertInto('audit_events')
    .values({
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
    })
    .execute();
}

export function listAuditEvents(
  db: Q,
  filter: { orgId?: number; since?: number; limit?: number },
): Promise<AuditRow[]> {
  let q = db.selectFrom('audit_events').selectAll();
  if (filter.orgId !== undefined) q = q.where('org_id', '=', filter.orgId);
  if (filter.since !== undefined) q = q.where('at', '>=', filter.since);
  return q
    .orderBy('id')
    .limit(filter.limit ?? 1000)
    .execute();
}
