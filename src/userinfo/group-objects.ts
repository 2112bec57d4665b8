// Groups in the shape of the education sector's groups API (VOOT, as Feide serves it): group
// objects with id, type, displayName, parent and the caller's membership; the group types; which
// attribute group releases which kind. Pure functions over store rows.
import type { User } from '../store/directory.ts';
import type { GroupRow, MemberRow, MembershipRow } from '../store/group-queries.ts';
import type { AttributeGroup } from '../vocabulary.ts';

/** The kinds of the groups table and the VOOT type each is shown as. */
export const GROUP_TYPES = {
  organization: { id: 'fc:org', en: 'Organization', nb: 'Organisasjon', releasedBy: 'groups-org' },
  'org-unit': { id: 'fc:org', en: 'Organization', nb: 'Organisasjon', releasedBy: 'groups-org' },
  class: { id: 'fc:basisgroup', en: 'Class', nb: 'Basisgruppe', releasedBy: 'groups-edu' },
  'teaching-group': { id: 'fc:gogroup', en: 'Teaching group', nb: 'Undervisningsgruppe', releasedBy: 'groups-edu' },
  other: { id: 'voot:default', en: 'Group', nb: 'Gruppe', releasedBy: 'groups-other' },
} as const satisfies Record<string, { id: string; en: string; nb: string; releasedBy: AttributeGroup }>;

type Kind = keyof typeof GROUP_TYPES;

export interface Membership {
  basic: 'member' | 'admin' | 'owner';
  displayName?: string;
  affiliation?: string[];
  primaryAffiliation?: string;
}

export interface GroupObject {
  id: string;
  type: string;
  displayName: string;
  parent?: string;
  membership?: Membership;
}

export interface GroupType {
  id: string;
  displayName: { en: string; nb: string };
}

const kindOf = (type: string): Kind => (type in GROUP_TYPES && type !== 'organization' ? (type as Kind) : 'other');

/** Whether the released groups cover this kind of group. */
export function kindReleased(type: string, groups: Set<AttributeGroup>): boolean {
  return groups.has(GROUP_TYPES[kindOf(type)].releasedBy);
}

export const organizationGroupId = (realm: string) => `fc:org:${realm}`;

/** `fc:org:<realm>:unit:<uid>` for units, `<type>:<realm>:<uid>` for the others. */
export function groupId(row: Pick<GroupRow, 'type' | 'realm' | 'uid'>): string {
  const kind = kindOf(row.type);
  return kind === 'org-unit'
    ? `fc:org:${row.realm}:unit:${row.uid}`
    : `${GROUP_TYPES[kind].id}:${row.realm}:${row.uid}`;
}

const UID = /:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;

/** The public id (uid) a group id ends with; undefined when it names no group of the table. */
export function uidOf(id: string): string | undefined {
  return UID.exec(id)?.[1]?.toLowerCase();
}

const ROLE_LABELS: Record<string, string> = {
  member: 'Member',
  student: 'Student',
  teacher: 'Teacher',
  admin: 'Administrator',
  owner: 'Owner',
};

/** The directory's role as VOOT's basic membership: owners own, teachers and admins administer. */
export function membershipOf(role: string): Membership {
  const basic = role === 'owner' ? 'owner' : role === 'admin' || role === 'teacher' ? 'admin' : 'member';
  return { basic, displayName: ROLE_LABELS[role] ?? role };
}

/** The user's affiliations, on the memberships of organization groups. */
function withAffiliation(membership: Membership, user: User): Membership {
  const affiliation = (user.affiliation ?? '').split(' ').filter(Boolean);
  return {
    ...membership,
    ...(affiliation.length ? { affiliation } : {}),
    ...(user.primary_affiliation ? { primaryAffiliation: user.primary_affiliation } : {}),
  };
}

/** The user's own organization as a group (every user is a member of it). */
export function organizationGroup(org: { realm: string; name: string }, user: User): GroupObject {
  return {
    id: organizationGroupId(org.realm),
    type: GROUP_TYPES.organization.id,
    displayName: org.name,
    membership: withAffiliation({ basic: 'member' }, user),
  };
}

/** A group of the table with the user's membership (`withMembership` false: the group alone). */
export function groupObject(row: MembershipRow, user: User, withMembership = true): GroupObject {
  const kind = kindOf(row.type);
  const object: GroupObject = {
    id: groupId(row),
    type: GROUP_TYPES[kind].id,
    displayName: row.display_name,
    parent: organizationGroupId(row.realm),
  };
  if (!withMembership) return object;
  const membership = membershipOf(row.role);
  return { ...object, membership: kind === 'org-unit' ? withAffiliation(membership, user) : membership };
}

/** A member as other members see them: the name and the role, nothing else. */
export function memberObject(row: MemberRow): { name: string; membership: Membership } {
  return { name: row.display_name ?? row.name, membership: membershipOf(row.role) };
}

/** Whether a group's members may be listed: not for the organization and its units. */
export function membersListed(type: string): boolean {
  return kindOf(type) !== 'org-unit';
}

/** The group types, each once. */
export function groupTypes(): GroupType[] {
  const seen = new Map<string, GroupType>();
  for (const t of Object.values(GROUP_TYPES))
    if (!seen.has(t.id)) seen.set(t.id, { id: t.id, displayName: { en: t.en, nb: t.nb } });
  return [...seen.values()];
}
