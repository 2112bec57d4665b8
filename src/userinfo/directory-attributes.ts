// The directory attributes of a user, as the extended userinfo and the user lookup release them:
// the eduPerson / norEdu* names relying parties in the education sector already know, each
// released by one attribute group (or either of two). The one place that decides which
// directory attribute a client receives.
import type { User } from '../store/directory.ts';
import type { AttributeGroup } from '../vocabulary.ts';

export type DirectoryRelease = Record<string, string | string[]>;

const list = (value: string | null | undefined): string[] => (value ?? '').split(' ').filter(Boolean);

/**
 * Who may see what (docs/userinfo.md, "Directory attributes"). An attribute the user has no value
 * for is left out; an attribute whose groups are not released never appears.
 */
export function directoryAttributes(user: User, groups: Set<AttributeGroup>): DirectoryRelease {
  const out: DirectoryRelease = {};
  const put = (name: string, value: string | string[] | null | undefined) => {
    if (value === null || value === undefined || value.length === 0) return;
    out[name] = value;
  };
  if (groups.has('userinfo-name')) {
    put('cn', [user.name]);
    put('displayName', user.display_name ?? user.name);
    put('givenName', user.given_name ? [user.given_name] : null);
    put('sn', user.family_name ? [user.family_name] : null);
  }
  if (groups.has('userid-idp')) {
    put('eduPersonPrincipalName', user.eppn);
    put('uid', [user.eppn.slice(0, user.eppn.lastIndexOf('@'))]);
  }
  if (groups.has('userid-nin')) put('norEduPersonNIN', user.nin);
  if (groups.has('email')) put('mail', user.email);
  if (groups.has('userinfo-affiliation') || groups.has('groups-org')) {
    put('eduPersonAffiliation', list(user.affiliation));
    put('eduPersonPrimaryAffiliation', user.primary_affiliation);
    put('eduPersonOrgUnitDN:ou', user.org_unit ? [user.org_unit] : null);
  }
  if (groups.has('userinfo-affiliation')) put('title', user.title ? [user.title] : null);
  if (groups.has('userinfo-entitlement') || groups.has('groups-edu'))
    put('eduPersonEntitlement', list(user.entitlement));
  if (groups.has('userinfo-numbers')) put('norEduPersonLIN', localNumbers(user));
  return out;
}

/** norEduPersonLIN: `<realm>:employee:<number>`, `<realm>:student:<number>`. */
function localNumbers(user: User): string[] {
  const realm = user.eppn.slice(user.eppn.lastIndexOf('@') + 1);
  const out: string[] = [];
  if (user.employee_number) out.push(`${realm}:employee:${user.employee_number}`);
  if (user.student_number) out.push(`${realm}:student:${user.student_number}`);
  return out;
}

/** The attribute groups a client-credentials lookup releases: the client's own (no user consented). */
export function clientGroups(groups: string): Set<AttributeGroup> {
  return new Set(list(groups) as AttributeGroup[]);
}
