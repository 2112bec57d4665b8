// Consents a user gave a client: the scopes and attribute groups they agreed to release.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export async function findConsent(db: Q, userId: number, clientId: string): Promise<string[] | undefined> {
  const row = await db
    .selectFrom('consents')
    .select('scopes')
    .where('user_id', '=', userId)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
  return row ? row.scopes.split(' ').filter(Boolean) : undefined;
}

export async function saveConsent(
  db: Q,
  userId: number,
  clientId: string,
  scopes: string[],
  now: number,
): Promise<void> {
  const value = [...new Set(scopes)].sort().join(' ');
  await db
    .insertInto('consents')
    .values({ user_id: userId, client_id: clientId, scopes: value, created_at: now })
    .onConflict((oc) => oc.columns(['user_id', 'client_id']).doUpdateSet({ scopes: value, created_at: now }))
    .execute();
}

/** The clients a user has agreed to release data to, newest first. */
export function listConsents(
  db: Q,
  userId: number,
): Promise<{ client_id: string; scopes: string; created_at: number }[]> {
  return db
    .selectFrom('consents')
    .select(['client_id', 'scopes', 'created_at'])
    .where('user_id', '=', userId)
    .orderBy('created_at', 'desc')
    .execute();
}

export async function deleteConsent(db: Q, userId: number, clientId: string): Promise<boolean> {
  const r = await db
    .deleteFrom('consents')
    .where('user_id', '=', userId)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}
