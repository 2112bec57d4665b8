// Back-channel logout deliveries: one row per logout token a relying party should receive, with
// the outcome of the last attempt and when to try again.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, LogoutDeliveriesTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type LogoutDelivery = Selectable<LogoutDeliveriesTable>;

/** A new delivery, claimed by its first attempt until `leaseUntil` (the retry job leaves it alone till then). */
export async function insertLogoutDelivery(
  db: Q,
  row: { client_id: string; sub: string; sid: string | null; created_at: number },
  leaseUntil: number,
): Promise<LogoutDelivery> {
  return db
    .insertInto('logout_deliveries')
    .values({ ...row, attempts: 0, next_attempt_at: leaseUntil })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Takes a delivery for one attempt: moves its next attempt to `leaseUntil` with a conditional
 * update, so of several instances running the retry job exactly one attempts it.
 */
export async function claimLogoutDelivery(
  db: Q,
  delivery: Pick<LogoutDelivery, 'id' | 'next_attempt_at'>,
  leaseUntil: number,
): Promise<boolean> {
  if (delivery.next_attempt_at === null) return false;
  const r = await db
    .updateTable('logout_deliveries')
    .set({ next_attempt_at: leaseUntil })
    .where('id', '=', delivery.id)
    .where('next_attempt_at', '=', delivery.next_attempt_at)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/**
 * The outcome of one attempt; nextAttemptAt null: delivered, or no more attempts. Written only
 * while the attempt still holds its lease (`lease`, the claimed next_attempt_at), so an attempt
 * that outlived its lease cannot overwrite the outcome of the one that took over.
 */
export async function recordLogoutAttempt(
  db: Q,
  id: number,
  lease: number,
  outcome: {
    at: number;
    attempts: number;
    status: number | null;
    error: string | null;
    delivered: boolean;
    nextAttemptAt: number | null;
  },
): Promise<void> {
  await db
    .updateTable('logout_deliveries')
    .set({
      attempts: outcome.attempts,
      last_attempt_at: outcome.at,
      status: outcome.status,
      error: outcome.error,
      delivered_at: outcome.delivered ? outcome.at : null,
      next_attempt_at: outcome.nextAttemptAt,
    })
    .where('id', '=', id)
    .where('next_attempt_at', '=', lease)
    .execute();
}

export function dueLogoutDeliveries(db: Q, now: number, limit: number): Promise<LogoutDelivery[]> {
  return db
    .selectFrom('logout_deliveries')
    .selectAll()
    .where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at')
    .limit(limit)
    .execute();
}

export function listLogoutDeliveries(db: Q, clientId: string): Promise<LogoutDelivery[]> {
  return db.selectFrom('logout_deliveries').selectAll().where('client_id', '=', clientId).orderBy('id').execute();
}

/** Finished deliveries (delivered or given up) older than `before`. */
export async function deleteFinishedLogoutDeliveries(db: Q, before: number): Promise<number> {
  const r = await db
    .deleteFrom('logout_deliveries')
    .where('next_attempt_at', 'is', null)
    .where('created_at', '<', before)
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}
