// LDAP directories and the users each provides (docs/ldap.md): their rows, the lease a sync
// holds (a conditional update, so of several instances one runs a directory's sync at a time),
// and the per-run bookkeeping.
import { PostgresAdapter, sql, type Insertable, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, LdapDirectoriesTable, LdapEntriesTable, LdapGroupsTable } from './schema.ts';
import type { User } from './directory.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type LdapDirectory = Selectable<LdapDirectoriesTable>;
export type LdapEntry = Selectable<LdapEntriesTable>;
export type LdapGroup = Selectable<LdapGroupsTable>;

export async function insertLdapDirectory(db: Q, row: Insertable<LdapDirectoriesTable>): Promise<number> {
  const { id } = await db.insertInto('ldap_directories').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(id);
}

/** Seals the bind password once the row's id (its associated data) is known. */
export async function setLdapBindPassword(db: Q, id: number, sealed: string): Promise<void> {
  await db.updateTable('ldap_directories').set({ bind_password: sealed }).where('id', '=', id).execute();
}

export function findLdapDirectory(db: Q, id: number): Promise<LdapDirectory | undefined> {
  return db.selectFrom('ldap_directories').selectAll().where('id', '=', id).executeTakeFirst();
}

export function listLdapDirectories(db: Q, orgId?: number): Promise<LdapDirectory[]> {
  let query = db.selectFrom('ldap_directories').selectAll().orderBy('id');
  if (orgId !== undefined) query = query.where('org_id', '=', orgId);
  return query.execute();
}

/** The organization's directories that check passwords. */
export function passwordDirectories(db: Q, orgId: number): Promise<LdapDirectory[]> {
  return db
    .selectFrom('ldap_directories')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('password_check', '=', 1)
    .orderBy('id')
    .execute();
}

export async function deleteLdapDirectory(db: Q, id: number): Promise<boolean> {
  const result = await db.deleteFrom('ldap_directories').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Directories with a periodic sync that is due and not held by a running one. */
export async function dueLdapDirectories(db: Q, now: number): Promise<LdapDirectory[]> {
  const rows = await db
    .selectFrom('ldap_directories')
    .selectAll()
    .where('sync_every_ms', 'is not', null)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)]))
    .orderBy('id')
    .execute();
  return rows.filter((d) => d.last_sync_at === null || Number(d.last_sync_at) + Number(d.sync_every_ms) <= now);
}

/**
 * Takes the directory's sync lease when no one holds it (or theirs ran out); true when taken.
 * With `dueAt`, only while its periodic sync is due then: a run another instance finished
 * meanwhile is not repeated.
 */
