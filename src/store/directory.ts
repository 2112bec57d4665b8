// Organizations, users and their namespaced ids.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { DB, OrganizationsTable, UsersTable } from './schema.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type Organization = Selectable<OrganizationsTable>;
export type User = Selectable<UsersTable>;

export async function insertOrganization(db: Q, org: Insertable<OrganizationsTable>): Promise<void> {
  await db.insertInto('organizations').values(org).execute();
}

export function listOrganizations(db: Q): Promise<Organization[]> {
  return db.selectFrom('organizations').selectAll().orderBy('id').execute();
}

export function findOrganization(db: Q, id: number): Promise<Organization | undefined> {
  return db.selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst();
}

/** An organization's branding (JSON, see src/brand.ts), or null for the deployment's; false if no such organization. */
export async function updateOrganizationBranding(db: Q, id: number, branding: string | null): Promise<boolean> {
  const r = await db.updateTable('organizations').set({ branding }).where('id', '=', id).executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/**
 * Disables (a time) or enables (null) an organization, only when it is not in that state already:
 * false when nothing changed (or no such organization), so two concurrent changes record one.
 */
export async function updateOrganizationDisabled(db: Q, id: number, disabledAt: number | null): Promise<boolean> {
  const r = await db
    .updateTable('organizations')
    .set({ disabled_at: disabledAt })
    .where('id', '=', id)
    .where('disabled_at', disabledAt === null ? 'is not' : 'is', null)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

/** An organization's authenticator policy (JSON, see src/webauthn/policy.ts); false if no such organization. */
export async function updateOrganizationPolicy(db: Q, id: number, policy: string | null): Promise<boolean> {
  const r = await db
    .updateTable('organizations')
    .set({ passkey_policy: policy })
    .where('id', '=', id)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function insertUser(db: Q, user: Insertable<UsersTable>): Promise<User> {
  return db.insertInto('users').values(user).returningAll().executeTakeFirstOrThrow();
}

/**
 * New users, each the row insertUser writes: rows with the same columns many to a statement (a
 * column a row leaves out keeps its default, as in insertUser); returns them as written.
 */
export async function insertNewUsers(db: Q, users: Insertable<UsersTable>[]): Promise<User[]> {
  const byColumns = new Map<string, Insertable<UsersTable>[]>();
  for (const user of users) {
    // an undefined value is no column (the query builder leaves it out)
    const key = Object.keys(user)
      .filter((k) => (user as Record<string, unknown>)[k] !== undefined)
      .sort()
      .join(',');
    const same = byColumns.get(key);
    if (same) same.push(user);
    else byColumns.set(key, [user]);
  }
  const written: User[] = [];
  // ~25 parameters a row: 500 rows stay far below both dialects' limits on parameters
  for (const same of byColumns.values())
    for (const part of chunks(same, 500))
      written.push(...(await db.insertInto('users').values(part).returningAll().execute()));
  return written;
}

/** Bulk load (imports, benchmarks): one multi-row insert; returns the new ids. */
export async function insertUsers(db: Q, users: Insertable<UsersTable>[]): Promise<number[]> {
  if (users.length === 0) return [];
  const rows = await db.insertInto('users').values(users).returning('id').execute();
  return rows.map((r) => r.id);
}

/**
 * A user as the lookups by eppn, sub and id read them: with their organization's disabled state,
 * which decides with their own whether they may sign in (accountDisabled, src/directory/).
 */
export type UserAccount = User & { org_disabled_at: number | null };

function accounts(db: Q) {
  return db
    .selectFrom('users')
    .innerJoin('organizations', 'organizations.id', 'users.org_id')
    .selectAll('users')
    .select('organizations.disabled_at as org_disabled_at');
}

export function findUserByEppn(db: Q, eppn: string): Promise<UserAccount | undefined> {
  return accounts(db).where('users.eppn', '=', eppn).executeTakeFirst();
}

export function findUserBySub(db: Q, sub: string): Promise<UserAccount | undefined> {
  return accounts(db).where('users.sub', '=', sub).executeTakeFirst();
}

export function findUserById(db: Q, id: number): Promise<UserAccount | undefined> {
  return accounts(db).where('users.id', '=', id).executeTakeFirst();
}

export function listUsersOfOrganization(db: Q, orgId: number): Promise<User[]> {
  return db.selectFrom('users').selectAll().where('org_id', '=', orgId).orderBy('id').execute();
}

/** Sets the user's password hash; with `replacing`, only while the stored hash is still that one. */
export async function updateUserPassword(
  db: Q,
  eppn: string,
  passwordHash: string,
  now: number,
  replacing?: string,
): Promise<boolean> {
  const r = await db
    .updateTable('users')
    .set({ password_hash: passwordHash, updated_at: now })
    .where('eppn', '=', eppn)
    .$if(replacing !== undefined, (q) => q.where('password_hash', '=', replacing!))
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function insertUserId(db: Q, userId: number, namespace: string, identifier: string): Promise<void> {
  await db.insertInto('user_ids').values({ user_id: userId, namespace, identifier }).execute();
}

export function listUserIds(db: Q, userId: number): Promise<{ namespace: string; identifier: string }[]> {
  return db
    .selectFrom('user_ids')
    .select(['namespace', 'identifier'])
    .where('user_id', '=', userId)
    .orderBy('namespace')
    .orderBy('identifier')
    .execute();
}

export async function deleteUserId(db: Q, userId: number, namespace: string, identifier: string): Promise<boolean> {
  const r = await db
    .deleteFrom('user_ids')
    .where('user_id', '=', userId)
    .where('namespace', '=', namespace)
    .where('identifier', '=', identifier)
    .executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export type UserChanges = Partial<
  Pick<
    User,
    | 'eppn'
    | 'name'
    | 'display_name'
    | 'email'
    | 'email_verified'
    | 'email_primary'
    | 'disabled_at'
    | 'updated_at'
    | 'external_id'
    | 'given_name'
    | 'family_name'
    | 'affiliation'
    | 'primary_affiliation'
    | 'org_unit'
    | 'title'
    | 'employee_number'
    | 'student_number'
    | 'entitlement'
  >
>;

/** Changes the user's attributes; false when there is no such user. */
export async function updateUser(db: Q, id: number, changes: UserChanges): Promise<boolean> {
  const r = await db.updateTable('users').set(changes).where('id', '=', id).executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** The user no longer has a password; false when there is no such user. */
export async function clearUserPassword(db: Q, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('users')
    .set({ password_hash: null, updated_at: now })
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Deletes the user; their passkeys, photos, consents and secondary ids go with them (foreign keys cascade). */
export async function deleteUser(db: Q, id: number): Promise<boolean> {
  const r = await db.deleteFrom('users').where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export async function countUsersOfOrganization(db: Q, orgId: number): Promise<number> {
  const row = await db
    .selectFrom('users')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Deletes an organization that has no users left; the clients' grants for it cascade. */
export async function deleteOrganization(db: Q, id: number): Promise<boolean> {
  const r = await db.deleteFrom('organizations').where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

/** A user of one of the organizations by e-mail address (stored in lower case); the first, if several. */
/** Up to `limit` users of an organization with this e-mail address, lowest id first. */
export function usersWithEmailIn(db: Q, orgId: number, email: string, limit = 2): Promise<User[]> {
  return db
    .selectFrom('users')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('email', '=', email.trim().toLowerCase())
    .orderBy('id')
    .limit(limit)
    .execute();
}

export async function findUserByEmailIn(db: Q, orgIds: number[], email: string): Promise<User | undefined> {
  let first: User | undefined;
  for (const chunk of chunks(orgIds)) {
    const user = await db
      .selectFrom('users')
      .selectAll()
      .where('org_id', 'in', chunk)
      .where('email', '=', email.trim().toLowerCase())
      .orderBy('id')
      .executeTakeFirst();
    if (user && (!first || user.id < first.id)) first = user;
  }
  return first;
}

/** Ends every console session of the user: counts their console generation up (migration 013). */
export async function endConsoleSessions(db: Q, sub: string): Promise<void> {
  await db
    .updateTable('users')
    .set((eb) => ({ console_generation: eb('console_generation', '+', 1) }))
    .where('sub', '=', sub)
    .execute();
}

/** What the service's own current hashes begin with (src/directory/passwords.ts, hashPassword). */
const OWN_HASH_PREFIX = '$argon2id$v=19$m=19456,t=2,p=1$%';

/**
 * A page of the password hashes of the organization with this realm that are not the service's
 * own current kind (imported ones, mostly), after the user id `afterId`, by id.
 */
export function foreignPasswordHashes(db: Q, realm: string, afterId: number, limit: number) {
  return db
    .selectFrom('users')
    .innerJoin('organizations', 'organizations.id', 'users.org_id')
    .select(['users.id', 'users.password_hash'])
    .where('organizations.realm', '=', realm)
    .where('users.password_hash', 'is not', null)
    .where('users.password_hash', 'not like', OWN_HASH_PREFIX)
    .where('users.id', '>', afterId)
    .orderBy('users.id')
    .limit(limit)
    .execute();
}
