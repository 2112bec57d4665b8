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
