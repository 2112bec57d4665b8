// What SCIM provisioning reads and writes besides the users table's own functions: provisioning
// tokens, groups and their members, and users and groups found by a condition compiled to SQL (a
// SCIM filter, translated by the feature into columns), so a list never loads an organization.
import type { Expression, ExpressionBuilder, Insertable, Kysely, Selectable, SqlBool, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { DB, GroupsTable, ScimTokensTable } from './schema.ts';
import type { User } from './directory.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
type Tables = 'users' | 'groups';
export type Group = Selectable<GroupsTable>;
export type ScimToken = Selectable<ScimTokensTable>;

// ---- conditions ------------------------------------------------------------------------------

export type Comparison = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le' | 'pr';

/** A condition on one table's columns, or on group membership; values already normalized. */
export type Condition =
  | { and: Condition[] }
  | { or: Condition[] }
  | { not: Condition }
  | { column: string; op: Comparison; value: string | number | null; caseExact?: boolean }
  | { disabled: boolean }
  | { memberSub: string }
  | { constant: boolean };

const likeEscape = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

function comparison<T extends Tables>(
  eb: ExpressionBuilder<DB, T>,
  c: Extract<Condition, { column: string }>,
): Expression<SqlBool> {
  const col = sql.ref(c.column);
  if (c.op === 'pr') return eb.and([eb(col, 'is not', null), eb(col, '!=', '')]);
  if (c.value === null) return c.op === 'ne' ? eb(col, 'is not', null) : eb(col, 'is', null);
  if (typeof c.value === 'number') {
    const ops = { eq: '=', ne: '<>', gt: '>', ge: '>=', lt: '<', le: '<=' } as const;
    const op = ops[c.op as keyof typeof ops] ?? '=';
    return eb(col, op, c.value);
  }
  // case-insensitive columns are stored in lower case or compared through lower()
  const left = c.caseExact ? col : sql`lower(${col})`;
  const value = c.caseExact ? c.value : c.value.toLowerCase();
  switch (c.op) {
    case 'eq':
      return eb(left, '=', value);
    case 'ne':
      return eb.or([eb(col, 'is', null), eb(left, '<>', value)]);
    case 'co':
      return sql<SqlBool>`${left} like ${`%${likeEscape(value)}%`} escape '\\'`;
    case 'sw':
      return sql<SqlBool>`${left} like ${`${likeEscape(value)}%`} escape '\\'`;
    case 'ew':
      return sql<SqlBool>`${left} like ${`%${likeEscape(value)}`} escape '\\'`;
    default: {
      const ops = { gt: '>', ge: '>=', lt: '<', le: '<=' } as const;
      return eb(left, ops[c.op], value);
    }
  }
}

function compile<T extends Tables>(eb: ExpressionBuilder<DB, T>, c: Condition, table: Tables): Expression<SqlBool> {
  if ('and' in c) return eb.and(c.and.map((x) => compile(eb, x, table)));
  if ('or' in c) return eb.or(c.or.map((x) => compile(eb, x, table)));
  if ('not' in c) return eb.not(compile(eb, c.not, table));
  if ('constant' in c) return sql<SqlBool>`${sql.raw(c.constant ? '1=1' : '1=0')}`;
  if ('disabled' in c)
    return c.disabled ? eb(sql.ref('users.disabled_at'), 'is not', null) : eb(sql.ref('users.disabled_at'), 'is', null);
  if ('memberSub' in c)
    return sql<SqlBool>`exists (select 1 from group_members gm join users mu on mu.id = gm.user_id
      where gm.group_id = ${sql.ref(`${table}.id`)} and mu.sub = ${c.memberSub})`;
  return comparison(eb, { ...c, column: `${table}.${c.column}` });
}

export interface Page {
  offset: number;
  limit: number;
}

/** The organization's users matching the condition: one page, in id order, and how many match. */
export async function findUsers(db: Q, orgId: number, where: Condition, page: Page) {
  const base = db
    .selectFrom('users')
    .where('users.org_id', '=', orgId)
    .where((eb) => compile(eb, where, 'users'));
  const total = await base.select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  const rows =
    page.limit === 0
      ? []
      : await base.selectAll('users').orderBy('users.id').limit(page.limit).offset(page.offset).execute();
  return { total: Number(total.n), rows: rows as User[] };
}

export async function findGroups(db: Q, orgId: number, where: Condition, page: Page) {
  const base = db
    .selectFrom('groups')
    .where('groups.org_id', '=', orgId)
    .where((eb) => compile(eb, where, 'groups'));
  const total = await base.select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  const rows =
    page.limit === 0
      ? []
      : await base.selectAll('groups').orderBy('groups.id').limit(page.limit).offset(page.offset).execute();
  return { total: Number(total.n), rows };
}

export function findUserInOrganization(db: Q, orgId: number, sub: string): Promise<User | undefined> {
  return db.selectFrom('users').selectAll().where('sub', '=', sub).where('org_id', '=', orgId).executeTakeFirst();
}

export function findUserByExternalId(db: Q, orgId: number, externalId: string): Promise<User | undefined> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('external_id', '=', externalId)
    .executeTakeFirst();
}

