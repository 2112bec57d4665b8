// Bulk user import (src/directory/user-import.ts): a batch's existing users in two queries, and
// its new and changed users written with multi-row statements, so a million lines cost a few
// thousand statements instead of a few million.
import { CompiledQuery, PostgresAdapter, sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { DB, UsersTable } from './schema.ts';
import type { User } from './directory.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Rows per statement: ~22 columns each, well under both dialects' limits on parameters. */
const ROWS_PER_STATEMENT = 1000;

/** The users that a batch's eppns (anywhere) or external ids (in the organization) name. */
export async function findImportMatches(
  db: Q,
  orgId: number,
  eppns: string[],
  externalIds: string[],
): Promise<{ byEppn: Map<string, User>; byExternalId: Map<string, User>; upstreamLinked: Set<number> }> {
  const byEppn = new Map<string, User>();
  const byExternalId = new Map<string, User>();
  for (let i = 0; i < eppns.length; i += ROWS_PER_STATEMENT) {
    const slice = eppns.slice(i, i + ROWS_PER_STATEMENT);
    const rows = await db.selectFrom('users').selectAll().where('eppn', 'in', slice).execute();
    for (const row of rows) byEppn.set(row.eppn, row);
  }
  for (let i = 0; i < externalIds.length; i += ROWS_PER_STATEMENT) {
    const slice = externalIds.slice(i, i + ROWS_PER_STATEMENT);
    for (const row of await usersByExternalId(db, orgId, slice)) byExternalId.set(row.external_id!, row);
  }
  // Accounts found by eppn alone that an upstream sign-in created or linked (no external_id).
  const unanchored = [...byEppn.values()].filter((u) => u.external_id === null).map((u) => u.id);
  const upstreamLinked = new Set<number>();
  for (let i = 0; i < unanchored.length; i += ROWS_PER_STATEMENT) {
    const slice = unanchored.slice(i, i + ROWS_PER_STATEMENT);
    const rows = await db
      .selectFrom('upstream_links')
      .select('user_id')
      .distinct()
      .where('user_id', 'in', slice)
      .execute();
    for (const row of rows) upstreamLinked.add(Number(row.user_id));
  }
  return { byEppn, byExternalId, upstreamLinked };
}

/**
 * The organization's users with these external ids. On PostgreSQL one unique-index lookup per id
 * (a lateral join, kept from being flattened into a hash join by its `limit`): an `in (...)` list
 * lets the planner, before statistics exist on a table a first load is filling, scan the whole
 * organization through another `(org_id, ...)` index for every batch, which made a million-line
 * import quadratic.
 */
async function usersByExternalId(db: Q, orgId: number, ids: string[]): Promise<User[]> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter))
    return db.selectFrom('users').selectAll().where('org_id', '=', orgId).where('external_id', 'in', ids).execute();
  const { rows } = await sql<User>`select u.* from unnest(${ids}::text[]) as wanted(external_id)
    cross join lateral (select * from users where org_id = ${orgId} and external_id = wanted.external_id limit 1) u`.execute(
    db,
  );
  return rows;
}

/** The columns of a new user, in the order of the insert's parameters. */
const INSERT_COLUMNS = [
  'sub',
  'org_id',
  'eppn',
  'name',
  'email',
  'nin',
  'password_hash',
  'photo_handle',
  'created_at',
  'updated_at',
  'display_name',
  'email_verified',
  'external_id',
  'given_name',
  'family_name',
  'affiliation',
  'primary_affiliation',
  'org_unit',
  'title',
  'employee_number',
  'student_number',
  'entitlement',
] as const;

/** Insert texts by dialect (the adapter) and row count: building a 1,000-row insert costs more than running it. */
const insertTexts = new Map<unknown, Map<number, string>>();

function insertText(db: Q, rows: number): string {
  const adapter = db.getExecutor().adapter.constructor;
  let texts = insertTexts.get(adapter);
  if (!texts || texts.size > 100) insertTexts.set(adapter, (texts = new Map<number, string>()));
  let text = texts.get(rows);
  if (text === undefined) {
    const row = Object.fromEntries(INSERT_COLUMNS.map((c) => [c, null])) as unknown as Insertable<UsersTable>;
    text = db
      .insertInto('users')
      .values(Array.from({ length: rows }, () => row))
      .compile().sql;
    texts.set(rows, text);
  }
  return text;
}

