// Signing keys, shared by every instance. Private parts are sealed before they reach this module.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, SigningKeysTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type SigningKeyRow = Selectable<SigningKeysTable>;

export function listSigningKeys(db: Q): Promise<SigningKeyRow[]> {
  return db.selectFrom('signing_keys').selectAll().orderBy('activates_at', 'desc').orderBy('kid').execute();
}

export async function insertSigningKeys(db: Q, rows: SigningKeyRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insertInto('signing_keys').values(rows).execute();
}

/** Marks every other key of the same algorithm retired from the moment the new one activates. */
export async function retireSigningKeys(db: Q, alg: string, exceptKid: string, at: number): Promise<void> {
  await db.updateTable('signing_keys').set({ retired_at: at }).where('alg', '=', alg).where('kid', '!=', exceptKid).where('retired_at', 'is', null).execute();
}

export async function deleteSigningKeysRetiredBefore(db: Q, before: number): Promise<number> {
  const r = await db.deleteFrom('signing_keys').where('retired_at', '<', before).executeTakeFirst();
  return Number(r.numDeletedRows);
}
