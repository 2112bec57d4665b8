// Events for applications and operators' tooling (webhooks, OpenID Shared Signals), derived from
// the audit trail: recordAudit() writes an audited change's events into the outbox in the same
// transaction, so an acknowledged change has its events and a rolled-back one has none. Delivery
// is the events feature's job (src/events/), never the request's.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { findUserByEppn } from '../store/directory.ts';
import { insertEvent, insertEvents, type NewEvent } from '../store/events.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Every event type; webhooks filter on these names. */
export const EVENT_TYPES = [
  'passkey.created',
  'passkey.first_used',
  'passkey.deleted',
  'user.created',
  'user.disabled',
  'user.enabled',
  'user.deleted',
  'password.changed',
  'session.revoked',
  'recovery_link.created',
  'recovery_link.used',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

const CAEP = 'https://schemas.openid.net/secevent/caep/event-type';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';

/** Shared Signals event types (CAEP 1.0, RISC 1.0) and the event types they are sent for. */
export const SSF_EVENT_TYPES = {
  credentialChange: `${CAEP}/credential-change`,
  sessionRevoked: `${CAEP}/session-revoked`,
  accountDisabled: `${RISC}/account-disabled`,
  accountEnabled: `${RISC}/account-enabled`,
  accountPurged: `${RISC}/account-purged`,
} as const;

export const SSF_TYPE_OF: Partial<Record<EventType, string>> = {
  'passkey.created': SSF_EVENT_TYPES.credentialChange,
  'passkey.deleted': SSF_EVENT_TYPES.credentialChange,
  'password.changed': SSF_EVENT_TYPES.credentialChange,
  'session.revoked': SSF_EVENT_TYPES.sessionRevoked,
  'user.disabled': SSF_EVENT_TYPES.accountDisabled,
  'user.enabled': SSF_EVENT_TYPES.accountEnabled,
  'user.deleted': SSF_EVENT_TYPES.accountPurged,
};

/** The `data` of an event (the webhook payload's): the user by eppn and sub, the organization, who acted. */
export interface EventData {
  eppn: string;
  org_id: number | null;
  /** the user's sub, as in their ID tokens */
  sub: string | null;
  /** passkey events: the passkey's id in the passkey API */
  id?: number;
  /** password.changed: 'delete' when the password was removed (the user signs in with passkeys only) */
  change?: 'delete';
  actor: { type: string; id: string | null };
}

/** What an audited change says about itself (an AuditEntry). */
export interface AuditedChange {
  action: string;
  actor: { type: string; id: string | null };
  at: number;
  orgId?: number | null;
  eppn?: string | null;
  passkeyIds?: number[];
  details?: Record<string, unknown>;
  sub?: string | null;
  /** users whose e-mail address the change changed: each is told at the old address and the new */
  emailChanges?: EmailChange[];
}

/** A user's e-mail address changed (an audited change's, not part of its record). */
export interface EmailChange {
  /** the user's eppn after the change */
  eppn: string;
  orgId: number;
  from: string | null;
  to: string | null;
}

/** The events an audited change produces, in order. */
function eventsOf(entry: AuditedChange): { type: EventType; id?: number; change?: 'delete' }[] {
  const passkeys = (type: EventType) => (entry.passkeyIds ?? []).map((id) => ({ type, id }));
  switch (entry.action) {
    case 'passkey.register':
    case 'passkey.import':
      return passkeys('passkey.created');
    case 'passkey.first_use':
      return passkeys('passkey.first_used');
    case 'passkey.delete':
    case 'passkey.delete_user':
    case 'passkey.delete_by_user':
      return passkeys('passkey.deleted');
    case 'password.set':
    case 'password.change':
      return [{ type: 'password.changed' }];
    case 'password.remove':
      return [{ type: 'password.changed', change: 'delete' }];
    case 'recovery_link.create':
      return [{ type: 'recovery_link.created' }];
    case 'recovery_link.use':
      return [{ type: 'recovery_link.used' }];
    case 'user.add':
      return [{ type: 'user.created' }];
    case 'user.disable':
      // Disabling ends every session of the user.
      return [{ type: 'user.disabled' }, { type: 'session.revoked' }];
    case 'user.enable':
      return [{ type: 'user.enabled' }];
    case 'user.remove':
      return [{ type: 'user.deleted' }];
    default:
      return [];
  }
}

/** The events of one audited change, as the outbox stores them. */
async function newEvents(db: Q, entry: AuditedChange): Promise<NewEvent[]> {
  const events = eventsOf(entry);
  if (events.length === 0 || !entry.eppn) return [];
  const eppn = entry.eppn;
  // A removed user is gone from the directory by the time the removal is recorded: it names its sub.
  const named = entry.sub ?? (typeof entry.details?.sub === 'string' ? entry.details.sub : undefined);
  const sub = named ?? (await findUserByEppn(db, eppn))?.sub ?? null;
  return events.map((event) => {
    const data: EventData = {
      eppn,
      org_id: entry.orgId ?? null,
      sub,
      ...(event.id === undefined ? {} : { id: event.id }),
      ...(event.change === undefined ? {} : { change: event.change }),
      actor: { type: entry.actor.type, id: entry.actor.id },
    };
    return {
      at: entry.at,
      type: event.type,
      orgId: entry.orgId ?? null,
      subject: eppn,
      sub,
      ssfType: SSF_TYPE_OF[event.type] ?? null,
      data,
    };
  });
}

/** Writes the events of one audited change; call it with the change's transaction (recordAudit does). */
export async function recordEvents(db: Q, entry: AuditedChange): Promise<number> {
  const events = await newEvents(db, entry);
  for (const event of events) await insertEvent(db, event);
  return events.length;
}

/** Writes the events of many audited changes, in their order, with multi-row statements (recordAudits). */
export async function recordEventsOf(db: Q, entries: AuditedChange[]): Promise<number> {
  const events: NewEvent[] = [];
  for (const entry of entries) events.push(...(await newEvents(db, entry)));
  await insertEvents(db, events);
  return events.length;
}
