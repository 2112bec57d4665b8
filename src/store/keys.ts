// Signing keys, shared by every instance. Private parts are sealed before they reach this module.
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, SigningKeysTable } from './schema.ts';
import type { Store } from './index.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type SigningKeyRow = Selectable<SigningKeysTable>;
export type Trx = Transaction<DB>;

export function listSigningKeys(db: Q): Promise<SigningKeyRow[]> {
  return db.selectFrom('signing_keys').selectAll().orderBy('activates_at', 'desc').orderBy('kid').execute();
}

export async function insertSigningKeys(db: Q, rows: SigningKeyRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insertInto('signing_keys').values(rows).execute();
}

/** Marks every other key of the same algorithm retired from the moment the new one activates. */
export async function retireSigningKeys(db: Q, alg: string, exceptKid: string, at: number): Promise<void> {
  await db
    .updateTable('signing_keys')
    .set({ retired_at: at })
    .where('alg', '=', alg)
    .where('kid', '!=', exceptKid)
    .where('retired_at', 'is', null)
    .execute();
}

export async function deleteSigningKeysRetiredBefore(db: Q, before: number): Promise<number> {
  const r = await db.deleteFrom('signing_keys').where('retired_at', '<', before).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * Runs fn in a transaction that holds the signing-key lock, so instances starting at once (or a
 * rotation racing a start) never create two first keys: a PostgreSQL advisory lock; SQLite
 * serializes writers by itself.
 */
export function inSigningKeyTransaction<T>(store: Store, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return store.db.transaction().execute(async (trx) => {
    if (store.dialect === 'postgres') await sql`select pg_advisory_xact_lock(7301001)`.execute(trx);
    return fn(trx);
  });
}
