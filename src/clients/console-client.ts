// The console (/console) signs staff in as an OpenID Connect relying party of this service: a
// first-party public client (authorization code with PKCE, no consent page) whose redirect URIs
// follow PUBLIC_URL. It is made on the console's first use and kept in the client registry like
// any other, so `client disable idp-console` switches the console off.
import type { Store } from '../store/index.ts';
import * as repo from '../store/clients.ts';
import { recordAudit, SYSTEM } from '../audit/index.ts';
import { publish } from '../store/invalidation.ts';

export const CONSOLE_CLIENT_ID = 'idp-console';
export const CONSOLE_CALLBACK = '/console/callback';
export const CONSOLE_SIGNED_OUT = '/console/signed-out';

export type ConsoleClientState = 'ready' | 'disabled';

/** The console's client as it stands: one read when it is in order; created or brought in line with PUBLIC_URL when not. */
export async function consoleClientState(
  store: Store,
  publicUrl: string,
  now = Date.now(),
): Promise<ConsoleClientState> {
  const row = await repo.findClient(store.db, CONSOLE_CLIENT_ID);
  if (row && row.redirect_uris === JSON.stringify([`${publicUrl}${CONSOLE_CALLBACK}`]))
    return row.disabled_at === null ? 'ready' : 'disabled';
  return ensureConsoleClient(store, publicUrl, now);
}

/** Creates the console's client, or brings its redirect URIs in line with PUBLIC_URL. */
export async function ensureConsoleClient(
  store: Store,
  publicUrl: string,
  now = Date.now(),
): Promise<ConsoleClientState> {
  const redirectUris = JSON.stringify([`${publicUrl}${CONSOLE_CALLBACK}`]);
  const postLogout = JSON.stringify([`${publicUrl}${CONSOLE_SIGNED_OUT}`]);
  return store.db.transaction().execute(async (trx) => {
    const existing = await repo.findClient(trx, CONSOLE_CLIENT_ID);
    if (existing) {
      if (existing.redirect_uris !== redirectUris || existing.post_logout_redirect_uris !== postLogout) {
        await repo.updateClient(trx, CONSOLE_CLIENT_ID, {
          redirect_uris: redirectUris,
          post_logout_redirect_uris: postLogout,
          updated_at: now,
        });
        await publish(trx, 'client', CONSOLE_CLIENT_ID);
      }
      return existing.disabled_at === null ? 'ready' : 'disabled';
    }
    const inserted = await repo.insertClientIfAbsent(trx, {
      client_id: CONSOLE_CLIENT_ID,
      secret_hash: null,
      name: 'Console',
      redirect_uris: redirectUris,
      post_logout_redirect_uris: postLogout,
      backchannel_logout_uri: null,
      frontchannel_logout_uri: null,
      grant_types: JSON.stringify(['authorization_code']),
      scopes: '',
      groups: '',
      first_party: 1,
      userinfo_signed_response_alg: null,
      require_par: 0,
      created_at: now,
      updated_at: now,
    });
    if (inserted) {
      await publish(trx, 'client', CONSOLE_CLIENT_ID);
      const details = { name: 'Console', grant_types: ['authorization_code'], scopes: [], groups: [], orgs: [] };
      await recordAudit(trx, {
        action: 'client.add',
        actor: SYSTEM,
        at: now,
        subject: CONSOLE_CLIENT_ID,
        clientId: CONSOLE_CLIENT_ID,
        details,
      });
    }
    return 'ready';
  });
}
