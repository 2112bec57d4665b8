// Read queries of the groups API and the user lookup: a user's groups, one group with the caller's
// membership, a group's members, and a user found within the organizations a client is granted.
// Each is one indexed query (group_members_user, groups.uid, group_members' key, users' sub and
// eppn), prepared: they sit on per-request paths.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import type { User } from './directory.ts';
import { prepare } from './prepared.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** A group with the realm and name of its organization (group ids and parents are built from them). */
export interface GroupRow {
  id: number;
  uid: string;
  type: string;
  display_name: string;
  realm: string;
  org_name: string;
}

/** A group the user is in, with the user's role in it. */
export interface MembershipRow extends GroupRow {
  role: string;
}

export interface MemberRow {
  name: string;
  display_name: string | null;
  role: string;
}

/** A group with its organization and the member's role in it. */
const GROUP_WITH_ROLE = [
  'groups.id',
  'groups.uid',
  'groups.type',
  'groups.display_name',
  'organizations.realm',
  'organizations.name as org_name',
  'group_members.role',
] as const;

const userGroups = prepare<{ userId: number }, MembershipRow>((db, p) =>
  db
    .selectFrom('group_members')
    .innerJoin('groups', 'groups.id', 'group_members.group_id')
    .innerJoin('organizations', 'organizations.id', 'groups.org_id')
    .select([...GROUP_WITH_ROLE])
    .where('group_members.user_id', '=', p.userId)
    .orderBy('groups.display_name')
    .orderBy('groups.uid'),
);

/** The groups the user is a member of, by name. */
export function listUserGroups(db: Q, userId: number): Promise<MembershipRow[]> {
  return userGroups(db, { userId });
}

const groupWithMembership = prepare<{ uid: string; userId: number }, GroupRow & { role: string | null }>((db, p) =>
  db
    .selectFrom('groups')
    .innerJoin('organizations', 'organizations.id', 'groups.org_id')
    .leftJoin('group_members', (join) =>
      join.onRef('group_members.group_id', '=', 'groups.id').on('group_members.user_id', '=', p.userId),
    )
    .select([...GROUP_WITH_ROLE])
    .where('groups.uid', '=', p.uid),
);

/** The group with this public id when the user is a member of it; otherwise undefined (unknown or not a member alike). */
export async function findMembership(db: Q, uid: string, userId: number): Promise<MembershipRow | undefined> {
  const [row] = await groupWithMembership(db, { uid, userId });
  return row && row.role !== null ? { ...row, role: row.role } : undefined;
}

const groupMembers = prepare<{ groupId: number; limit: number }, MemberRow>((db, p) =>
  db
    .selectFrom('group_members')
    .innerJoin('users', 'users.id', 'group_members.user_id')
    .select(['users.name', 'users.display_name', 'group_members.role'])
    .where('group_members.group_id', '=', p.groupId)
    .where('users.disabled_at', 'is', null)
    .orderBy('users.name')
    .orderBy('users.id')
    .limit(p.limit),
);

/** The group's members who are not disabled, by name, at most `limit`. */
export function listGroupMembers(db: Q, groupId: number, limit: number): Promise<MemberRow[]> {
  return groupMembers(db, { groupId, limit });
}

/** A user of a granted organization, with the organization's realm and name. */
export type LookedUpUser = User & { realm: string; org_name: string };

const grantedUser = (column: 'users.sub' | 'users.eppn') =>
  prepare<{ value: string; clientId: string; kind: string }, LookedUpUser>((db, p) =>
    db
      .selectFrom('users')
      .innerJoin('organizations', 'organizations.id', 'users.org_id')
      .innerJoin('client_orgs', (join) =>
        join
          .onRef('client_orgs.org_id', '=', 'users.org_id')
          .on('client_orgs.client_id', '=', p.clientId)
          .on('client_orgs.kind', '=', p.kind),
      )
      .selectAll('users')
      .select(['organizations.realm', 'organizations.name as org_name'])
      .where(column, '=', p.value)
      .where('users.disabled_at', 'is', null),
  );

const bySub = grantedUser('users.sub');
const byEppn = grantedUser('users.eppn');

/**
 * The enabled user with this sub or eppn in an organization the client holds a grant of `kind`
 * for. An unknown user, a disabled one and another organization's give the same undefined, from
 * the same query.
 */
export async function findGrantedUser(
  db: Q,
  by: { sub: string } | { eppn: string },
  clientId: string,
  kind: string,
): Promise<LookedUpUser | undefined> {
  const [row] =
    'sub' in by
      ? await bySub(db, { value: by.sub, clientId, kind })
      : await byEppn(db, { value: by.eppn, clientId, kind });
  return row;
}

/** The realm and name of an organization (the user's own organization group). */
const organizationNames = prepare<{ id: number }, { realm: string; name: string }>((db, p) =>
  db.selectFrom('organizations').select(['realm', 'name']).where('id', '=', p.id),
);

export async function findOrganizationNames(db: Q, id: number): Promise<{ realm: string; name: string } | undefined> {
  const [row] = await organizationNames(db, { id });
  return row;
}
