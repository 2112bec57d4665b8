// Security notifications: the user hears by e-mail of every change to how their account is signed
// in to (a passkey added or removed, the password changed or removed, a recovery link made or
// used) and of a change of their e-mail address (told at the old address and at the new), whoever
// made it and through whichever surface. Queued by recordAudit() in the change's
// own transaction, so a change that rolls back sends nothing and a committed one is never silent;
// the events outbox sends it (src/events/mail.ts). Staff are named by their role, never by name.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { findUserByEppn } from '../store/directory.ts';
import { rolesOfEppn } from '../store/roles.ts';
import { insertMail, type ActorLabel, type Notice } from '../store/mail.ts';
import type { AuditedChange, EmailChange } from './events.ts';

type Q = Kysely<DB> | Transaction<DB>;

/**
 * Whether this process queues notifications: only with a mail server configured (SMTP_URL), set
 * once by whatever builds the process (the service, the admin CLI) from its configuration.
 */
let enabled = false;

export function enableSecurityNotifications(on: boolean): void {
  enabled = on;
}

const NOTICE_OF: Partial<Record<string, Notice>> = {
  'passkey.register': 'passkey_added',
  'passkey.delete': 'passkey_removed',
  'passkey.delete_user': 'passkey_removed',
  'passkey.delete_by_user': 'passkey_removed',
  'password.set': 'password_changed',
  'password.change': 'password_changed',
  'password.remove': 'password_removed',
  'recovery_link.create': 'recovery_link_created',
  'recovery_link.use': 'recovery_link_used',
};

/** Who made the change, as the user is told. */
async function whoActed(db: Q, entry: AuditedChange): Promise<ActorLabel> {
  const { actor } = entry;
  if (entry.action === 'recovery_link.use') return 'recovery_link';
  switch (actor.type) {
    case 'user': {
      if (actor.id === entry.eppn) return 'you';
      const roles = actor.id ? (await rolesOfEppn(db, actor.id)).map((r) => r.role) : [];
      if (roles.includes('operator')) return 'operator';
      if (roles.includes('org-admin')) return 'org-admin';
      if (roles.includes('helpdesk')) return 'helpdesk';
      return 'system';
    }
    case 'client':
      return 'application';
    case 'provisioning':
      return 'directory';
    case 'operator':
      return 'operator';
    default:
      return 'system';
  }
}

/**
 * Tells each user whose e-mail address changed, at the old address (so a takeover that moves the
 * address away is noticed where the owner still reads) and at the new one; how many were queued.
 * Every writer of the address (setUserAttributes, provisioning's writeDirectoryColumns for SCIM and
 * the LDAP sync, the user import) passes its changes here through recordAudit, or for an import's
 * batch directly, in the change's transaction.
 */
export async function notifyEmailChanges(db: Q, changes: EmailChange[], entry: AuditedChange): Promise<number> {
  if (!enabled) return 0;
  let queued = 0;
  for (const c of changes) {
    if (c.from === c.to) continue;
    const data = {
      eppn: c.eppn,
      org_id: c.orgId,
      notice: 'email_changed' satisfies Notice,
      by: await whoActed(db, { ...entry, eppn: c.eppn }),
      at: entry.at,
    };
    // the old address by name: the user's own is the new one by the time it is sent
    for (const to of c.from ? [c.from] : [])
      await insertMail(db, { at: entry.at, kind: 'notification', eppn: c.eppn, data: { ...data, to } });
    if (c.to) await insertMail(db, { at: entry.at, kind: 'notification', eppn: c.eppn, data });
    queued += (c.from ? 1 : 0) + (c.to ? 1 : 0);
  }
  return queued;
}

/** Queues the notification an audited change calls for, if any; call it in the change's transaction. */
export async function recordNotification(db: Q, entry: AuditedChange): Promise<boolean> {
  if (entry.emailChanges?.length) return (await notifyEmailChanges(db, entry.emailChanges, entry)) > 0;
  if (!enabled || !entry.eppn) return false;
  const notice = NOTICE_OF[entry.action];
  if (!notice) return false;
  // A link made to be sent by e-mail (an invitation, self-service recovery) is its own message.
  if (entry.action === 'recovery_link.create' && entry.details?.purpose !== undefined) return false;
  // a removal that found no passkey changed nothing
  if (entry.action.startsWith('passkey.') && (entry.passkeyIds ?? []).length === 0) return false;
  const user = await findUserByEppn(db, entry.eppn);
  if (!user?.email) return false;
  // the password an account is created with is no change to it
  if (entry.action === 'password.set' && Number(user.created_at) === entry.at) return false;
  await insertMail(db, {
    at: entry.at,
    kind: 'notification',
    eppn: user.eppn,
    data: { eppn: user.eppn, org_id: user.org_id, notice, by: await whoActed(db, entry), at: entry.at },
  });
  return true;
}
