// What each attribute group releases, as OpenID Connect claims and as SAML attributes, side by
// side: the one table both protocols read (docs/userinfo.md and docs/saml.md print it). A group is
// released to a client or SP the operator authorized it for; OIDC then also needs a granted scope
// that maps onto it (src/userinfo/claims.ts). The SAML attributes are filled from the directory
// attributes SCIM and the import keep (users' columns), under their urn:oid names.
import type { User } from '../store/directory.ts';
import type { Config } from '../config.ts';
import { SCOPE_GROUPS, type AttributeGroup } from '../vocabulary.ts';

export interface ClaimNames {
  useridSec: string;
  eppn: string;
  nin: string;
}

export const USERID_SEC_ALIASES = ['idp-userid_sec', 'connect-userid_sec'] as const;

export function claimNames(config: Pick<Config, 'claimsNamespace'>): ClaimNames {
  return {
    useridSec: `${config.claimsNamespace}/userid_sec`,
    eppn: `${config.claimsNamespace}/eduPersonPrincipalName`,
    nin: `${config.claimsNamespace}/nin`,
  };
}

/** What a SAML attribute's value is computed from besides the user. */
export interface SamlReleaseContext {
  /** the user's organization's realm (the scope of scoped attributes) */
  realm: string;
}

export interface SamlAttributeDefinition {
  /** the urn:oid name (NameFormat uri) */
  name: string;
  friendlyName: string;
  values(user: User, context: SamlReleaseContext): string[];
  /**
   * Released only to an SP whose metadata requests it (a RequestedAttribute of its
   * AttributeConsumingService), with a value the SSO makes for that SP (eduPersonTargetedID: its
   * persistent NameID); samlAttributes() leaves it out.
   */
  onlyIfRequested?: boolean;
}

const list = (value: string | null | undefined): string[] => (value ?? '').split(' ').filter(Boolean);
const one = (value: string | null | undefined): string[] => (value ? [value] : []);

/** The SAML V2.0 Subject Identifier attributes (their names are URNs, not OIDs). */
export const SUBJECT_ID = 'urn:oasis:names:tc:SAML:attribute:subject-id';
export const PAIRWISE_ID = 'urn:oasis:names:tc:SAML:attribute:pairwise-id';
export const EPTID = 'urn:oid:1.3.6.1.4.1.5923.1.1.1.10';

/** subject-id's value: `<unique id>@<realm>`; the unique id is the user's sub (alphanumerics and '-'). */
export function subjectIdValue(user: User, realm: string): string {
  return `${user.sub.toLowerCase().replace(/[^a-z0-9=-]/g, '')}@${realm}`;
}

const A = {
  eppn: {
    name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6',
    friendlyName: 'eduPersonPrincipalName',
    values: (u: User) => [u.eppn],
  },
  subjectId: {
    name: SUBJECT_ID,
    friendlyName: 'subject-id',
    values: (u: User, c: SamlReleaseContext) => [subjectIdValue(u, c.realm)],
  },
  displayName: {
    name: 'urn:oid:2.16.840.1.113730.3.1.241',
    friendlyName: 'displayName',
    values: (u: User) => [u.display_name ?? u.name],
  },
  cn: { name: 'urn:oid:2.5.4.3', friendlyName: 'cn', values: (u: User) => [u.name] },
  givenName: { name: 'urn:oid:2.5.4.42', friendlyName: 'givenName', values: (u: User) => one(u.given_name) },
  sn: { name: 'urn:oid:2.5.4.4', friendlyName: 'sn', values: (u: User) => one(u.family_name) },
  mail: { name: 'urn:oid:0.9.2342.19200300.100.1.3', friendlyName: 'mail', values: (u: User) => one(u.email) },
  affiliation: {
    name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.1',
    friendlyName: 'eduPersonAffiliation',
    values: (u: User) => list(u.affiliation),
  },
  scopedAffiliation: {
    name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.9',
    friendlyName: 'eduPersonScopedAffiliation',
    values: (u: User, c: SamlReleaseContext) => list(u.affiliation).map((a) => `${a}@${c.realm}`),
  },
  primaryAffiliation: {
    name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.5',
    friendlyName: 'eduPersonPrimaryAffiliation',
    values: (u: User) => one(u.primary_affiliation),
  },
  homeOrganization: {
    name: 'urn:oid:1.3.6.1.4.1.25178.1.2.9',
    friendlyName: 'schacHomeOrganization',
    values: (_u: User, c: SamlReleaseContext) => [c.realm],
  },
  ou: { name: 'urn:oid:2.5.4.11', friendlyName: 'ou', values: (u: User) => one(u.org_unit) },
  title: { name: 'urn:oid:2.5.4.12', friendlyName: 'title', values: (u: User) => one(u.title) },
  targetedId: {
    name: EPTID,
    friendlyName: 'eduPersonTargetedID',
    values: () => [],
    onlyIfRequested: true,
  },
  entitlement: {
    name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.7',
    friendlyName: 'eduPersonEntitlement',
    values: (u: User) => list(u.entitlement),
  },
} satisfies Record<string, SamlAttributeDefinition>;

