// Invitations: an e-mail that brings a user to their first passkey. Each carries a recovery link
// (single use, expiring, audited: recovery-links.ts), so opening it registers a passkey exactly
// as a recovery link does. The link, its message in the outbox and the invitation's record are
// written in one transaction per user; inviting a user again revokes the earlier invitation's
// link. A reminder, for those who have not acted by the time the invitation asked for, carries a
// NEW link (the first one's secret was never kept) and revokes the first, so one working link is
// out at a time.
import type { Store } from '../store/index.ts';
import type { Keyring } from '../crypto.ts';
import { findOrganization } from '../store/directory.ts';
import { revokeRecoveryLink } from '../store/recovery-links.ts';
import { dueReminders, insertInvitation, invitationCandidates, invitationLinks, markReminded } from '../store/mail.ts';
import { AppError, notFound } from '../errors.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { Refused } from '../directory/roles.ts';
import { createRecoveryLink, MAX_RECOVERY_TTL_MS } from './recovery-links.ts';
import { queueLinkMail } from './mail-links.ts';

export const DEFAULT_INVITATION_TTL_MS = 14 * 24 * 3600 * 1000;

/** What sending mail needs from the configuration; `mail` false: SMTP_URL is not set. */
export interface MailSetup {
  publicUrl: string;
  mail: boolean;
}

export class MailNotConfigured extends AppError {
  constructor() {
    super(409, 'mail is not configured: set SMTP_URL and SMTP_FROM (docs/email.md)');
  }
}

export function requireMail(setup: MailSetup): void {
  if (!setup.mail) throw new MailNotConfigured();
}

export type SkipReason = 'not_found' | 'disabled' | 'no_email' | 'has_passkey' | 'refused';

export interface InvitationInput {
  orgId: number;
  /** these users only (eppn); all of the organization otherwise */
  eppns?: string[];
  /** only users without a passkey */
  withoutPasskey?: boolean;
  ttlMs?: number;
  /** remind those who have not acted after this long */
  remindAfterMs?: number;
  dryRun?: boolean;
  /** en or nb, for users whose language is not known */
  lang?: string;
}

export interface InvitationResult {
  org_id: number;
  queued: number;
  invited: string[];
  skipped: { eppn: string; reason: SkipReason }[];
  dry_run: boolean;
}

/** Invitations written in one transaction. */
const INVITE_BATCH = 100;

const who = (actor: Actor) => `${actor.type}:${actor.id ?? '-'}`;

function checkDuration(ms: number | undefined, what: string): void {
  if (ms === undefined) return;
  if (!Number.isSafeInteger(ms) || ms < 60_000 || ms > MAX_RECOVERY_TTL_MS)
    throw new AppError(400, `${what} must be between 1 minute and 30 days`);
}

/** The users an invitation goes to, and those it skips with the reason. */
async function chooseRecipients(store: Store, input: InvitationInput) {
  const eppns = input.eppns?.map((e) => e.trim().toLowerCase());
  const rows = await invitationCandidates(store.db, input.orgId, eppns);
  const skipped: InvitationResult['skipped'] = [];
  if (eppns) {
    const found = new Set(rows.map((r) => r.eppn));
    for (const eppn of new Set(eppns)) if (!found.has(eppn)) skipped.push({ eppn, reason: 'not_found' });
  }
  const chosen: typeof rows = [];
  for (const r of rows) {
    if (r.disabled_at !== null) skipped.push({ eppn: r.eppn, reason: 'disabled' });
    else if (!r.email) skipped.push({ eppn: r.eppn, reason: 'no_email' });
    else if (input.withoutPasskey && r.passkey_count > 0) skipped.push({ eppn: r.eppn, reason: 'has_passkey' });
    else chosen.push(r);
  }
  return { chosen, skipped };
}

/**
 * Users invited in one transaction, each in a savepoint of its own: a user who is skipped (refused,
 * disabled meanwhile) leaves nothing behind but the refusal's record; the others are committed together.
 */
async function inBatch<R extends { eppn: string }>(
  store: Store,
  batch: R[],
  invite: (db: Store['db'], r: R) => Promise<unknown>,
): Promise<{ invited: string[]; skipped: InvitationResult['skipped'] }> {
  const invited: string[] = [];
  const skipped: InvitationResult['skipped'] = [];
  const trx = await store.db.startTransaction().execute();
  try {
    for (const r of batch) {
      const sp = await trx.savepoint('invite').execute();
      try {
        await invite(sp, r);
        await sp.releaseSavepoint('invite').execute();
        invited.push(r.eppn);
      } catch (err) {
        if (!(err instanceof AppError) || err.status >= 500) throw err;
        await sp.rollbackToSavepoint('invite').execute();
        if (err instanceof Refused) await recordAudit(trx, err.entry);
        skipped.push({ eppn: r.eppn, reason: err.status === 403 ? 'refused' : 'disabled' });
      }
    }
    await trx.commit().execute();
  } catch (err) {
    await trx
      .rollback()
      .execute()
      .catch(() => {});
    throw err;
  }
  return { invited, skipped };
}

