// E-mail in the events outbox (src/store/events.ts): a message is an event of type `mail.<kind>`
// with one delivery to the destination `mail:<kind>`, claimed, retried and given up by the same
// delivery job as webhooks and push streams. The event names no organization, so no webhook or
// stream ever receives it; its data holds what the message is written from (a link's secret
// only sealed). Invitations are recorded apart, for reminders and the adoption report.
import { sql, type Insertable, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, MailInvitationsTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type InvitationRow = Selectable<MailInvitationsTable>;

export const MAIL_KINDS = ['invitation', 'reminder', 'notification', 'recovery'] as const;
export type MailKind = (typeof MAIL_KINDS)[number];

/** What a security notification is about. */
export const NOTICES = [
  'passkey_added',
  'passkey_removed',
  'password_changed',
  'password_removed',
  'recovery_link_created',
  'recovery_link_used',
  'email_changed',
] as const;
export type Notice = (typeof NOTICES)[number];

/** Who made the change, as the user is told: staff by their role, never by name. */
export const ACTORS = [
  'you',
  'helpdesk',
  'org-admin',
  'operator',
  'application',
  'directory',
  'system',
  'recovery_link',
] as const;
export type ActorLabel = (typeof ACTORS)[number];

/** Queues one message; returns the delivery's id. */
export async function insertMail(
  db: Q,
  m: { at: number; kind: MailKind; /** the user it goes to (eppn) */ eppn: string; data: object },
): Promise<number> {
  const { id } = await db
    .insertInto('events')
    .values({ at: m.at, type: `mail.${m.kind}`, org_id: null, subject: m.eppn, data: JSON.stringify(m.data) })
    .returning('id')
    .executeTakeFirstOrThrow();
  const delivery = await db
    .insertInto('event_deliveries')
    .values({
      event_id: Number(id),
      destination: `mail:${m.kind}`,
      // one user's messages of a kind go out in order
      subject: m.eppn,
      state: 'pending',
      attempts: 0,
      next_attempt_at: m.at,
      created_at: m.at,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(delivery.id);
}

/** Messages not yet sent, and the age of the oldest, for /metrics. */
export async function mailDepth(db: Q): Promise<{ pending: number; oldest: number | null }> {
  const row = await db
    .selectFrom('event_deliveries')
    .select((eb) => [eb.fn.countAll<number | string>().as('pending'), eb.fn.min('created_at').as('oldest')])
    .where('state', '=', 'pending')
    .where('destination', 'like', 'mail:%')
    .executeTakeFirstOrThrow();
  return { pending: Number(row.pending), oldest: row.oldest === null ? null : Number(row.oldest) };
}

export async function setUserLanguage(db: Q, userId: number, language: string): Promise<void> {
  await db
    .updateTable('users')
    .set({ language })
    .where('id', '=', userId)
    .where((eb) => eb.or([eb('language', 'is', null), eb('language', '<>', language)]))
    .execute();
}

/** The users of an organization an invitation may go to, by eppn. */
export function invitationCandidates(db: Q, orgId: number, eppns?: string[]) {
  let q = db
    .selectFrom('users')
    .select(['id', 'eppn', 'email', 'disabled_at', 'passkey_count', 'language'])
    .where('org_id', '=', orgId);
  if (eppns !== undefined) q = q.where('eppn', 'in', eppns.length ? eppns : ['']);
  return q.orderBy('id').execute();
}

export async function insertInvitation(db: Q, row: Insertable<MailInvitationsTable>): Promise<number> {
  const r = await db.insertInto('mail_invitations').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(r.id);
}

/**
 * Invitations a reminder is due for: not reminded, asked for one and its time come, the user still
 * without a passkey and the invitation's link still unused. One per user (the latest).
 */
export function dueReminders(db: Q, orgId: number, now: number) {
  return (
    db
      .selectFrom('mail_invitations as i')
      .innerJoin('users as u', 'u.id', 'i.user_id')
      .innerJoin('recovery_links as l', 'l.id', 'i.recovery_link_id')
      .select([
        'i.id',
        'i.user_id',
        'i.recovery_link_id',
        'i.invited_at',
        'i.remind_after_ms',
        'u.eppn',
        'u.email',
        'u.disabled_at',
      ])
      .where('i.org_id', '=', orgId)
      .where('i.reminded_at', 'is', null)
      .where('i.remind_after_ms', 'is not', null)
      .where(sql<boolean>`i.invited_at + i.remind_after_ms <= ${now}`)
      .where('u.passkey_count', '=', 0)
      .where('l.used_at', 'is', null)
      // a link staff revoked on purpose is not replaced by a reminder's new one
      .where('l.revoked_at', 'is', null)
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('mail_invitations as later')
              .select('later.id')
              .whereRef('later.user_id', '=', 'i.user_id')
              .whereRef('later.id', '>', 'i.id'),
          ),
        ),
      )
      .orderBy('i.id')
      .execute()
  );
}

