// Fixed-window counters shared by every instance through the database.
import { sql, type Kysely } from 'kysely';
import type { DB } from './schema.ts';

/** Adds one to the counter of key in the window starting at windowStart; returns the new count. */
export async function hit(db: Kysely<DB>, key: string, windowStart: number): Promise<number> {
  const row = await db
    .insertInto('rate_limits')
    .values({ key, window_start: windowStart, count: 1 })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({
        count: sql`case when rate_limits.window_start = ${windowStart} then rate_limits.count + 1 else 1 end`,
        window_start: windowStart,
      }),
    )
    .returning('count')
    .executeTakeFirstOrThrow();
  return row.count;
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
