// The organization report (src/console/report-api.ts) and its lists. Nothing here reads every
// passkey of the organization: passkey_counts (by authenticator model, synced or not, verified or
// not) and users.passkey_count are kept by triggers in the transaction of every passkey insert,
// delete and change (migration 010); the users with no passkey or no way to sign in are partial
// indexes over passkey_count; passkeys unused since a date are a range of an index. The lists are
// keyset pages on id.
import {
  PostgresAdapter,
  sql,
  type ExpressionBuilder,
  type Kysely,
  type SelectQueryBuilder,
  type Transaction,
} from 'kysely';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export interface PasskeyTotals {
  passkeys: number;
  synced: number;
  withoutUserVerification: number;
  unusedSince: number;
  usersWithPasskey: number;
}

const counted = sql<number | string | null>`sum(passkey_counts.passkeys)`;

/**
 * Runs fn, on PostgreSQL without parallel workers (in a transaction of its own, unless already in
 * one). The unused count is an index-only range scan that PostgreSQL plans in parallel once it is
 * large, and starting the workers costs more than they save: 200,000 index entries of a million
 * counted in 15 ms alone, 55 ms with two workers, 100 against 220-260 ms on a loaded machine.
 */
async function withoutParallelWorkers<T>(db: Q, fn: (db: Q) => Promise<T>): Promise<T> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter) || db.isTransaction) return fn(db);
  return db.transaction().execute(async (trx) => {
    await sql`set local max_parallel_workers_per_gather = 0`.execute(trx);
    return fn(trx);
  });
}

/** Passkey counts of the organization; unusedSince: not used (or, never used, made) since `cutoff`. */
export async function passkeyTotals(db: Q, orgId: number, cutoff: number): Promise<PasskeyTotals> {
  const row = await withoutParallelWorkers(db, (db) => totalsQuery(db, orgId, cutoff).executeTakeFirstOrThrow());
  return {
    passkeys: Number(row.passkeys ?? 0),
    synced: Number(row.synced ?? 0),
    withoutUserVerification: Number(row.without_uv ?? 0),
    unusedSince: Number(row.unused ?? 0),
    usersWithPasskey: Number(row.users ?? 0) - Number(row.without ?? 0),
  };
}

function totalsQuery(db: Q, orgId: number, cutoff: number) {
  const counts = () => db.selectFrom('passkey_counts').select(counted.as('n')).where('org_id', '=', orgId);
  return db.selectNoFrom((eb) => [
    counts().as('passkeys'),
    counts().where('backup_eligible', '=', 1).as('synced'),
    counts().where('mfa_verified', '=', 0).as('without_uv'),
    eb
      .selectFrom('passkeys')
      .select(sql<number | string>`count(*)`.as('n'))
      .where('org_id', '=', orgId)
      .where(sql<number>`coalesce(last_used_at, created_at)`, '<', cutoff)
      .as('unused'),
    counting(usersOf(eb, orgId)).as('users'),
    counting(withoutPasskey(usersOf(eb, orgId))).as('without'),
  ]);
}

/** Passkeys per AAGUID, most first. */
export async function passkeysByModel(db: Q, orgId: number): Promise<{ aaguid: string; count: number }[]> {
  const rows = await db
    .selectFrom('passkey_counts')
    .select(['aaguid', counted.as('n')])
    .where('org_id', '=', orgId)
    .groupBy('aaguid')
    .having(counted, '>', 0)
    .orderBy(counted, 'desc')
    .orderBy('aaguid')
    .execute();
  return rows.map((r) => ({ aaguid: r.aaguid, count: Number(r.n) }));
}

/** Users of the organization, and those with neither a password nor a passkey (no way to sign in). */
export async function userTotals(db: Q, orgId: number): Promise<{ users: number; noSignInMethod: number }> {
  const row = await db
    .selectNoFrom((eb) => [
      counting(usersOf(eb, orgId)).as('users'),
      counting(noSignInMethod(usersOf(eb, orgId))).as('none'),
    ])
    .executeTakeFirstOrThrow();
  return { users: Number(row.users ?? 0), noSignInMethod: Number(row.none ?? 0) };
}

export type PasskeyListKind = 'without-uv' | 'unused' | 'synced' | 'device-bound' | 'all';

export interface PasskeyListRow {
  id: number;
  eppn: string;
  label: string;
  aaguid: string;
  created_at: number;
  last_used_at: number | null;
  mfa_verified: number;
  backup_eligible: number;
}

/** The organization's passkeys of that kind with id > afterId, by id, at most limit. unused: coalesce(last_used_at, created_at) < cutoff. */
export async function passkeyListPage(
  db: Q,
  orgId: number,
  kind: PasskeyListKind,
  opts: { afterId: number; limit: number; cutoff: number },
): Promise<PasskeyListRow[]> {
  let q = db
    .selectFrom('passkeys')
    .innerJoin('users', 'users.id', 'passkeys.user_id')
    .select([
      'passkeys.id',
      'users.eppn',
      'passkeys.label',
      'passkeys.aaguid',
      'passkeys.created_at',
      'passkeys.last_used_at',
      'passkeys.mfa_verified',
      'passkeys.backup_eligible',
    ])
    .where('passkeys.org_id', '=', orgId)
    .where('passkeys.id', '>', opts.afterId);
  if (kind === 'without-uv') q = q.where('passkeys.mfa_verified', '=', 0);
  else if (kind === 'synced') q = q.where('passkeys.backup_eligible', '=', 1);
  else if (kind === 'device-bound') q = q.where('passkeys.backup_eligible', '=', 0);
  else if (kind === 'unused')
    q = q.where(sql<number>`coalesce(passkeys.last_used_at, passkeys.created_at)`, '<', opts.cutoff);
  return q.orderBy('passkeys.id').limit(opts.limit).execute();
}

export type UserListKind = 'without-passkey' | 'no-sign-in-method';

export interface UserListRow {
  id: number;
  eppn: string;
  name: string;
  email: string | null;
}

/** The organization's users of that kind with id > afterId, by id, at most limit. */
export async function userListPage(
  db: Q,
  orgId: number,
  kind: UserListKind,
  opts: { afterId: number; limit: number },
): Promise<UserListRow[]> {
  const users = usersOf(db, orgId);
  return (kind === 'no-sign-in-method' ? noSignInMethod(users) : withoutPasskey(users))
    .select(['users.id', 'users.eppn', 'users.name', 'users.email'])
    .where('users.id', '>', opts.afterId)
    .orderBy('users.id')
    .limit(opts.limit)
    .execute();
}

type Users<O> = SelectQueryBuilder<DB, 'users', O>;

function usersOf(db: Q | ExpressionBuilder<DB, never>, orgId: number) {
  return db.selectFrom('users').where('users.org_id', '=', orgId);
}

function counting<O>(users: Users<O>) {
  return users.select(sql<number | string>`count(*)`.as('n'));
}

// The conditions below are those of the partial indexes of migration 010, with the constant in
// the SQL text: SQLite uses a partial index only when the query's own words imply its condition,
// and a bound parameter does not.

function withoutPasskey<O>(users: Users<O>): Users<O> {
  return users.where(sql<boolean>`users.passkey_count = 0`);
}

/** Neither a password nor a passkey: no way to sign in. */
function noSignInMethod<O>(users: Users<O>): Users<O> {
  return withoutPasskey(users).where('users.password_hash', 'is', null);
}
