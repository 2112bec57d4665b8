// Which scopes a client may get without asking the user again, and the grant oidc-provider
// looks for before it decides whether to show the consent page (also for prompt=none).
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import { findClient, type ClientRow } from '../store/clients.ts';
import { findUserBySub } from '../store/directory.ts';
import { findConsent } from '../store/consents.ts';
import { allowedScopes } from '../clients/index.ts';
import { words } from '../vocabulary.ts';

/** Scopes the client may have among those requested, plus what a consent to them covers (its attribute groups). */
export function consentScope(client: ClientRow, requestedScope: unknown): { scopes: string[]; remembered: string[] } {
  const allowed = allowedScopes(client);
  const scopes = words(requestedScope).filter((s) => allowed.has(s));
  return { scopes, remembered: [...new Set([...scopes, ...words(client.groups)])] };
}

/** True when the user need not be asked: a first-party client, or a remembered consent covering the request. */
export async function consentCovers(
  store: Store,
  userId: number,
  client: ClientRow,
  remembered: string[],
): Promise<boolean> {
  if (client.first_party === 1) return true;
  const given = await findConsent(store.db, userId, client.client_id);
  return given !== undefined && remembered.every((s) => given.includes(s));
}

/**
 * oidc-provider's loadExistingGrant: the grant this session already holds for the client, as by
 * default; otherwise, for a signed-in user who need not be asked (first-party client, or a
 * remembered consent), a new grant of the requested scopes the client is allowed. Without it a
 * new session would always need the consent interaction, and prompt=none would fail.
 */
export function loadExistingGrant(store: Store) {
  return async function loadGrant(ctx: KoaContextWithOIDC) {
    const { oidc } = ctx;
    const clientId = oidc.client!.clientId;
    const held =
      (oidc.result as { consent?: { grantId?: string } } | undefined)?.consent?.grantId ||
      oidc.session!.grantIdFor(clientId);
    if (held) return oidc.provider.Grant.find(held);
    const accountId = oidc.session!.accountId;
    // prompt=consent asks the user whatever they agreed to before.
    if (!accountId || words(oidc.params?.prompt).includes('consent')) return undefined;
    const client = await findClient(store.db, clientId);
    if (!client) return undefined;
    const { scopes, remembered } = consentScope(client, oidc.params?.scope);
    // The provider asks only once it has found the account (loadGrant), so the user exists; a
    // first-party client needs nothing more of the user, any other a remembered consent.
    if (client.first_party !== 1) {
      const user = await findUserBySub(store.db, accountId);
      if (!user || !(await consentCovers(store, user.id, client, remembered))) return undefined;
    }
    const grant = new oidc.provider.Grant({ accountId, clientId });
    if (scopes.length) grant.addOIDCScope(scopes.join(' '));
    await grant.save();
    return grant;
  };
}
