import { sql, type Kysely, type Migration } from 'kysely';

/**
 * The outbox's due deliveries found in id order among the pending ones only. The claim takes the
 * oldest due deliveries (claimDueDeliveries); through (state, next_attempt_at) it read and sorted
 * every pending delivery to take 50, which with 100,000 invitations queued cost 60 ms a claim on
 * SQLite. Pending deliveries are few once sent, so this index stays small. The claim of the release
 * before this one finds its deliveries through this index as well.
 */
export function migration035(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`create index event_deliveries_pending on event_deliveries(id) where state = 'pending'`.execute(db);
      await sql`drop index event_deliveries_due`.execute(db);
    },
  };
}
