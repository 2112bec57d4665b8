// Which SAML attributes an SP receives, by name: what its attribute groups release (the one table,
// src/directory/attribute-release.ts), the Subject Identifier attributes as its metadata's
// subject-id:req asks, and for an SP of a trusted federation only what its entity categories
// release (entity-categories.ts). The SSO fills these with the user's values (src/saml-idp/subject.ts);
// the admin CLI and the console show them.
import {
  PAIRWISE_ID,
  SUBJECT_ID,
  samlAttributeDefinitions,
  type SamlAttributeDefinition,
} from '../directory/attribute-release.ts';
import type { AttributeGroup } from '../vocabulary.ts';
import { categoryReleasesPairwiseId, restrictToCategories } from './entity-categories.ts';
import type { ServiceProvider } from './registry.ts';

export interface ReleasedAttributeName {
  /** the urn:oid name (the Subject Identifier attributes: their URN) */
  name: string;
  friendlyName: string;
}

type Released = ReleasedAttributeName & { definition?: SamlAttributeDefinition };

/**
 * The attributes the SP receives for these groups (the groups the user consented to; by default the
 * SP's own), in the order the assertion lists them. pairwise-id has no definition: its value is the
 * SP's own (src/saml-idp/subject.ts).
 */
export function releasedAttributeNames(
  sp: Pick<ServiceProvider, 'groups' | 'descriptor' | 'releasedAttributes'>,
  groups: Iterable<AttributeGroup> = sp.groups,
): Released[] {
  // an attribute released only on request (eduPersonTargetedID) only when the SP's metadata requests it
  const requested = new Set(sp.descriptor.requestedAttributes.map((a) => a.name));
  let released: Released[] = samlAttributeDefinitions(groups)
    .filter((definition) => !definition.onlyIfRequested || requested.has(definition.name))
    .map((definition) => ({ name: definition.name, friendlyName: definition.friendlyName, definition }));
  const requirement = sp.descriptor.subjectIdRequirement;
  const pairwise = { name: PAIRWISE_ID, friendlyName: 'pairwise-id' };
  if (requirement === 'pairwise-id') released = [...released.filter((a) => a.name !== SUBJECT_ID), pairwise];
  else if (requirement === 'none') released = released.filter((a) => a.name !== SUBJECT_ID);
  if (categoryReleasesPairwiseId(sp) && !released.some((a) => a.name === PAIRWISE_ID))
    released = [...released, pairwise];
  return restrictToCategories(released, sp);
}
