// Fixed-window counters shared by every instance through the database.
import { sql, type Kysely } from 'kysely';
import type { DB } from './schema.ts';
import { prepare } from './prepared.ts';

// every sign-in attempt and passkey challenge counts: prepared
const hitPrepared = prepare<{ key: string; windowStart: number }, { count: number }>((db, p) =>
  db
    .insertInto('rate_limits')
    .values({ key: p.key, window_start: p.windowStart, count: 1 })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        count: sql<number>`case when rate_limits.window_start = ${p.windowStart} then rate_limits.count + 1 else 1 end`,
        window_start: p.windowStart,
      }),
    )
    .returning('count'),
);

/** Adds one to the counter of key in the window starting at windowStart; returns the new count. */
export async function hit(db: Kysely<DB>, key: string, windowStart: number): Promise<number> {
  const [row] = await hitPrepared(db, { key, windowStart });
  return Number(row!.count);
}

/**
 * Adds one to the counter refundKey in the window starting at windowStart while it stays below the
 * counter eventKey in that window: one statement, so refunds running at once can never take back
 * more events than were counted, and a refund costs one round trip.
 */
export async function refund(db: Kysely<DB>, eventKey: string, refundKey: string, windowStart: number): Promise<void> {
  const start = sql`cast(${windowStart} as bigint)`;
  await sql`insert into rate_limits (key, window_start, count)
    select cast(${refundKey} as text), ${start}, 1 from rate_limits as e
    where e.key = ${eventKey} and e.window_start = ${start} and e.count > 0
    on conflict (key) do update set
      count = case when rate_limits.window_start = ${start} then rate_limits.count + 1 else 1 end,
      window_start = ${start}
    where rate_limits.window_start <> ${start}
      or rate_limits.count < (select events.count from rate_limits as events where events.key = ${eventKey})`.execute(
    db,
  );
}

export async function peek(db: Kysely<DB>, key: string, windowStart: number): Promise<number> {
  const row = await db
    .selectFrom('rate_limits')
    .select(['count', 'window_start'])
    .where('key', '=', key)
    .executeTakeFirst();
  return row && row.window_start === windowStart ? row.count : 0;
}

export async function reset(db: Kysely<DB>, key: string): Promise<void> {
  await db.deleteFrom('rate_limits').where('key', '=', key).execute();
}

export async function deleteOlderThan(db: Kysely<DB>, windowStart: number): Promise<void> {
  await db.deleteFrom('rate_limits').where('window_start', '<', windowStart).execute();
}
