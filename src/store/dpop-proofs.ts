// DPoP proof ids (RFC 9449 11.1) already accepted, shared by every instance.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

/**
 * Records a proof id; true for the first caller only. One insert that does nothing on a conflict,
 * so of concurrent requests presenting the same proof exactly one goes on. An expired row no
 * longer counts (the proof is refused for its age anyway) and is taken over.
 */
export async function recordProof(db: Q, id: string, expiresAt: number, now: number): Promise<boolean> {
  const r = await db
    .insertInto('dpop_proofs')
    .values({ id, expires_at: expiresAt })
    .onConflict((oc) =>
      oc.column('id').doUpdateSet({ expires_at: expiresAt }).where('dpop_proofs.expires_at', '<=', now),
    )
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function deleteExpiredProofs(db: Q, now: number): Promise<number> {
  const r = await db.deleteFrom('dpop_proofs').where('expires_at', '<=', now).executeTakeFirst();
  return Number(r.numDeletedRows);
}