/** Marks an invitation reminded, once: of two runs at once only one gets true. */
export async function markReminded(db: Q, id: number, linkId: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('mail_invitations')
    .set({ reminded_at: now, recovery_link_id: linkId })
    .where('id', '=', id)
    .where('reminded_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Users of an organization invited at least once, and of those how many have a passkey now. */
export async function invitationCounts(db: Q, orgId: number): Promise<{ invited: number; activated: number }> {
  const row = await db
    .selectFrom('users as u')
    .select((eb) => [
      eb.fn.countAll<number | string>().as('invited'),
      eb.fn.sum<number | string | null>(sql`case when u.passkey_count > 0 then 1 else 0 end`).as('activated'),
    ])
    .where('u.org_id', '=', orgId)
    .where((eb) => eb.exists(eb.selectFrom('mail_invitations as i').select('i.id').whereRef('i.user_id', '=', 'u.id')))
    .executeTakeFirstOrThrow();
  return { invited: Number(row.invited), activated: Number(row.activated ?? 0) };
}

/** The one user with this address; undefined when none or several have it. */
export async function findUserByEmail(db: Q, email: string) {
  const rows = await db
    .selectFrom('users')
    .innerJoin('organizations', 'organizations.id', 'users.org_id')
    .selectAll('users')
    .select('organizations.disabled_at as org_disabled_at')
    .where('users.email', '=', email)
    .limit(2)
    .execute();
  return rows.length === 1 ? rows[0] : undefined;
}

/** Whether any organization offers self-service recovery by e-mail (the sign-in page's link). */
export async function anySelfRecovery(db: Q): Promise<boolean> {
  const row = await db
    .selectFrom('organizations')
    .select('id')
    .where('passkey_policy', 'like', '%"self_recovery":"email"%')
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** The links of a user's earlier invitations, for a new one to replace. */
export async function invitationLinks(db: Q, userId: number): Promise<number[]> {
  const rows = await db
    .selectFrom('mail_invitations')
    .select('recovery_link_id')
    .where('user_id', '=', userId)
    .execute();
  return rows.map((r) => Number(r.recovery_link_id));
}

/** What a queued message is written from: its user, their organization's name and look, and the link it carries. */
export interface MailContext {
  user: { id: number; eppn: string; email: string | null; language: string | null; disabled_at: number | null };
  org: { name: string; branding: string | null };
  /** undefined when the message carries no link, or the link is gone */
  link?: { user_id: number; used_at: number | null; revoked_at: number | null; expires_at: number };
}

/** A message's context is asked for by its user's eppn and the id of the link it carries, if any. */
export interface MailContextKey {
  eppn: string;
  linkId?: number;
}

/** The key of a message's context in what findMailContexts answers. */
export const mailContextKey = (k: MailContextKey) => `${k.linkId ?? ''} ${k.eppn}`;

/**
 * The contexts of a batch of messages, in two queries (their users with their organizations, and
 * their links): the delivery job writes hundreds of messages a second, and on PostgreSQL each
 * query is a round trip that costs the service more CPU than writing a message. Keyed by
 * mailContextKey; a message whose user is gone has no entry.
 */
export async function findMailContexts(db: Q, keys: MailContextKey[]): Promise<Map<string, MailContext>> {
  const eppns = [...new Set(keys.map((k) => k.eppn))];
  const linkIds = [...new Set(keys.flatMap((k) => (k.linkId === undefined ? [] : [k.linkId])))];
  const found = new Map<string, MailContext>();
  if (eppns.length === 0) return found;
  const [users, links] = await Promise.all([
    db
      .selectFrom('users as u')
      .innerJoin('organizations as o', 'o.id', 'u.org_id')
      .select(['u.id', 'u.eppn', 'u.email', 'u.language', 'u.disabled_at', 'o.name as org_name', 'o.branding'])
      .where('u.eppn', 'in', eppns)
      .execute(),
    linkIds.length === 0
      ? []
      : db
          .selectFrom('recovery_links')
          .select(['id', 'user_id', 'used_at', 'revoked_at', 'expires_at'])
          .where('id', 'in', linkIds)
          .execute(),
  ]);
  const byEppn = new Map(users.map((u) => [u.eppn, u]));
  const byLink = new Map(links.map((l) => [Number(l.id), l]));
  for (const key of keys) {
    const row = byEppn.get(key.eppn);
    if (!row) continue;
    const user = {
      id: Number(row.id),
      eppn: row.eppn,
      email: row.email,
      language: row.language,
      disabled_at: row.disabled_at === null ? null : Number(row.disabled_at),
    };
    const l = key.linkId === undefined ? undefined : byLink.get(key.linkId);
    const link = l && {
      user_id: Number(l.user_id),
      used_at: l.used_at === null ? null : Number(l.used_at),
      revoked_at: l.revoked_at === null ? null : Number(l.revoked_at),
      expires_at: Number(l.expires_at),
    };
    found.set(mailContextKey(key), { user, org: { name: row.org_name, branding: row.branding }, link });
  }
  return found;
}
