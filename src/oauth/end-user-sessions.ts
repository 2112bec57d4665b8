// Ending every session of a user at once (an administrator removed their passkeys): the sessions,
// grants and tokens go, and each relying party that registered a back-channel logout URI hears it.
import type Provider from 'oidc-provider';
import type { Transaction } from 'kysely';
import type { Store } from '../store/index.ts';
import type { DB } from '../store/schema.ts';
import { deleteAccountArtifacts, findSessionsByAccount } from '../store/oidc-payloads.ts';

export interface StoredSession {
  uid?: string;
  authorizations?: Record<string, { sid?: string }>;
}

type LogoutClient = { backchannelLogoutUri?: string; backchannelLogout(sub: string, sid?: string): Promise<void> };

/**
 * Removes the user's sessions, grants and everything issued under them (refresh and access tokens
 * stop working at once), then sends each client of each ended session a logout token. Deliveries
 * that fail are recorded and retried (backchannel-logout.ts); they never undo the sign-out.
 * `within` runs in the same transaction (the caller's own records of the change, its audit record).
 * Returns the ended sessions (their ids and clients).
 */
export async function endUserSessions(
  store: Store,
  provider: Provider,
  sub: string,
  now: () => number = Date.now,
  within?: (trx: Transaction<DB>) => Promise<void>,
): Promise<{ sessions: number; ended: StoredSession[] }> {
  const ended = await store.db.transaction().execute(async (trx) => {
    const sessions = (await findSessionsByAccount(trx, sub, now())).map((p) => JSON.parse(p) as StoredSession);
    await deleteAccountArtifacts(trx, sub);
    if (within) await within(trx);
    return sessions;
  });
  await Promise.all(ended.map((session) => sendLogoutTokens(provider, sub, session.authorizations)));
  return { sessions: ended.length, ended };
}

/**
 * Sends a logout token to each client of an ended session that registered a back-channel logout
 * URI (oidc-provider does this itself at /openid/endsession; this is for sessions ended elsewhere).
 * Failures are recorded and retried, never thrown.
 */
export async function sendLogoutTokens(
  provider: Provider,
  sub: string,
  authorizations: StoredSession['authorizations'],
): Promise<void> {
  await Promise.all(
    Object.entries(authorizations ?? {}).map(async ([clientId, { sid }]) => {
      const client = (await provider.Client.find(clientId)) as unknown as LogoutClient | undefined;
      if (client?.backchannelLogoutUri) await client.backchannelLogout(sub, sid).catch(() => undefined);
    }),
  );
}