/** New users, many rows per statement; built by the query builder once per row count. */
export async function insertImportedUsers(db: Q, users: Insertable<UsersTable>[]): Promise<void> {
  for (let i = 0; i < users.length; i += ROWS_PER_STATEMENT) {
    const slice = users.slice(i, i + ROWS_PER_STATEMENT) as unknown as Record<string, unknown>[];
    const parameters = slice.flatMap((u) => INSERT_COLUMNS.map((c) => u[c] ?? null));
    await db.executeQuery(CompiledQuery.raw(insertText(db, slice.length), parameters));
  }
}

/**
 * SQLite, for the import's connection: a page cache of 256 MB instead of 2 MB, so the indexes a
 * million new rows go into (random UUIDs among them) are updated in memory, not read back from the
 * file; and a checkpoint every 40 MB of log instead of every 4 MB, so a page that many batches
 * change is copied into the database file fewer times. Not less often: a service reading the same
 * file meanwhile answered slower at times the longer the log (slowest answer during a million-line
 * import: 2.2 s with 400 MB, 0.6 s with 40 MB, 0.3 s with 4 MB; docs/user-import.md).
 * The returned function puts both back. Nothing on PostgreSQL.
 */
export async function tuneForImport(db: Q, dialect: 'sqlite' | 'postgres'): Promise<() => Promise<void>> {
  if (dialect !== 'sqlite') return async () => {};
  await sql`pragma cache_size = -262144`.execute(db);
  await sql`pragma wal_autocheckpoint = 10000`.execute(db);
  return async () => {
    await sql`pragma cache_size = -2000`.execute(db);
    await sql`pragma wal_autocheckpoint = 1000`.execute(db);
  };
}

/** The columns an import may change. */
const IMPORTED_COLUMNS = [
  'eppn',
  'name',
  'display_name',
  'email',
  'email_verified',
  'email_primary',
  'external_id',
  'given_name',
  'family_name',
  'affiliation',
  'primary_affiliation',
  'org_unit',
  'title',
  'employee_number',
  'student_number',
  'entitlement',
  'updated_at',
] as const;

/**
 * Changed users, many rows per statement: each whole row is offered again under its id, and the
 * conflict on the primary key turns it into an update of the imported columns (both dialects).
 */
export async function updateImportedUsers(db: Q, users: User[]): Promise<void> {
  for (let i = 0; i < users.length; i += ROWS_PER_STATEMENT) {
    const rows = users.slice(i, i + ROWS_PER_STATEMENT).map((u) => {
      const row: Insertable<UsersTable> & { id: number } = {
        id: u.id,
        sub: u.sub,
        org_id: u.org_id,
        nin: u.nin,
        password_hash: u.password_hash,
        photo_handle: u.photo_handle,
        created_at: u.created_at,
        disabled_at: u.disabled_at,
        updated_at: u.updated_at,
        eppn: u.eppn,
        name: u.name,
      };
      for (const column of IMPORTED_COLUMNS) (row as Record<string, unknown>)[column] = u[column];
      return row;
    });
    await db
      .insertInto('users')
      .values(rows)
      .onConflict((oc) =>
        oc
          .column('id')
          .doUpdateSet((eb) => Object.fromEntries(IMPORTED_COLUMNS.map((c) => [c, eb.ref(`excluded.${c}`)]))),
      )
      .execute();
  }
}

/**
 * Existing users given the hash an import brought, one statement each: only while they still have
 * neither a password nor a passkey (a password set or a passkey registered meanwhile wins).
 */
export async function setImportedPasswords(db: Q, users: { id: number; hash: string }[], now: number): Promise<number> {
  let set = 0;
  for (const { id, hash } of users) {
    const r = await db
      .updateTable('users')
      .set({ password_hash: hash, updated_at: now })
      .where('id', '=', id)
      .where('password_hash', 'is', null)
      .where('passkey_count', '=', 0)
      .executeTakeFirst();
    set += Number(r.numUpdatedRows);
  }
  return set;
}

/**
 * Takes the write lock at the start of an import's transaction (SQLite: a statement that writes,
 * though nothing), so its reads are never invalidated by another writer before it writes (a
 * deferred SQLite transaction that read first cannot then write after someone else did).
 * Readers go on meanwhile (WAL). On PostgreSQL it changes and locks nothing.
 */
export async function lockForImport(db: Transaction<DB>): Promise<void> {
  await db
    .updateTable('users')
    .set((eb) => ({ updated_at: eb.ref('updated_at') }))
    .where(sql<boolean>`1 = 0`)
    .execute();
}