/**
 * The users of the organization among these subs (members to be). Found by sub alone, the
 * organization checked on the rows: with `org_id = ?` in the query, SQLite without statistics
 * reads the organization's users through its org_id index for every lookup instead.
 */
export async function findUsersBySubs(db: Q, orgId: number, subs: string[]) {
  const rows = [];
  for (const chunk of chunks(subs))
    rows.push(
      ...(await db.selectFrom('users').select(['id', 'sub', 'eppn', 'org_id']).where('sub', 'in', chunk).execute()),
    );
  return rows.filter((u) => u.org_id === orgId);
}

/**
 * True when a write referred to a row that is gone (a foreign-key violation in either dialect): a
 * member added while the user was removed. The membership's own foreign-key check locks the user
 * until the adding transaction ends, so a removal after it waits and then takes the membership along.
 */
export function isMissingReference(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === '23503' || /FOREIGN KEY constraint failed/.test(e?.message ?? '');
}

/** The next version of a row: its time of change, always later than the one before. */
const nextVersion = (now: number) => sql<number>`case when updated_at >= ${now} then updated_at + 1 else ${now} end`;

/**
 * Takes the next version of a user or group row if its version is one of `expected` (any version
 * when undefined): the If-Match check made by the write itself. The updated row, or undefined when
 * none had that version (or none exists). On PostgreSQL the row stays locked until the transaction
 * ends, so concurrent writers of one resource take turns.
 */
export async function claimVersion<T extends Tables>(
  db: Q,
  table: T,
  id: number,
  expected: number[] | undefined,
  now: number,
): Promise<(T extends 'users' ? User : Group) | undefined> {
  if (expected?.length === 0) return undefined;
  let query = db
    .updateTable(table as 'groups')
    .set({ updated_at: nextVersion(now) })
    .where('id', '=', id);
  if (expected) query = query.where('updated_at', 'in', expected);
  return (await query.returningAll().executeTakeFirst()) as (T extends 'users' ? User : Group) | undefined;
}

// ---- groups ------------------------------------------------------------------------------------

export function insertGroup(db: Q, group: Insertable<GroupsTable>): Promise<Group> {
  return db.insertInto('groups').values(group).returningAll().executeTakeFirstOrThrow();
}

export function findGroup(db: Q, orgId: number, uid: string): Promise<Group | undefined> {
  return db.selectFrom('groups').selectAll().where('uid', '=', uid).where('org_id', '=', orgId).executeTakeFirst();
}

export function findGroupByExternalId(db: Q, orgId: number, externalId: string): Promise<Group | undefined> {
  return db
    .selectFrom('groups')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('external_id', '=', externalId)
    .executeTakeFirst();
}

export async function updateGroup(
  db: Q,
  id: number,
  changes: Partial<Pick<Group, 'display_name' | 'external_id' | 'type' | 'updated_at'>>,
): Promise<void> {
  await db.updateTable('groups').set(changes).where('id', '=', id).execute();
}

