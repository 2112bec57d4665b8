// The account view oidc-provider uses for the ID token and /openid/userinfo: the directory's
// users, with claims released by the rules in claims.ts.
import type { Account, KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import type { AccountSource } from '../oauth/provider.ts';
import { findUserBySub, listUserIds } from '../store/directory.ts';
import { findClient } from '../store/clients.ts';
import { RELEASE_SCOPES, words } from '../vocabulary.ts';
import { needsSecondaryIds, oidcClaims, providerClaims, releasedGroups } from './claims.ts';
import { accountDisabled } from '../directory/account-state.ts';

export interface UserinfoDeps {
  config: Config;
  store: Store;
}

export function userinfoAccounts({
  config,
  store,
}: UserinfoDeps): Pick<AccountSource, 'findAccount' | 'claims' | 'scopes'> {
  async function findAccount(ctx: KoaContextWithOIDC, sub: string): Promise<Account | undefined> {
    const user = await findUserBySub(store.db, sub);
    // A disabled user (or a user of a disabled organization) has no account for the provider: no ID
    // token, userinfo, refresh or device code for them, and a session of theirs signs nobody in.
    if (!user || accountDisabled(user)) return undefined;
    return {
      accountId: user.sub,
      async claims(_use, scope) {
        // The client in this exchange decides the groups; without one nothing beyond sub is released.
        const clientId = ctx.oidc?.client?.clientId;
        const client = clientId ? await findClient(store.db, clientId) : undefined;
        const groups = releasedGroups(words(client?.groups), words(scope));
        const secondary = needsSecondaryIds(groups) ? await listUserIds(store.db, user.id) : [];
        return oidcClaims(config, user, secondary, groups) as { sub: string };
      },
    };
  }
  return { findAccount, claims: providerClaims(config), scopes: RELEASE_SCOPES };
}
