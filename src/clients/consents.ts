// Consents: what a user agreed a client may receive. Giving and withdrawing are audited in the
// same transaction as the change.
import type { Store } from '../store/index.ts';
import { deleteConsent, saveConsent } from '../store/consents.ts';
import { deleteAccountGrantsOfClient } from '../store/oidc-payloads.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';

type ConsentUser = { id: number; sub: string; eppn: string; org_id: number };

export async function giveConsent(
  store: Store,
  user: ConsentUser,
  clientId: string,
  scopes: string[],
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<void> {
  await store.db.transaction().execute(async (trx) => {
    await saveConsent(trx, user.id, clientId, scopes, now);
    const details = { scopes: [...new Set(scopes)].sort() };
    await recordAudit(trx, {
      action: 'consent.given',
      actor,
      at: now,
      orgId: user.org_id,
      eppn: user.eppn,
      clientId,
      details,
    });
  });
}

/**
 * Withdraws a consent: the client's grants for the user go with it (their tokens stop working),
 * and the next sign-in to the client asks again. False when there was no consent.
 */
export async function withdrawConsent(
  store: Store,
  user: ConsentUser,
  clientId: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<boolean> {
  return store.db.transaction().execute(async (trx) => {
    if (!(await deleteConsent(trx, user.id, clientId))) return false;
    const grants = await deleteAccountGrantsOfClient(trx, user.sub, clientId, store.dialect);
    const details = { grants };
    await recordAudit(trx, {
      action: 'consent.withdrawn',
      actor,
      at: now,
      orgId: user.org_id,
      eppn: user.eppn,
      clientId,
      details,
    });
    return true;
  });
}
