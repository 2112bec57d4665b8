// Opens the database named by DATABASE_URL and runs migrations.
import { Kysely, PostgresDialect, sql, type LogEvent } from 'kysely';
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
  // For metrics; optional so a store wrapped around another Kysely instance may leave them out.
  /** calls listener after every query; returns the function that stops it */
  onQuery?(listener: (query: QueryTiming) => void): () => void;
  /** the connection pool's state; undefined for SQLite, which has a single connection */
  pool?(): PoolState | undefined;
}

/** A statement's kind (never its text, which would be unbounded as a metric label) and duration. */
export interface QueryTiming {
  kind: 'select' | 'insert' | 'update' | 'delete' | 'other';
  seconds: number;
  failed: boolean;
}

export interface PoolState {
  /** open connections, busy or idle */
  total: number;
  idle: number;
  /** queries waiting for a connection */
  waiting: number;
  max: number;
}

export interface StoreOptions {
  poolSize?: number;
  migrate?: boolean;
}

const STATEMENT_KINDS: Record<string, QueryTiming['kind']> = {
  SelectQueryNode: 'select',
  InsertQueryNode: 'insert',
  UpdateQueryNode: 'update',
  DeleteQueryNode: 'delete',
};

const VERBS = new Set<string>(['select', 'insert', 'update', 'delete']);

function statementKind(event: LogEvent): QueryTiming['kind'] {
  const fromBuilder = STATEMENT_KINDS[event.query.query.kind];
  if (fromBuilder) return fromBuilder;
  const verb = /^\s*(\w+)/.exec(event.query.sql)?.[1]?.toLowerCase() ?? '';
  return VERBS.has(verb) ? (verb as QueryTiming['kind']) : 'other';
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
  const pool =
    dialect === 'postgres'
      ? withIdleErrorsHandled(new pg.Pool({ connectionString: databaseUrl, max: options.poolSize ?? 10 }))
      : undefined;
  const listeners = new Set<(query: QueryTiming) => void>();
  const db = new Kysely<DB>({
    dialect: pool ? new PostgresDialect({ pool }) : sqliteDialect(databaseUrl),
    log: (event) => {
      if (listeners.size === 0) return;
      const timing = {
        kind: statementKind(event),
        seconds: event.queryDurationMillis / 1000,
        failed: event.level === 'error',
      };
      for (const listener of listeners) listener(timing);
    },
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
    onQuery(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    pool: () =>
      pool && { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max },
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