export interface GroupRelease {
  /** the OIDC claim names the group releases (the ID token and userinfo) */
  claims(names: ClaimNames): string[];
  /** the SAML attributes the group releases */
  saml: SamlAttributeDefinition[];
}

const sec = (n: ClaimNames) => [n.useridSec, ...USERID_SEC_ALIASES];
const none = () => [];

/**
 * The table. Groups without OIDC claims are released to OIDC clients through the extended
 * userinfo and the groups API only (docs/userinfo.md); groups without SAML attributes have no
 * SAML counterpart yet (national identity numbers and secondary ids are not sent to SAML SPs).
 */
export const ATTRIBUTE_RELEASE: Readonly<Record<AttributeGroup, GroupRelease>> = {
  'userid-idp': { claims: (n) => [...sec(n), n.eppn], saml: [A.eppn, A.subjectId, A.targetedId] },
  'userid-nin': { claims: (n) => [...sec(n), n.nin], saml: [] },
  'userid-edugain': { claims: sec, saml: [] },
  'userid-social': { claims: sec, saml: [] },
  eidas: { claims: sec, saml: [] },
  email: { claims: () => ['email', 'email_verified'], saml: [A.mail] },
  'userinfo-name': { claims: () => ['name'], saml: [A.displayName, A.cn, A.givenName, A.sn] },
  'userinfo-photo': { claims: () => ['picture'], saml: [] },
  'userinfo-affiliation': { claims: none, saml: [A.affiliation, A.primaryAffiliation, A.ou, A.title] },
  'userinfo-entitlement': { claims: none, saml: [A.entitlement] },
  'userinfo-numbers': { claims: none, saml: [] },
  'groups-org': {
    claims: none,
    saml: [A.affiliation, A.scopedAffiliation, A.primaryAffiliation, A.homeOrganization, A.ou],
  },
  'groups-edu': { claims: none, saml: [A.entitlement] },
  'groups-other': { claims: none, saml: [] },
};

/** Claim names each group may release. */
export function groupClaims(config: Pick<Config, 'claimsNamespace'>): Record<AttributeGroup, string[]> {
  const names = claimNames(config);
  return Object.fromEntries(
    Object.entries(ATTRIBUTE_RELEASE).map(([group, release]) => [group, release.claims(names)]),
  ) as Record<AttributeGroup, string[]>;
}

/** The groups whose data may be released: authorized for the client and covered by a granted scope. */
export function releasedGroups(authorized: Iterable<string>, granted: Iterable<string>): Set<AttributeGroup> {
  const allowed = new Set(authorized);
  const released = new Set<AttributeGroup>();
  for (const scope of granted) {
    for (const group of SCOPE_GROUPS[scope] ?? []) if (allowed.has(group)) released.add(group);
  }
  return released;
}

/** The SAML attributes the groups release, each once (groups may share one), in the table's order. */
export function samlAttributeDefinitions(groups: Iterable<AttributeGroup>): SamlAttributeDefinition[] {
  const released = new Set(groups);
  const out = new Map<string, SamlAttributeDefinition>();
  for (const [group, release] of Object.entries(ATTRIBUTE_RELEASE) as [AttributeGroup, GroupRelease][]) {
    if (!released.has(group)) continue;
    for (const definition of release.saml) if (!out.has(definition.name)) out.set(definition.name, definition);
  }
  return [...out.values()];
}

/** The OpenID Connect claims the groups may release, each once, in the table's order. */
export function oidcClaims(config: Pick<Config, 'claimsNamespace'>, groups: Iterable<AttributeGroup>): string[] {
  const names = claimNames(config);
  const released = new Set(groups);
  const out = new Set<string>();
  for (const [group, release] of Object.entries(ATTRIBUTE_RELEASE) as [AttributeGroup, GroupRelease][])
    if (released.has(group)) for (const claim of release.claims(names)) out.add(claim);
  return [...out];
}

export interface SamlAttributeValue {
  name: string;
  friendlyName: string;
  values: string[];
  /** the values are NameIDs with this format and these qualifiers (eduPersonTargetedID), not strings */
  nameId?: { format: string; nameQualifier: string; spNameQualifier: string };
}

/** Whether one of the released groups releases the SAML attribute of this name. */
export function groupsRelease(groups: Iterable<AttributeGroup>, name: string): boolean {
  return [...groups].some((group) => ATTRIBUTE_RELEASE[group]?.saml.some((a) => a.name === name));
}

/**
 * The SAML attributes the released groups allow, each once (groups may share one), in the
 * table's order. An attribute the user has no value for is left out.
 */
export function samlAttributes(
  user: User,
  groups: Iterable<AttributeGroup>,
  context: SamlReleaseContext,
): SamlAttributeValue[] {
  const out: SamlAttributeValue[] = [];
  for (const definition of samlAttributeDefinitions(groups)) {
    const values = definition.values(user, context).filter((v) => v.length > 0);
    if (values.length) out.push({ name: definition.name, friendlyName: definition.friendlyName, values });
  }
  return out;
}
