// Opens the database named by DATABASE_URL and runs migrations.
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { DB } from './schema.ts';
import { sqliteDialect } from './sqlite.ts';
import { migrate } from './migrations.ts';

// int8 (bigint) columns hold ids and epoch-millisecond timestamps, all well below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));

export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<DB>;
  dialect: Dialect;
  /** true when the database answers a trivial query */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface StoreOptions {
  poolSize?: number;
  migrate?: boolean;
}

/**
 * The server may close an idle pooled connection at any time (restart, failover, pg_terminate_backend,
 * DROP DATABASE ... WITH (FORCE)). pg.Pool then emits 'error', which without a listener is an uncaught
 * exception that ends the process; the pool has already discarded the connection and opens a new one
 * when needed, so there is nothing else to do.
 */
function withIdleErrorsHandled(pool: pg.Pool): pg.Pool {
  pool.on('error', () => {});
  return pool;
}

export async function openStore(databaseUrl: string, options: StoreOptions = {}): Promise<Store> {
  const dialect: Dialect = /^postgres(ql)?:\/\//.test(databaseUrl) ? 'postgres' : 'sqlite';
  const db = new Kysely<DB>({
    dialect:
      dialect === 'postgres'
        ? new PostgresDialect({
            pool: withIdleErrorsHandled(new pg.Pool({ connectionString: databaseUrl, max: options.poolSize ?? 10 })),
          })
        : sqliteDialect(databaseUrl),
  });
  try {
    if (options.migrate !== false) await migrate(db, dialect);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return {
    db,
    dialect,
    async ping() {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    close: () => db.destroy(),
  };
}

/** Uint8Array from either driver (node:sqlite gives Uint8Array, pg gives Buffer) as a Buffer. */
export function bytes(value: Uint8Array): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

/** True when err is a unique-constraint violation in either dialect. */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errcode?: number; message?: string };
  return e?.code === '23505' || /UNIQUE constraint failed/.test(e?.message ?? '');
}
