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
export function connectionPool(databaseUrl: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max });
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    client.on('error', () => {});
    namePreparedStatements(client);
  });
  return pool;
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
