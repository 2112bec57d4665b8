// The PostgreSQL side of the store: the pg driver's pool, its dialect for Kysely and the connection
// that listens for invalidations. Loaded by openStore only when DATABASE_URL is a postgres:// URL.
import { PostgresDialect } from 'kysely';
import pg from 'pg';
import { namePreparedStatements } from './prepared.ts';

// int8 (bigint) columns hold ids and epoch-millisecond timestamps, all well below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));

/**
 * The server may close a connection at any time (restart, failover, pg_terminate_backend, a proxy that
 * drops it, DROP DATABASE ... WITH (FORCE)). The pg client then emits 'error', which without a
 * listener is an uncaught exception that ends the process. An idle pooled connection's error reaches
 * the pool's 'error' event; a connection lent out (a query or transaction under way, or between two
 * of a transaction's statements) has no listener of the pool's, so each connection gets its own. Its
 * query, if any, fails with the error (answered as 503, src/store/database-errors.ts), and the pool
 * discards a connection that has failed once it is given back, opening a new one when needed. Each
 * new connection runs the prepared queries as named statements (src/store/prepared.ts).
 */
export function connectionPool(databaseUrl: string, max: number, timeouts?: DatabaseTimeouts): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    ...(timeouts && {
      // opening a connection, and waiting for a free one of the pool, end after this long
      connectionTimeoutMillis: timeouts.connectMs,
      // the server cancels a statement that runs longer (SQLSTATE 57014)
      statement_timeout: timeouts.statementMs,
      // a server that stops answering altogether (stopped, partitioned) cannot cancel anything:
      // the client gives up a little after the server would have
      query_timeout: timeouts.statementMs + QUERY_TIMEOUT_MARGIN_MS,
      keepAlive: true,
    }),
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    client.on('error', () => {});
    namePreparedStatements(client);
    if (timeouts) closeOnReadTimeout(client);
  });
  return pool;
}

/** How much longer than the statement timeout the client waits for an answer before it gives up. */
const QUERY_TIMEOUT_MARGIN_MS = 2000;

export interface DatabaseTimeouts {
  connectMs: number;
  statementMs: number;
}

/**
 * pg answers a query past its query_timeout with the error "Query read timeout", but leaves the
 * connection waiting for the server's answer: every later query on it waits behind, and the pool,
 * which sees a connection still queryable, lends it out again (brianc/node-postgres#3399). Such a
 * connection is closed here, so the pool discards it when it is given back and opens a new one.
 */
function closeOnReadTimeout(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const result = query(...args);
    if (result instanceof Promise)
      result.catch((err: unknown) => {
        if ((err as Error)?.message === READ_TIMEOUT) (client as unknown as PgInternals).connection?.stream?.destroy();
      });
    return result;
  };
}

const READ_TIMEOUT = 'Query read timeout';

interface PgInternals {
  connection?: { stream?: { destroy(): void } };
}

export function postgresDialect(pool: pg.Pool): PostgresDialect {
  return new PostgresDialect({ pool });
}

/** The PostgreSQL connection that LISTENs for invalidations, named so operators can tell it apart. */
export function listenerConnection(databaseUrl: string): pg.Client {
  return new pg.Client({
    connectionString: databaseUrl,
    application_name: 'idp-invalidations',
    keepAlive: true,
    query_timeout: 3000,
  });
}