/**
 * Invites the chosen users of an organization: a link each, its message queued. `progress` hears
 * after each user (done, total). Users the actor may not act on are skipped as refused.
 */
export async function inviteUsers(
  store: Store,
  keys: Keyring,
  setup: MailSetup,
  input: InvitationInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
  progress?: (done: number, total: number) => void,
): Promise<InvitationResult> {
  requireMail(setup);
  const ttlMs = input.ttlMs ?? DEFAULT_INVITATION_TTL_MS;
  checkDuration(ttlMs, 'the link’s lifetime (--ttl)');
  checkDuration(input.remindAfterMs, 'the reminder’s delay (--remind-after)');
  if (input.remindAfterMs !== undefined && input.remindAfterMs >= ttlMs)
    throw new AppError(400, 'the reminder must come before the link expires (--remind-after shorter than --ttl)');
  if (!(await findOrganization(store.db, input.orgId))) throw notFound(`organization ${input.orgId} does not exist`);
  const { chosen, skipped } = await chooseRecipients(store, input);
  const result: InvitationResult = { org_id: input.orgId, queued: 0, invited: [], skipped, dry_run: !!input.dryRun };
  if (input.dryRun) {
    result.queued = chosen.length;
    result.invited = chosen.map((r) => r.eppn);
    return result;
  }
  const invite = (db: Store['db'], r: (typeof chosen)[number]) =>
    createRecoveryLink(
      { ...store, db },
      setup.publicUrl,
      {
        eppn: r.eppn,
        ttlMs,
        orgId: input.orgId,
        purpose: 'invitation',
        within: async (trx, link, user) => {
          // a new invitation replaces the earlier ones: one working link at a time
          for (const earlier of await invitationLinks(trx, user.id)) await revokeRecoveryLink(trx, earlier, now);
          await queueLinkMail(trx, keys, { kind: 'invitation', user, link, lang: input.lang, at: now });
          await insertInvitation(trx, {
            org_id: input.orgId,
            user_id: user.id,
            recovery_link_id: link.id,
            invited_at: now,
            invited_by: who(actor),
            remind_after_ms: input.remindAfterMs ?? null,
            reminded_at: null,
          });
        },
      },
      { actor, now },
    );
  for (let start = 0; start < chosen.length; start += INVITE_BATCH) {
    const batch = chosen.slice(start, start + INVITE_BATCH);
    const done = await inBatch(store, batch, invite);
    result.queued += done.invited.length;
    result.invited.push(...done.invited);
    result.skipped.push(...done.skipped);
    progress?.(start + batch.length, chosen.length);
  }
  return result;
}

/** Reminds every invited user of the organization whose reminder is due (see the file's comment). */
export async function remindInvited(
  store: Store,
  keys: Keyring,
  setup: MailSetup,
  input: { orgId: number; ttlMs?: number; dryRun?: boolean; lang?: string },
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<InvitationResult> {
  requireMail(setup);
  const ttlMs = input.ttlMs ?? DEFAULT_INVITATION_TTL_MS;
  checkDuration(ttlMs, 'the link’s lifetime (--ttl)');
  if (!(await findOrganization(store.db, input.orgId))) throw notFound(`organization ${input.orgId} does not exist`);
  const due = await dueReminders(store.db, input.orgId, now);
  const result: InvitationResult = {
    org_id: input.orgId,
    queued: 0,
    invited: [],
    skipped: [],
    dry_run: !!input.dryRun,
  };
  for (const invitation of due) {
    if (invitation.disabled_at !== null || !invitation.email) {
      result.skipped.push({ eppn: invitation.eppn, reason: invitation.email ? 'disabled' : 'no_email' });
      continue;
    }
    if (input.dryRun) {
      result.queued++;
      result.invited.push(invitation.eppn);
      continue;
    }
    try {
      await createRecoveryLink(
        store,
        setup.publicUrl,
        {
          eppn: invitation.eppn,
          ttlMs,
          orgId: input.orgId,
          purpose: 'reminder',
          within: async (trx, link, user) => {
            // another run reminded them meanwhile: this link and message are rolled back
            if (!(await markReminded(trx, invitation.id, link.id, now))) throw new AppError(409, 'already reminded');
            await revokeRecoveryLink(trx, Number(invitation.recovery_link_id), now);
            await queueLinkMail(trx, keys, { kind: 'reminder', user, link, lang: input.lang, at: now });
          },
        },
        { actor, now },
      );
      result.queued++;
      result.invited.push(invitation.eppn);
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      if (err.status !== 409) result.skipped.push({ eppn: invitation.eppn, reason: 'refused' });
    }
  }
  return result;
}
