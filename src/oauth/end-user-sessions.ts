// Ending every session of a user at once (an administrator removed their passkeys): the sessions,
// grants and tokens go, and each relying party that registered a back-channel logout URI hears it.
import type Provider from 'oidc-provider';
import type { Store } from '../store/index.ts';
import { deleteAccountArtifacts, findSessionsByAccount } from '../store/oidc-payloads.ts';

interface StoredSession {
  authorizations?: Record<string, { sid?: string }>;
}

type LogoutClient = { backchannelLogoutUri?: string; backchannelLogout(sub: string, sid?: string): Promise<void> };

/**
 * Removes the user's sessions, grants and everything issued under them (refresh and access tokens
 * stop working at once), then sends each client of each ended session a logout token. Deliveries
 * that fail are recorded and retried (backchannel-logout.ts); they never undo the sign-out.
 */
export async function endUserSessions(
  store: Store,
  provider: Provider,
  sub: string,
  now: () => number = Date.now,
): Promise<{ sessions: number }> {
  const sessions = (await findSessionsByAccount(store.db, sub, now())).map((p) => JSON.parse(p) as StoredSession);
  await deleteAccountArtifacts(store.db, sub);
  await Promise.all(sessions.map((session) => sendLogoutTokens(provider, sub, session.authorizations)));
  return { sessions: sessions.length };
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
