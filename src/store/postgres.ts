// The PostgreSQL side of the store: the pg driver's pool, its dialect for Kysely and the connection
// that listens for invalidations. Loaded by openStore only when DATABASE_URL is a postgres:// URL.
import { PostgresDialect } from 'kysely';
import pg from 'pg';
import { namePreparedStatements } from './prepared.ts';

// int8 (bigint) columns hold ids and epoch-millisecond timestamps, all well below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));

/**
 * The server may close an idle pooled connection at any time (restart, failover, pg_terminate_backend,
 * DROP DATABASE ... WITH (FORCE)). pg.Pool then emits 'error', which without a listener is an uncaught
 * exception that ends the process; the pool has already discarded the connection and opens a new one
 * when needed, so there is nothing else to do. Each new connection runs the prepared queries as named
 * statements (src/store/prepared.ts).
 */
export function connectionPool(databaseUrl: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: databaseUrl, max });
  pool.on('error', () => {});
  pool.on('connect', namePreparedStatements);
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
