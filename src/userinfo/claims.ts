// Claim release: the one place that decides which user data a client receives. Every endpoint
// that releases user data (OIDC userinfo, the ID token, legacy userinfo, photo fetch) asks here.
//
// A group's data is released when the operator authorized the group for the client AND the
// authorization request was granted a scope that maps onto the group.
import type { Config } from '../config.ts';
import type { User } from '../store/directory.ts';
import { claimNames, groupClaims, USERID_SEC_ALIASES } from '../directory/attribute-release.ts';
import {
  NIN_NAMESPACE,
  SCOPE_GROUPS,
  SECONDARY_NAMESPACES as NAMESPACE_GROUPS,
  type AttributeGroup,
} from '../vocabulary.ts';

export { claimNames, releasedGroups, USERID_SEC_ALIASES, type ClaimNames } from '../directory/attribute-release.ts';

/**
 * oidc-provider's `claims` setting (scope -> claim names). The provider masks the released claims
 * with it; the group authorization of the client is applied on top by releasedGroups().
 */
export function providerClaims(config: Pick<Config, 'claimsNamespace'>): Record<string, string[]> {
  const byGroup = groupClaims(config);
  return Object.fromEntries(
    Object.entries(SCOPE_GROUPS).map(([scope, groups]) => [
      scope,
      scope === 'openid' ? ['sub'] : [...new Set(groups.flatMap((g) => byGroup[g]))],
    ]),
  );
}

export interface SecondaryId {
  namespace: string;
  identifier: string;
}

/** True when the released groups need the user's secondary ids (saves a query otherwise). */
export function needsSecondaryIds(groups: Set<AttributeGroup>): boolean {
  return groups.has('userid-edugain') || groups.has('userid-social') || groups.has('eidas');
}

/** `<namespace>:<identifier>` ids of the user that the released groups allow, in a stable order. */
export function useridSec(
  config: Pick<Config, 'idpNamespace'>,
  user: User,
  secondary: SecondaryId[],
  groups: Set<AttributeGroup>,
): string[] {
  const ids: string[] = [];
  if (groups.has('userid-idp')) ids.push(`${config.idpNamespace}:${user.eppn}`);
  if (groups.has('userid-nin') && user.nin) ids.push(`${NIN_NAMESPACE}:${user.nin}`);
  for (const { namespace, identifier } of secondary) {
    const group = NAMESPACE_GROUPS[namespace];
    if (group && groups.has(group)) ids.push(`${namespace}:${identifier}`);
  }
  return [...new Set(ids)];
}

/** The handle is the URL's last segment as is: `p:<uuid>` needs no escaping in a path (RFC 3986 pchar). */
export function photoUrl(config: Pick<Config, 'publicUrl'>, handle: string): string {
  return `${config.publicUrl}/userinfo/v1/user/media/${handle}`;
}

type ClaimConfig = Pick<Config, 'claimsNamespace' | 'idpNamespace' | 'publicUrl'>;

/** The OIDC claims (contract 2.5) the released groups allow. A claim without a value is left out. */
export function oidcClaims(
  config: ClaimConfig,
  user: User,
  secondary: SecondaryId[],
  groups: Set<AttributeGroup>,
): Record<string, unknown> {
  const n = claimNames(config);
  const claims: Record<string, unknown> = { sub: user.sub };
  const sec = useridSec(config, user, secondary, groups);
  if (sec.length) {
    claims[n.useridSec] = sec;
    for (const alias of USERID_SEC_ALIASES) claims[alias] = sec;
  }
  if (groups.has('userid-idp')) claims[n.eppn] = user.eppn;
  if (groups.has('userid-nin') && user.nin) claims[n.nin] = user.nin;
  if (groups.has('email') && user.email) {
    claims.email = user.email;
    claims.email_verified = user.email_verified === 1;
  }
  if (groups.has('userinfo-name')) claims.name = user.name;
  if (groups.has('userinfo-photo') && user.photo_handle) claims.picture = photoUrl(config, user.photo_handle);
  return claims;
}

export interface LegacyUser {
  userid: string;
  userid_sec?: string[];
  name?: string;
  email?: string;
  profilephoto?: string;
}

/**
 * The legacy `user` object (contract 2.6). `userid` is the same opaque id as `sub` and, like it,
 * always present; the other properties follow the same groups as their OIDC counterparts.
 */
export function legacyUser(
  config: ClaimConfig,
  user: User,
  secondary: SecondaryId[],
  groups: Set<AttributeGroup>,
): LegacyUser {
  const out: LegacyUser = { userid: user.sub };
  const sec = useridSec(config, user, secondary, groups);
  if (sec.length) out.userid_sec = sec;
  if (groups.has('userinfo-name')) out.name = user.name;
  if (groups.has('email') && user.email) out.email = user.email;
  if (groups.has('userinfo-photo') && user.photo_handle) out.profilephoto = user.photo_handle;
  return out;
}
