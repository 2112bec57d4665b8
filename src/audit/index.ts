// The audit trail: one writer for every security event, called inside the transaction of the
// change it records, so a change that is rolled back leaves no record and a recorded change
// happened. Every surface (web pages, APIs, the admin CLI, provisioning) describes who acted the
// same way, with an Actor.
import { userInfo } from 'node:os';
import ipaddr from 'ipaddr.js';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { insertAuditEvent, insertAuditEvents, type AuditEvent, type AuditRow } from '../store/audit.ts';
import { iso } from '../time.ts';
import { countAudit } from '../http/metrics.ts';
import { recordEvents, recordEventsOf, type EmailChange } from './events.ts';
import { recordNotification } from './notifications.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Every action the trail records; `audit list --action` accepts these (and a prefix ending in '.'). */
export const AUDIT_ACTIONS = [
  'signin.succeeded',
  'signin.failed',
  'consent.given',
  'consent.withdrawn',
  'passkey.register',
  'passkey.rename',
  'passkey.delete_by_user',
  'passkey.delete',
  'passkey.delete_user',
  'passkey.import',
  'passkey.first_use',
  'passkey.counter_regression',
  'password.set',
  'password.change',
  'password.rehash',
  'password.remove',
  'client.auth_failed',
  'user.add',
  'user.update',
  'user.disable',
  'user.enable',
  'user.remove',
  'user.import',
  'user.id_add',
  'user.id_remove',
  'user.photo_set',
  'user.photo_remove',
  'client.add',
  'client.update',
  'client.disable',
  'client.enable',
  'client.remove',
  'client.secret_rotate',
  'client.grant',
  'client.revoke',
  'org.add',
  'org.remove',
  'org.brand',
  'org.policy',
  'org.disable',
  'org.enable',
  'mds.import',
  'recovery_link.create',
  'recovery_link.use',
  'recovery_link.revoke',
  'role.grant',
  'role.revoke',
  'access.refused',
  'keys.rotate',
  'secret.rotate',
  'secret.reseal',
  'webhook.add',
  'webhook.remove',
  'webhook.secret_rotate',
  'stream.create',
  'stream.update',
  'stream.delete',
  'group.add',
  'group.update',
  'group.remove',
  'scim_token.create',
  'scim_token.revoke',
  'ldap.add',
  'ldap.remove',
  'ldap.sync',
  'sp.add',
  'sp.update',
  'sp.disable',
  'sp.enable',
  'sp.remove',
  'sp.client',
  'saml_keys.rotate',
  'saml.sso',
  'saml.logout',
  'saml_federation.add',
  'saml_federation.update',
  'saml_federation.remove',
  'saml_federation.refresh',
  'upstream.add',
  'upstream.update',
  'upstream.disable',
  'upstream.enable',
  'upstream.remove',
  'upstream.link',
  'upstream.unlink',
  'upstream.refused',
  'upstream.federation_refresh',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export type ActorType = 'user' | 'client' | 'operator' | 'provisioning' | 'system';

/** Who acted, from where, in which request. */
export interface Actor {
  type: ActorType;
  /** eppn (user), client id (client), login name (operator), credential id (provisioning); null if unknown */
  id: string | null;
  requestId?: string | null;
  /** the client address as the service saw it (request.ip); stored reduced, see sourceAddress() */
  ip?: string | null;
}

export interface AuditEntry {
  action: AuditAction;
  actor: Actor;
  at: number;
  /** what was acted on: eppn, client id, organization id, key id */
  subject?: string | null;
  orgId?: number | null;
  /** the client involved (sign-in to it, consent for it, its token) */
  clientId?: string | null;
  /** the user concerned */
  eppn?: string | null;
  passkeyIds?: number[];
  details?: Record<string, unknown>;
  /** the user's sub, when the change has it at hand: its events need it (not part of the record) */
  sub?: string | null;
  /** e-mail addresses the change changed, for the notices to the old and new address (not part of the record) */
  emailChanges?: EmailChange[];
}

/**
 * The address kept in the trail: IPv4 as is, IPv6 reduced to its /64 (the part that names a
 * network, not a device); an IPv4-mapped IPv6 address is its IPv4 address.
 */
export function sourceAddress(ip: string | null | undefined): string | null {
  if (!ip || !ipaddr.isValid(ip)) return null;
  const address = ipaddr.process(ip);
  if (address.kind() === 'ipv4') return address.toString();
  const parts = (address as ipaddr.IPv6).parts.slice(0, 4);
  return `${ipaddr.IPv6.parse(`${parts.map((p) => p.toString(16)).join(':')}::`).toString()}/64`;
}

/** Changes made by the service itself (start-up, jobs) or by code that names no one. */
export const SYSTEM: Actor = { type: 'system', id: null };

/** Who makes a change, and when; both default (SYSTEM, now). */
export interface Change {
  actor?: Actor;
  now?: number;
}

/** The person running the admin CLI: the login that invoked sudo, else the login name. */
export function operator(env: NodeJS.ProcessEnv = process.env): Actor {
  let login = env.SUDO_USER || env.LOGNAME || env.USER;
  if (!login) {
    try {
      login = userInfo().username;
    } catch {
      login = undefined;
    }
  }
  return { type: 'operator', id: login ? `cli:${login}` : 'cli' };
}

/** The trail's row of an entry. */
function auditEvent(entry: AuditEntry): AuditEvent {
  return {
    at: entry.at,
    kind: entry.action,
    actorType: entry.actor.type,
    actor: entry.actor.id,
    subject: entry.subject ?? entry.eppn ?? null,
    source: sourceAddress(entry.actor.ip),
    clientId: entry.clientId ?? null,
    orgId: entry.orgId ?? null,
    eppn: entry.eppn ?? null,
    passkeyIds: entry.passkeyIds ?? [],
    requestId: entry.actor.requestId ?? null,
    details: entry.details ?? {},
  };
}

/** Writes one record; call it with the transaction of the change. */
export async function recordAudit(db: Q, entry: AuditEntry): Promise<void> {
  await insertAuditEvent(db, auditEvent(entry));
  await recordEvents(db, entry);
  await recordNotification(db, entry);
  countAudit(entry.action, entry.details);
}

/**
 * Writes many records as recordAudit writes each (the same rows, events and notifications, in the
 * same order), with multi-row statements: the changes of a batch (the LDAP sync's new users).
 */
export async function recordAudits(db: Q, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await insertAuditEvents(db, entries.map(auditEvent));
  await recordEventsOf(db, entries);
  for (const entry of entries) await recordNotification(db, entry);
  for (const entry of entries) countAudit(entry.action, entry.details);
}

/** A signed-in user acting in a request. */
export function userActor(user: { eppn: string }, request: { id: string; ip: string }): Actor {
  return { type: 'user', id: user.eppn, requestId: request.id, ip: request.ip };
}

/** A client acting in a request (an API call, a token request). */
export function clientActor(clientId: string | null, request: { id: string; ip: string }): Actor {
  return { type: 'client', id: clientId, requestId: request.id, ip: request.ip };
}

/** One record as the admin CLI and the audit API show it. */
export function auditView(r: AuditRow) {
  return {
    id: r.id,
    at: iso(r.at),
    action: r.kind,
    actor_type: r.actor_type,
    actor: r.actor,
    subject: r.subject,
    org_id: r.org_id,
    client_id: r.client_id,
    eppn: r.eppn,
    passkey_ids: JSON.parse(r.passkey_ids) as number[],
    source: r.source,
    request_id: r.request_id,
    details: JSON.parse(r.details) as unknown,
  };
}
