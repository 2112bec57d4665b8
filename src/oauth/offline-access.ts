// offline_access without prompt=consent. oidc-provider drops the scope from an authorization
// request that does not also send prompt=consent (OpenID Connect Core 11: consent must be obtained
// for offline access "unless other conditions ... are in place"). Here the condition is the
// service's own consent rule: offline_access is part of what the user agrees to on the consent page
// ("access while you are not signed in"), remembered per user and client like every other scope,
// and only first-party clients skip that page. So a client registered for the refresh_token grant
// keeps the scope it asked for, and gets a refresh token, with or without prompt=consent.
import { interactionPolicy, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import { words } from '../vocabulary.ts';

const OFFLINE_ACCESS = 'offline_access';

type LoadGrant = NonNullable<Configuration['loadExistingGrant']>;

/** The scope the authorization request itself carried (query or form body). */
function askedScope(ctx: KoaContextWithOIDC): string[] {
  const body = ctx.oidc.body as { scope?: unknown } | undefined;
  return words(body?.scope ?? ctx.query.scope);
}

/** Puts offline_access back when the request asked for it and the client may hold refresh tokens. */
export function restoreOfflineAccess(ctx: KoaContextWithOIDC): void {
  const { oidc } = ctx;
  if (oidc.route !== 'authorization' || !oidc.params) return;
  const client = oidc.client;
  if (!client?.grantTypeAllowed('refresh_token') || !words(client.scope).includes(OFFLINE_ACCESS)) return;
  const scope = words(oidc.params.scope);
  if (scope.includes(OFFLINE_ACCESS) || !askedScope(ctx).includes(OFFLINE_ACCESS)) return;
  oidc.params.scope = [...scope, OFFLINE_ACCESS].join(' ');
}

/** oidc-provider's default: the grant of the consent just given, or the one the session holds. */
const defaultLoadGrant: LoadGrant = async (ctx) => {
  const grantId =
    (ctx.oidc.result as { consent?: { grantId?: string } } | undefined)?.consent?.grantId ||
    ctx.oidc.session?.grantIdFor(ctx.oidc.client!.clientId);
  return grantId ? ctx.oidc.provider.Grant.find(grantId) : undefined;
};

/**
 * The provider's steps that follow its scope checks and see the scope: loadExistingGrant (only
 * when someone is signed in) and the login prompt's checks (always, before the consent prompt's,
 * and before the interaction is saved with the request's parameters). The scope is restored in
 * both, so the grant, the consent page and the code all see it.
 */
export function offlineAccessCheck(): interactionPolicy.Check {
  return new interactionPolicy.Check('offline_access', 'offline_access restored', (ctx) => {
    restoreOfflineAccess(ctx);
    return interactionPolicy.Check.NO_NEED_TO_PROMPT;
  });
}

/**
 * loadExistingGrant runs right after the provider's scope checks and before it decides on the
 * consent prompt, so the restored scope is what the consent page, the grant and the code see.
 */
export function keepingOfflineAccess(load: LoadGrant = defaultLoadGrant): LoadGrant {
  return async (ctx) => {
    restoreOfflineAccess(ctx);
    return load(ctx);
  };
}
