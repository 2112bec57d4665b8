// Whether a user may sign in and use their tokens: the one decision every surface asks.
import type { UserAccount } from '../store/directory.ts';

/**
 * Whether the account is disabled for signing in and for its tokens: the user's own state or their
 * organization's. Every decision that lets a user in (each sign-in method, the authorization
 * server's account, userinfo, the legacy endpoints, SAML SSO, the account page, the console) asks
 * this. The user's own disabled_at stays theirs: enabling the organization leaves it as it was.
 */
export function accountDisabled(user: Pick<UserAccount, 'disabled_at' | 'org_disabled_at'>): boolean {
  return user.disabled_at !== null || user.org_disabled_at !== null;
}
