// Staff roles (src/directory/roles.ts).
import type { Insertable, Kysely, Transaction } from 'kysely';
import type { DB, RolesTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Inserts the role unless the user has it already; true when it was added. */
export async function insertRole(db: Q, row: Insertable<RolesTable>): Promise<boolean> {
  const r = await db
    .insertInto('roles')
    .values(row)
    .onConflict((oc) => oc.columns(['user_id', 'role', 'org_id']).doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
}

export async function deleteRole(db: Q, userId: number, role: string, orgId: number): Promise<boolean> {
  const r = await db
    .deleteFrom('roles')
    .where('user_id', '=', userId)
    .where('role', '=', role)
    .where('org_id', '=', orgId)
    .executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

/** Grants with the user's eppn, by organization then eppn; orgId narrows to one organization. */
export function listRoles(db: Q, orgId?: number) {
  let query = db
    .selectFrom('roles')
    .innerJoin('users', 'users.id', 'roles.user_id')
    .select(['users.eppn', 'roles.role', 'roles.org_id', 'roles.granted_at', 'roles.granted_by'])
    .orderBy('roles.org_id')
    .orderBy('users.eppn')
    .orderBy('roles.role');
  if (orgId !== undefined) query = query.where('roles.org_id', '=', orgId);
  return query.execute();
}

/** The roles one user holds: [role, org_id] pairs. */
export function rolesOfUser(db: Q, userId: number) {
  return db.selectFrom('roles').select(['role', 'org_id']).where('user_id', '=', userId).execute();
}

/** The roles of the user with that eppn: [role, org_id] pairs (none for an unknown eppn). */
export function rolesOfEppn(db: Q, eppn: string) {
  return db
    .selectFrom('roles')
    .innerJoin('users', 'users.id', 'roles.user_id')
    .select(['roles.role', 'roles.org_id'])
    .where('users.eppn', '=', eppn)
    .execute();
}
