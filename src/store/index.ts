// Opens the database named by DATABASE_URL and runs migrations.
import { Kysely, sql, type LogEvent, type Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { SqliteLimitsInText, sqliteDialect } from './sqlite.ts';
import { migrate } from './migrations.ts';
import { Invalidations, publishedBy, startReceiver, type Receiver } from './invalidation.ts';

export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<DB>;
  dialect: Dialect;
  /** true when the database answers a trivial query */
  ping(): Promise<boolean>;
  close(): Promise<void>;
  // Optional like the metrics below, for a store wrapped around another Kysely instance; without
  // them nothing is cached that a change elsewhere could make stale.
  /** what caches must drop (src/store/invalidation.ts); changes made through this store arrive at once */
  invalidations?: Invalidations;
  /** starts receiving other processes' invalidations; the last stop() of several ends it */
  receiveInvalidations?(onError?: (err: unknown) => void): Promise<Receiver>;
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
  /** PostgreSQL: how long opening (or waiting for) a connection and a statement may take; none: unbounded */
  timeouts?: { connectMs: number; statementMs: number };
}

/** How long the readiness probe waits for the database's answer. */
const PING_TIMEOUT_MS = 2000;

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

/** One receiver per store however many apps share it; it stops with the last of them. */
function sharedReceiver(start: (onError: (err: unknown) => void) => Promise<Receiver>) {
  let running: Promise<Receiver> | undefined;
  let users = 0;
  let onErrors: ((err: unknown) => void)[] = [];
  return async (onError?: (err: unknown) => void): Promise<Receiver> => {
    users++;
    if (onError) onErrors.push(onError);
    running ??= start((err) => {
      for (const report of onErrors) report(err);
    });
    const receiver = await running;
    let stopped = false;
    return {
      async stop() {
        if (stopped) return;
        stopped = true;
        if (onError) onErrors = onErrors.filter((f) => f !== onError);
        if (--users > 0) return;
        running = undefined;
        await receiver.stop();
      },
    };
  };
}

export async function openStore(databaseUrl: string, options: StoreOptions = {}): Promise<Store> {
  const dialect: Dialect = /^postgres(ql)?:\/\//.test(databaseUrl) ? 'postgres' : 'sqlite';
  // The PostgreSQL driver is loaded only for PostgreSQL: a SQLite service starts without it.
  const postgres = dialect === 'postgres' ? await import('./postgres.ts') : undefined;
  const pool = postgres?.connectionPool(databaseUrl, options.poolSize ?? 10, options.timeouts);
  const listeners = new Set<(query: QueryTiming) => void>();
  const invalidations = new Invalidations();
  const db = new Kysely<DB>({
    dialect: postgres && pool ? postgres.postgresDialect(pool) : sqliteDialect(databaseUrl),
    plugins: pool ? [] : [new SqliteLimitsInText()],
    log: (event) => {
      // A change this process made takes effect here before its publishing statement returns.
      const published = event.level === 'query' && publishedBy(event.query.sql, event.query.parameters);
      if (published !== false && published !== undefined) invalidations.deliver(published);
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
    if (options.migrate !== false)
      await migrateUnbounded(
        db,
        dialect,
        postgres &&
          (() => new Kysely<DB>({ dialect: postgres.postgresDialect(postgres.connectionPool(databaseUrl, 1)) })),
      );
  } catch (err) {
    await db.destroy();
    throw err;
  }
  const receiving = sharedReceiver((onError) =>
    startReceiver({
      db,
      bus: invalidations,
      onError,
      ...(postgres ? { connect: () => postgres.listenerConnection(databaseUrl) } : {}),
    }),
  );
  return {
    db,
    dialect,
    invalidations,
    receiveInvalidations: (onError) => receiving(onError),
    async ping() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS)));
      try {
        return await Promise.race([sql`select 1`.execute(db).then(() => true), late]);
      } catch {
        return false;
      } finally {
        clearTimeout(timer);
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

/**
 * Runs the migrations. On PostgreSQL they run on a connection of their own without the statement
 * timeouts: building an index on a large table may take longer than any request should.
 */
async function migrateUnbounded(db: Kysely<DB>, dialect: Dialect, unbounded?: () => Kysely<DB>): Promise<void> {
  if (!unbounded) {
    await migrate(db, dialect);
    return;
  }
  const own = unbounded();
  try {
    await migrate(own, dialect);
  } finally {
    await own.destroy();
  }
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

/**
 * Runs a change in a transaction of its own, or in the caller's when `db` is one already: a batch
 * of changes (an LDAP sync's page) runs each change in a savepoint of one transaction.
 */
export function transact<T>(db: Kysely<DB>, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db as Transaction<DB>) : db.transaction().execute(work);
}