/** Removes a group (its members go with it) whose version is one of `expected` (any when undefined); false when none was. */
export async function deleteGroup(db: Q, id: number, expected?: number[]): Promise<boolean> {
  if (expected?.length === 0) return false;
  let query = db.deleteFrom('groups').where('id', '=', id);
  if (expected) query = query.where('updated_at', 'in', expected);
  const r = await query.executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export interface Member {
  group_id: number;
  user_id: number;
  sub: string;
  eppn: string;
  name: string;
  role: string;
}

/** The members of these groups, with who they are. */
export function listMembers(db: Q, groupIds: number[]): Promise<Member[]> {
  if (groupIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('group_members')
    .innerJoin('users', 'users.id', 'group_members.user_id')
    .select([
      'group_members.group_id',
      'group_members.user_id',
      'users.sub',
      'users.eppn',
      'users.name',
      'group_members.role',
    ])
    .where('group_members.group_id', 'in', groupIds)
    .orderBy('group_members.group_id')
    .orderBy('users.id')
    .execute();
}

/** The groups of these users (the User resource's read-only `groups`). */
export function listGroupsOfUsers(db: Q, userIds: number[]) {
  if (userIds.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('group_members')
    .innerJoin('groups', 'groups.id', 'group_members.group_id')
    .select(['group_members.user_id', 'groups.uid', 'groups.display_name'])
    .where('group_members.user_id', 'in', userIds)
    .orderBy('groups.id')
    .execute();
}

export async function insertMember(db: Q, groupId: number, userId: number, role: string): Promise<void> {
  await db
    .insertInto('group_members')
    .values({ group_id: groupId, user_id: userId, role })
    .onConflict((oc) => oc.columns(['group_id', 'user_id']).doUpdateSet({ role }))
    .execute();
}

/** Rows per statement for member changes: well under both dialects' limits on parameters. */
const MEMBERS_PER_STATEMENT = 1000;

/** Adds these users to the group as `role`; who already is a member keeps their role. How many were added. */
export async function addMembers(db: Q, groupId: number, userIds: number[], role = 'member'): Promise<number> {
  let added = 0;
  for (let i = 0; i < userIds.length; i += MEMBERS_PER_STATEMENT) {
    const rows = userIds.slice(i, i + MEMBERS_PER_STATEMENT).map((user_id) => ({ group_id: groupId, user_id, role }));
    const r = await db
      .insertInto('group_members')
      .values(rows)
      .onConflict((oc) => oc.columns(['group_id', 'user_id']).doNothing())
      .executeTakeFirst();
    added += Number(r.numInsertedOrUpdatedRows ?? 0);
  }
  return added;
}

/** Removes these users from the group; how many were members. */
export async function removeMembers(db: Q, groupId: number, userIds: number[]): Promise<number> {
  let removed = 0;
  for (let i = 0; i < userIds.length; i += MEMBERS_PER_STATEMENT) {
    const r = await db
      .deleteFrom('group_members')
      .where('group_id', '=', groupId)
      .where('user_id', 'in', userIds.slice(i, i + MEMBERS_PER_STATEMENT))
      .executeTakeFirst();
    removed += Number(r.numDeletedRows);
  }
  return removed;
}

/** Every member leaves the group; how many there were. */
export async function removeAllMembers(db: Q, groupId: number): Promise<number> {
  const r = await db.deleteFrom('group_members').where('group_id', '=', groupId).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** The member's role, if they are a member. */
export async function setMemberRole(db: Q, groupId: number, userId: number, role: string): Promise<void> {
  await db
    .updateTable('group_members')
    .set({ role })
    .where('group_id', '=', groupId)
    .where('user_id', '=', userId)
    .execute();
}

/** Every member of the group is a plain member again. */
export async function resetMemberRoles(db: Q, groupId: number): Promise<void> {
  await db
    .updateTable('group_members')
    .set({ role: 'member' })
    .where('group_id', '=', groupId)
    .where('role', '<>', 'member')
    .execute();
}

/** The user ids of the group's members. */
export async function listMemberIds(db: Q, groupId: number): Promise<number[]> {
  const rows = await db.selectFrom('group_members').select('user_id').where('group_id', '=', groupId).execute();
  return rows.map((r) => Number(r.user_id));
}

export async function countMembers(db: Q, groupId: number): Promise<number> {
  const r = await db
    .selectFrom('group_members')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('group_id', '=', groupId)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** A removed user leaves their groups (the foreign key cascades too; SQLite's only with foreign keys on). */
export async function deleteMembershipsOfUser(db: Q, userId: number): Promise<void> {
  await db.deleteFrom('group_members').where('user_id', '=', userId).execute();
}

/** An organization's groups, their members and its provisioning tokens, before the organization goes. */
export async function deleteProvisioningOfOrganization(db: Q, orgId: number): Promise<void> {
  const groupIds = db.selectFrom('groups').select('id').where('org_id', '=', orgId);
  await db.deleteFrom('group_members').where('group_id', 'in', groupIds).execute();
  await db.deleteFrom('groups').where('org_id', '=', orgId).execute();
  await db.deleteFrom('scim_tokens').where('org_id', '=', orgId).execute();
}

// ---- provisioning tokens -----------------------------------------------------------------------

export function insertScimToken(db: Q, token: Insertable<ScimTokensTable>): Promise<ScimToken> {
  return db.insertInto('scim_tokens').values(token).returningAll().executeTakeFirstOrThrow();
}

export function findScimTokenByHash(db: Q, hash: string): Promise<ScimToken | undefined> {
  return db.selectFrom('scim_tokens').selectAll().where('token_hash', '=', hash).executeTakeFirst();
}

export function findScimToken(db: Q, id: number): Promise<ScimToken | undefined> {
  return db.selectFrom('scim_tokens').selectAll().where('id', '=', id).executeTakeFirst();
}

export function listScimTokens(db: Q, orgId: number): Promise<ScimToken[]> {
  return db.selectFrom('scim_tokens').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
}

export async function revokeScimToken(db: Q, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('scim_tokens')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Marks the token used, unless that was recorded less than `every` ms ago (one write a minute, not one a request). */
export async function touchScimToken(db: Q, id: number, now: number, every: number): Promise<void> {
  await db
    .updateTable('scim_tokens')
    .set({ last_used_at: now })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', now - every)]))
    .execute();
}

/** The organizations a client may administer (its 'admin' grants). */
export async function grantedOrganizations(db: Q, clientId: string) {
  return db
    .selectFrom('client_orgs')
    .innerJoin('organizations', 'organizations.id', 'client_orgs.org_id')
    .innerJoin('clients', 'clients.client_id', 'client_orgs.client_id')
    .select(['organizations.id', 'organizations.realm', 'clients.disabled_at'])
    .where('client_orgs.client_id', '=', clientId)
    .where('client_orgs.kind', '=', 'admin')
    .execute();
}
