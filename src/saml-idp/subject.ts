// Who the assertion is about, as the SP chose: the NameID (persistent, transient, email or none)
// and the attributes its groups release (src/directory/attribute-release.ts), with the Subject
// Identifier attributes its metadata asks for.
import { createHmac, randomBytes, type KeyObject } from 'node:crypto';
import {
  EPTID,
  groupsRelease,
  PAIRWISE_ID,
  subjectIdValue,
  type SamlAttributeValue,
} from '../directory/attribute-release.ts';
import { NAMEID_FORMAT } from '../saml/metadata/index.ts';
import { releasedAttributeNames, type ServiceProvider } from '../service-providers/index.ts';
import type { User } from '../store/directory.ts';
import type { Store } from '../store/index.ts';
import { persistentNameId } from '../store/saml-sso.ts';
import type { AttributeGroup } from '../vocabulary.ts';

export interface NameId {
  value: string;
  format: string;
}

/** An opaque random identifier: 32 characters of base64url, 192 bits. */
const opaque = () => randomBytes(24).toString('base64url');

/** The NameID the SP gets: undefined when it chose none (or email and the user has none). */
export async function nameIdFor(
  store: Store,
  sp: ServiceProvider,
  user: User,
  now: number,
): Promise<NameId | undefined> {
  switch (sp.nameId) {
    case 'persistent':
      return {
        value: await persistentNameId(store.db, user.id, sp.entityId, opaque, now),
        format: NAMEID_FORMAT.persistent,
      };
    case 'transient':
      return { value: opaque(), format: NAMEID_FORMAT.transient };
    case 'email':
      return user.email ? { value: user.email, format: NAMEID_FORMAT.email } : undefined;
    case 'none':
      return undefined;
  }
}

/**
 * eduPersonTargetedID (eduPerson 201602, its SAML 2.0 form): only for an SP whose metadata
 * requests it (RequestedAttribute) and whose released groups hold it (userid-idp); never for
 * others. Its value is the SP's persistent NameID, whatever NameID the SP itself receives, sent as
 * a saml:NameID (Format persistent, NameQualifier the IdP, SPNameQualifier the SP).
 */
export async function targetedIdAttribute(
  store: Store,
  sp: ServiceProvider,
  groups: Iterable<AttributeGroup>,
  user: User,
  nameId: NameId | undefined,
  idpEntityId: string,
  now: number,
): Promise<SamlAttributeValue | undefined> {
  if (!sp.descriptor.requestedAttributes.some((a) => a.name === EPTID)) return undefined;
  if (!groupsRelease(groups, EPTID)) return undefined;
  const value =
    nameId?.format === NAMEID_FORMAT.persistent
      ? nameId.value
      : await persistentNameId(store.db, user.id, sp.entityId, opaque, now);
  return {
    name: EPTID,
    friendlyName: 'eduPersonTargetedID',
    values: [value],
    nameId: { format: NAMEID_FORMAT.persistent, nameQualifier: idpEntityId, spNameQualifier: sp.entityId },
  };
}

/** The NameIDPolicy Format values the SP's choice satisfies (unspecified: whatever we send). */
export function nameIdFormatAccepted(sp: ServiceProvider, requested: string | null): boolean {
  if (!requested || requested === NAMEID_FORMAT.unspecified) return true;
  const ours: Record<ServiceProvider['nameId'], string | undefined> = {
    persistent: NAMEID_FORMAT.persistent,
    transient: NAMEID_FORMAT.transient,
    email: NAMEID_FORMAT.email,
    none: undefined,
  };
  return ours[sp.nameId] === requested;
}

/** The realm of the user's organization: what eduPersonPrincipalName is scoped with. */
export function realmOf(user: User): string {
  return user.eppn.slice(user.eppn.lastIndexOf('@') + 1);
}

/**
 * pairwise-id (SAML V2.0 Subject Identifier Attributes 3.4): `<value>@<realm>`, the value an HMAC
 * of the user and the SP under a key derived from the service's secret, so it is stable, opaque and
 * different for every SP; base32-like lower case (the profile allows letters, digits, '=' and '-').
 */
export function pairwiseIdValue(key: KeyObject, user: User, sp: ServiceProvider): string {
  const mac = createHmac('sha256', key).update(`${user.sub}\n${sp.entityId}`).digest('hex');
  return `${mac}@${realmOf(user)}`;
}

/**
 * The attributes released to the SP, with the user's values: the names releasedAttributeNames()
 * gives (its groups as the table says, the Subject Identifier attributes its subject-id:req asks
 * for, and for an SP of a trusted federation only what its entity categories release), each the
 * user has a value for; pairwise-id with the SP's own value; eduPersonTargetedID when
 * targetedIdAttribute() made it (only for an SP that requests it).
 */
export function releasedAttributes(
  sp: ServiceProvider,
  groups: Iterable<AttributeGroup>,
  user: User,
  pairwiseKey: KeyObject,
  targetedId?: SamlAttributeValue,
): SamlAttributeValue[] {
  const context = { realm: realmOf(user) };
  const out: SamlAttributeValue[] = [];
  for (const { name, friendlyName, definition } of releasedAttributeNames(sp, groups)) {
    if (name === EPTID) {
      if (targetedId) out.push(targetedId);
      continue;
    }
    const values =
      name === PAIRWISE_ID ? [pairwiseIdValue(pairwiseKey, user, sp)] : (definition?.values(user, context) ?? []);
    const present = values.filter((v) => v.length > 0);
    if (present.length) out.push({ name, friendlyName, values: present });
  }
  return out;
}

export { subjectIdValue };
