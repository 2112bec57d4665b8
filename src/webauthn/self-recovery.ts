// Self-service recovery: a user who lost their passkey asks, on the sign-in page, for a recovery
// link by e-mail. It goes only where the organization's policy allows it (`org policy
// --self-recovery email`), to the address the directory holds, for an enabled user without a
// staff role (staff accounts are recovered by someone who can check who they are). The asker
// learns nothing: the page answers the same whether a link was sent or not (web/lost-passkey.ts).
// A new link revokes the user's earlier unused self-service links: only the latest message works.
import type { Store } from '../store/index.ts';
import type { Keyring } from '../crypto.ts';
import { findUserByEppn, type UserAccount } from '../store/directory.ts';
import { findUserByEmail } from '../store/mail.ts';
import { rolesOfUser } from '../store/roles.ts';
import { recordAudit, type Actor } from '../audit/index.ts';
import { revokeUserLinksMadeBy } from '../store/recovery-links.ts';
import { loadPolicy } from './policy.ts';
import { createRecoveryLink } from './recovery-links.ts';
import { queueLinkMail } from './mail-links.ts';
import type { MailSetup } from './invitations.ts';
import { accountDisabled } from '../directory/account-state.ts';

/** Who makes self-service links (the links' created_by is `system:self-recovery`). */
export const SELF_RECOVERY_ACTOR = 'self-recovery';

/** A self-service link works for an hour. */
export const SELF_RECOVERY_TTL_MS = 3600_000;

export type SelfRecoveryOutcome = 'sent' | 'unknown' | 'not_allowed';

/** The user an identifier names: an eppn, else an address only one user has. */
async function userNamed(store: Store, identifier: string): Promise<UserAccount | undefined> {
  const value = identifier.trim().toLowerCase();
  if (!value || value.length > 320) return undefined;
  return (await findUserByEppn(store.db, value)) ?? (await findUserByEmail(store.db, value));
}

/**
 * Sends a recovery link to the user the identifier names, when everything allows it; the outcome
 * is for the logs and tests only, never for the asker. `lang` is the page's language, which the
 * user's messages are written in from then on.
 */
export async function requestSelfRecovery(
  store: Store,
  keys: Keyring,
  setup: MailSetup,
  input: { identifier: string; lang: string },
  from: { ip?: string; requestId?: string; now: number },
): Promise<SelfRecoveryOutcome> {
  if (!setup.mail) return 'not_allowed';
  const user = await userNamed(store, input.identifier);
  if (!user) return 'unknown';
  if (accountDisabled(user) || !user.email) return 'not_allowed';
  if ((await loadPolicy(store.db, user.org_id)).selfRecovery !== 'email') return 'not_allowed';
  if ((await rolesOfUser(store.db, user.id)).length > 0) return 'not_allowed';
  const actor: Actor = { type: 'system', id: SELF_RECOVERY_ACTOR, ip: from.ip, requestId: from.requestId };
  await createRecoveryLink(
    store,
    setup.publicUrl,
    {
      eppn: user.eppn,
      ttlMs: SELF_RECOVERY_TTL_MS,
      purpose: 'self-recovery',
      within: async (trx, link, u) => {
        // one working self-service link at a time: the earlier unused ones stop working
        const revoked = await revokeUserLinksMadeBy(trx, u.id, `system:${SELF_RECOVERY_ACTOR}`, link.id, from.now);
        for (const id of revoked)
          await recordAudit(trx, {
            action: 'recovery_link.revoke',
            actor,
            at: from.now,
            orgId: u.org_id,
            eppn: u.eppn,
            details: { recovery_link: id, replaced_by: link.id },
          });
        // the page's language for this one message: an anonymous request never changes the user's own
        await queueLinkMail(trx, keys, { kind: 'recovery', user: u, link, lang: input.lang, at: from.now });
      },
    },
    { actor, now: from.now },
  );
  return 'sent';
}