export async function claimLdapLease(
  db: Q,
  id: number,
  owner: string,
  now: number,
  until: number,
  dueAt?: number,
): Promise<boolean> {
  let query = db
    .updateTable('ldap_directories')
    .set({ lease_until: until, lease_owner: owner })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now)]));
  if (dueAt !== undefined)
    query = query.where((eb) =>
      eb.or([eb('last_sync_at', 'is', null), eb(eb('last_sync_at', '+', eb.ref('sync_every_ms')), '<=', dueAt)]),
    );
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Extends a lease its owner still holds; false when it was lost (run out and taken by another). */
export async function renewLdapLease(db: Q, id: number, owner: string, until: number): Promise<boolean> {
  const result = await db
    .updateTable('ldap_directories')
    .set({ lease_until: until })
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function releaseLdapLease(db: Q, id: number, owner: string): Promise<void> {
  await db
    .updateTable('ldap_directories')
    .set({ lease_until: null, lease_owner: null })
    .where('id', '=', id)
    .where('lease_owner', '=', owner)
    .execute();
}

export interface SyncOutcome {
  at: number;
  status: 'ok' | 'failed';
  summary: string;
  /** set after a completed run: where the next incremental one starts */
  highWater?: string | null;
  full?: boolean;
}

export async function recordLdapSync(db: Q, id: number, outcome: SyncOutcome): Promise<void> {
  const done = outcome.status === 'ok';
  await db
    .updateTable('ldap_directories')
    .set((eb) => ({
      last_sync_at: outcome.at,
      last_sync_status: outcome.status,
      last_sync_summary: outcome.summary,
      ...(done && outcome.highWater !== undefined ? { high_water: outcome.highWater } : {}),
      ...(done && outcome.full ? { runs_since_full: 0, last_full_at: outcome.at } : {}),
      ...(done && !outcome.full ? { runs_since_full: eb('runs_since_full', '+', 1) } : {}),
    }))
    .where('id', '=', id)
    .execute();
}

/** Forgets the high-water mark: the next run reads the whole directory. */
export async function resetLdapHighWater(db: Q, id: number): Promise<void> {
  await db.updateTable('ldap_directories').set({ high_water: null }).where('id', '=', id).execute();
}

export type LinkedUser = LdapEntry & { user: User };

/** The directory's entries among these external ids, each with its user. */
export async function findLdapEntries(
  db: Q,
  directoryId: number,
  externalIds: string[],
): Promise<Map<string, LinkedUser>> {
  const found = new Map<string, LinkedUser>();
  for (const part of chunks([...new Set(externalIds)])) {
    if (part.length === 0) continue;
    const entries = await db
      .selectFrom('ldap_entries')
      .selectAll()
      .where('directory_id', '=', directoryId)
      .where('external_id', 'in', part)
      .execute();
    if (entries.length === 0) continue;
    const users = await db
      .selectFrom('users')
      .selectAll()
      .where(
        'id',
        'in',
        entries.map((e) => e.user_id),
      )
      .execute();
    const byId = new Map(users.map((u) => [Number(u.id), u]));
    for (const e of entries) {
      const user = byId.get(Number(e.user_id));
      if (user) found.set(e.external_id, { ...e, user });
    }
  }
  return found;
}

/** The directory's entries among these external ids with their digests and their users' versions: what a run may skip. */
export async function findLdapDigests(
  db: Q,
  directoryId: number,
  externalIds: string[],
): Promise<Map<string, { digest: string | null; updated_at: number }>> {
  const found = new Map<string, { digest: string | null; updated_at: number }>();
  for (const part of chunks([...new Set(externalIds)])) {
    if (part.length === 0) continue;
    const rows =
      db.getExecutor().adapter instanceof PostgresAdapter
        ? // One primary-key lookup per id, and one of the user by id (lateral joins, which the planner
          // cannot turn into hash joins): an `in (...)` list with a join to users made it scan both
          // tables for every page while a first run's rows had no statistics yet (10 s for an
          // unchanged 100,000).
          (
            await sql<{ external_id: string; digest: string | null; updated_at: number }>`
              select e.external_id, e.digest, u.updated_at
              from unnest(${part}::text[]) as wanted(external_id)
              cross join lateral (select external_id, digest, user_id from ldap_entries
                where directory_id = ${directoryId} and external_id = wanted.external_id limit 1) e
              cross join lateral (select updated_at from users where id = e.user_id limit 1) u`.execute(db)
          ).rows
        : await db
            .selectFrom('ldap_entries as e')
            .innerJoin('users as u', 'u.id', 'e.user_id')
            .select(['e.external_id', 'e.digest', 'u.updated_at'])
            .where('e.directory_id', '=', directoryId)
            .where('e.external_id', 'in', part)
            .execute();
    for (const r of rows) found.set(r.external_id, { digest: r.digest, updated_at: Number(r.updated_at) });
  }
  return found;
}

/** The users with these eppns. */
export async function findUsersByEppns(db: Q, eppns: string[]): Promise<User[]> {
  const found: User[] = [];
  for (const part of chunks([...new Set(eppns)]))
    if (part.length) found.push(...(await db.selectFrom('users').selectAll().where('eppn', 'in', part).execute()));
  return found;
}

/** The entry a user came from, in any directory. */
export function findLdapEntryOfUser(db: Q, userId: number): Promise<LdapEntry | undefined> {
  return db.selectFrom('ldap_entries').selectAll().where('user_id', '=', userId).executeTakeFirst();
}

/** Every entry of the directory (external id, user, whether the sync disabled them): a full run's comparison. */
export function listLdapEntries(db: Q, directoryId: number): Promise<LdapEntry[]> {
  return db.selectFrom('ldap_entries').selectAll().where('directory_id', '=', directoryId).execute();
}

export async function countLdapEntries(db: Q, directoryId: number): Promise<number> {
  const row = await db
    .selectFrom('ldap_entries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('directory_id', '=', directoryId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Links a user to the entry (or moves the link to its new DN), in one statement. */
export async function saveLdapEntry(db: Q, entry: LdapEntry): Promise<void> {
  await saveLdapEntries(db, [entry]);
}

/** Many entries' links (or their moves to new DNs), many to a statement. */
export async function saveLdapEntries(db: Q, entries: LdapEntry[]): Promise<void> {
  for (const part of chunks(entries))
    await db
      .insertInto('ldap_entries')
      .values(part)
      .onConflict((oc) =>
        oc.columns(['directory_id', 'external_id']).doUpdateSet((eb) => ({
          user_id: eb.ref('excluded.user_id'),
          dn: eb.ref('excluded.dn'),
          disabled_by_directory: eb.ref('excluded.disabled_by_directory'),
          digest: eb.ref('excluded.digest'),
        })),
      )
      .execute();
}

export async function deleteLdapEntry(db: Q, directoryId: number, externalId: string): Promise<void> {
  await db
    .deleteFrom('ldap_entries')
    .where('directory_id', '=', directoryId)
    .where('external_id', '=', externalId)
    .execute();
}

// ---- groups ------------------------------------------------------------------------------------

/** The users a directory provides, with what a group's member values name them by (DN, eppn). */
export function listLdapMembers(db: Q, directoryId: number) {
  return db
    .selectFrom('ldap_entries as e')
    .innerJoin('users as u', 'u.id', 'e.user_id')
    .select(['e.dn', 'u.eppn', 'u.sub'])
    .where('e.directory_id', '=', directoryId)
    .execute();
}

/** The groups a directory provides, each with its group. */
export function listLdapGroups(db: Q, directoryId: number) {
  return db
    .selectFrom('ldap_groups as l')
    .innerJoin('groups as g', 'g.id', 'l.group_id')
    .selectAll('g')
    .select(['l.external_id as ldap_external_id', 'l.dn as ldap_dn'])
    .where('l.directory_id', '=', directoryId)
    .execute();
}

/** The directory (if any) that provides a group. */
export function findLdapGroupOfGroup(db: Q, groupId: number): Promise<LdapGroup | undefined> {
  return db.selectFrom('ldap_groups').selectAll().where('group_id', '=', groupId).executeTakeFirst();
}

/** Links a group to its entry (or moves the link to the entry's new DN). */
export async function saveLdapGroup(db: Q, link: LdapGroup): Promise<void> {
  await db
    .insertInto('ldap_groups')
    .values(link)
    .onConflict((oc) =>
      oc.columns(['directory_id', 'external_id']).doUpdateSet({ group_id: link.group_id, dn: link.dn }),
    )
    .execute();
}
