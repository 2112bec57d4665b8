// The shared vocabulary of the service: attribute groups, scopes, user-id namespaces and the
// resource servers that accept access tokens. Every layer above names these things from here.

/** Attribute groups an operator authorizes per client; each is also a scope of the same name. */
export const ATTRIBUTE_GROUPS = [
  'userid-idp',
  'userid-nin',
  'userid-edugain',
  'userid-social',
  'eidas',
  'email',
  'userinfo-name',
  'userinfo-photo',
  // directory attributes of the extended userinfo and the user lookup (docs/userinfo.md)
  'userinfo-affiliation',
  'userinfo-entitlement',
  'userinfo-numbers',
  // the groups API, one group per kind of group: organization and its units; classes and
  // teaching groups; every other group
  'groups-org',
  'groups-edu',
  'groups-other',
] as const;
export type AttributeGroup = (typeof ATTRIBUTE_GROUPS)[number];

/** Scopes of the machine-to-machine APIs (client_credentials). */
export const API_SCOPES = [
  'passkey.read',
  'passkey.delete',
  'system-check-user-existence',
  'gk_checkuser',
  'gk_checkuser_systemlookup',
  'ssf.manage',
  'recovery.manage',
  'audit.read',
  'report.read',
  'scim',
  'system-all-users',
] as const;

/** Scopes of sign-in (authorization code). */
export const OIDC_SCOPES = [
  'openid',
  'profile',
  'email',
  'offline_access',
  ...ATTRIBUTE_GROUPS.filter((g) => g !== 'email'),
] as const;

export const KNOWN_SCOPES = new Set<string>([...API_SCOPES, ...OIDC_SCOPES]);

/**
 * The standard OpenID Connect scopes every sign-in client may ask for, as stock relying parties do
 * (`openid profile email`). They map onto attribute groups (profile: name and photo, email: email),
 * so they release only what the client's groups allow; asking for one the client holds no group of
 * releases nothing rather than failing the sign-in.
 */
export const STANDARD_OIDC_SCOPES = ['openid', 'profile', 'email'] as const;

/**
 * Scopes and the groups they map onto. Every group is also a scope of the same name. `openid`
 * alone releases only `sub`; `profile` is the standard bundle of name and picture.
 */
export const SCOPE_GROUPS: Readonly<Record<string, readonly AttributeGroup[]>> = {
  openid: [],
  profile: ['userinfo-name', 'userinfo-photo'],
  ...Object.fromEntries(ATTRIBUTE_GROUPS.map((g) => [g, [g]])),
};

/** Scopes that release user data (oidc-provider's `scopes` for sign-in). */
export const RELEASE_SCOPES = Object.keys(SCOPE_GROUPS);

/** Splits a space-separated scope or group list. */
export function words(value: unknown): string[] {
  return typeof value === 'string' ? value.split(' ').filter(Boolean) : [];
}

// Namespaces of user ids (`<namespace>:<identifier>`). The directory's own ids come from the user
// record (`<IDP_NAMESPACE>:<eppn>`, `nin:<number>`); secondary ids live in user_ids under one of
// the namespaces below, each released by one attribute group.

export const NIN_NAMESPACE = 'nin';

export const SECONDARY_NAMESPACES: Readonly<Record<string, AttributeGroup>> = {
  edugain: 'userid-edugain',
  eidas: 'eidas',
  apple: 'userid-social',
  facebook: 'userid-social',
  github: 'userid-social',
  google: 'userid-social',
  linkedin: 'userid-social',
  microsoft: 'userid-social',
  twitter: 'userid-social',
  windowslive: 'userid-social',
};

/** Names IDP_NAMESPACE may not take: they already mean something else. */
export const RESERVED_NAMESPACES = [NIN_NAMESPACE, 'p', ...Object.keys(SECONDARY_NAMESPACES)];

/** A resource server that accepts JWT access tokens from the client_credentials grant. */
export interface ResourceServer {
  /** the resource indicator, also the token audience */
  id: string;
  scopes: string[];
}

/** The service's resource servers; a token names one (its audience), chosen by its scopes. */
export function resourceServers(publicUrl: string): ResourceServer[] {
  return [
    // The staff API (/2/recovery-link) is the passkey API's companion: same audience.
    {
      id: `${publicUrl}/2/passkey`,
      scopes: ['passkey.read', 'passkey.delete', 'recovery.manage', 'audit.read', 'report.read'],
    },
    {
      id: `${publicUrl}/userinfo/v1/exists`,
      scopes: ['system-check-user-existence', 'gk_checkuser', 'gk_checkuser_systemlookup'],
    },
    { id: `${publicUrl}/ssf`, scopes: ['ssf.manage'] },
    // SCIM provisioning (RFC 7644) of the one organization the client is granted
    { id: `${publicUrl}/scim/v2`, scopes: ['scim'] },
    { id: `${publicUrl}/userinfo/v1/lookup`, scopes: ['system-all-users'] },
  ];
}

/** The resource whose scopes include the first requested scope. */
export function resourceForScopes(publicUrl: string, scope: string | undefined): ResourceServer | undefined {
  const first = (scope ?? '').split(' ').find(Boolean);
  return resourceServers(publicUrl).find((r) => first !== undefined && r.scopes.includes(first));
}
