// The REFEDS entity categories the identity provider honours for service providers of a trusted
// federation, and what each releases, as SAML attribute names (urn:oid), in one table. A
// federation's SPs get attributes only through the categories the operator released for that
// federation (`saml federation add --release ...`) and that the SP's metadata carries; the SSO
// builds the attribute statement from the SP's attribute groups (src/directory/attribute-release.ts)
// and keeps only the names categoryAttributes() gives, so a category never widens a group and a
// group never widens a category.
//
// What each category releases (the REFEDS specifications at the category URIs):
// - Research and Scholarship: a non-reassigned user identifier (eduPersonPrincipalName here; the
//   service never reassigns one), person name (displayName, givenName, sn), email (mail), and
//   eduPersonScopedAffiliation (optional in the specification, released here).
// - Personalized Access: subject-id, mail, displayName, givenName, sn, eduPersonScopedAffiliation,
//   schacHomeOrganization, eduPersonAssurance.
// - Pseudonymous Access: pairwise-id, eduPersonScopedAffiliation, schacHomeOrganization,
//   eduPersonAssurance.
// - Anonymous Access: eduPersonScopedAffiliation, schacHomeOrganization.
import type { AttributeGroup } from '../vocabulary.ts';

export const SAML_ATTRIBUTE = {
  eduPersonPrincipalName: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6',
  eduPersonScopedAffiliation: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.9',
  eduPersonAssurance: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.11',
  mail: 'urn:oid:0.9.2342.19200300.100.1.3',
  displayName: 'urn:oid:2.16.840.1.113730.3.1.241',
  givenName: 'urn:oid:2.5.4.42',
  sn: 'urn:oid:2.5.4.4',
  schacHomeOrganization: 'urn:oid:1.3.6.1.4.1.25178.1.2.9',
  subjectId: 'urn:oasis:names:tc:SAML:attribute:subject-id',
  pairwiseId: 'urn:oasis:names:tc:SAML:attribute:pairwise-id',
} as const;

const A = SAML_ATTRIBUTE;

/** The release policies an operator may give a federation (`--release`), each one category. */
export const RELEASE_POLICIES = ['research-and-scholarship', 'personalized', 'pseudonymous', 'anonymous'] as const;
export type ReleasePolicy = (typeof RELEASE_POLICIES)[number];

export interface EntityCategory {
  policy: ReleasePolicy;
  /** the entity-category value in SP metadata */
  uri: string;
  /** the SAML attribute names it releases */
  attributes: readonly string[];
}

/** The one table: category, its URI, and exactly what it releases. */
export const ENTITY_CATEGORIES: readonly EntityCategory[] = [
  {
    policy: 'research-and-scholarship',
    uri: 'http://refeds.org/category/research-and-scholarship',
    attributes: [A.eduPersonPrincipalName, A.mail, A.displayName, A.givenName, A.sn, A.eduPersonScopedAffiliation],
  },
  {
    policy: 'personalized',
    uri: 'https://refeds.org/category/personalized',
    attributes: [
      A.subjectId,
      A.mail,
      A.displayName,
      A.givenName,
      A.sn,
      A.eduPersonScopedAffiliation,
      A.schacHomeOrganization,
      A.eduPersonAssurance,
    ],
  },
  {
    policy: 'pseudonymous',
    uri: 'https://refeds.org/category/pseudonymous',
    attributes: [A.pairwiseId, A.eduPersonScopedAffiliation, A.schacHomeOrganization, A.eduPersonAssurance],
  },
  {
    policy: 'anonymous',
    uri: 'https://refeds.org/category/anonymous',
    attributes: [A.eduPersonScopedAffiliation, A.schacHomeOrganization],
  },
];

/**
 * The attribute groups (src/vocabulary.ts) whose SAML attributes include each name above: the
 * groups a federation SP gets are the union of these for the attributes its categories release,
 * and the SSO then keeps only those attributes (categoryAttributes()).
 */
const GROUP_OF: Readonly<Record<string, AttributeGroup>> = {
  [A.eduPersonPrincipalName]: 'userid-idp',
  [A.subjectId]: 'userid-idp',
  [A.pairwiseId]: 'userid-idp',
  [A.mail]: 'email',
  [A.displayName]: 'userinfo-name',
  [A.givenName]: 'userinfo-name',
  [A.sn]: 'userinfo-name',
  [A.eduPersonScopedAffiliation]: 'groups-org',
  [A.schacHomeOrganization]: 'groups-org',
  [A.eduPersonAssurance]: 'groups-org',
};

export function isReleasePolicy(value: string): value is ReleasePolicy {
  return (RELEASE_POLICIES as readonly string[]).includes(value);
}

/** The categories that apply: carried by the SP and released for its federation. */
export function applicableCategories(
  descriptor: { entityCategories: readonly string[] },
  federationReleases: readonly string[],
): EntityCategory[] {
  return ENTITY_CATEGORIES.filter(
    (c) => federationReleases.includes(c.policy) && descriptor.entityCategories.includes(c.uri),
  );
}

/**
 * The SAML attribute names a federation SP may receive: the union over the categories that
 * apply. Empty: nothing but the NameID (and what the SSO always sends).
 */
export function categoryAttributes(
  descriptor: { entityCategories: readonly string[] },
  federationReleases: readonly string[],
): Set<string> {
  return new Set(applicableCategories(descriptor, federationReleases).flatMap((c) => c.attributes));
}

/** The attribute groups that cover categoryAttributes(), in the vocabulary's order. */
export function categoryGroups(
  descriptor: { entityCategories: readonly string[] },
  federationReleases: readonly string[],
): AttributeGroup[] {
  const groups = new Set([...categoryAttributes(descriptor, federationReleases)].map((name) => GROUP_OF[name]!));
  return [...groups].sort();
}

/**
 * What the SSO does with the attributes it computed from an SP's groups
 * (src/directory/attribute-release.ts): for a federation SP (releasedAttributes set), keep only the
 * names its entity categories release; a registered SP's attributes pass unchanged.
 */
export function restrictToCategories<T extends { name: string }>(
  attributes: T[],
  sp: { releasedAttributes?: readonly string[] },
): T[] {
  if (sp.releasedAttributes === undefined) return attributes;
  const allowed = new Set(sp.releasedAttributes);
  return attributes.filter((a) => allowed.has(a.name));
}

/** A federation SP whose categories release pairwise-id (Pseudonymous Access) gets it whatever its subject-id:req says. */
export function categoryReleasesPairwiseId(sp: { releasedAttributes?: readonly string[] }): boolean {
  return sp.releasedAttributes?.includes(SAML_ATTRIBUTE.pairwiseId) === true;
}
