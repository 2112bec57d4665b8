// What a driver's error says about the database: whether it could not be used for the moment (and a
// request may succeed if sent again) as opposed to a fault of the query or of the data.

/** SQLite's primary result codes SQLITE_BUSY and SQLITE_LOCKED (node:sqlite gives extended codes). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;

/** PostgreSQL SQLSTATEs of a server that closed or refuses connections: class 08 (connection
 * exception), admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections. */
const PG_UNAVAILABLE = /^(08...|57P01|57P02|57P03|53300)$/;

/** pg's own errors for a connection that was lost, or that the pool could not open in time. */
const PG_CONNECTION_LOST =
  /^(Connection terminated( unexpectedly)?|Client has encountered a connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|Connection terminated due to connection timeout)$/;

/** The socket errors of a connection to the database server that failed or broke. */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * True when err says the database is unavailable for now: SQLite still locked by another process
 * when the busy timeout ran out, or a PostgreSQL connection refused, closed by the server (restart,
 * failover, pg_terminate_backend) or dropped on the way. The HTTP error handler answers 503 with
 * Retry-After for these (src/http/errors.ts).
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; errcode?: unknown; message?: unknown };
  if (e.code === 'ERR_SQLITE_ERROR' && typeof e.errcode === 'number') {
    const primary = e.errcode & 0xff;
    return primary === SQLITE_BUSY || primary === SQLITE_LOCKED;
  }
  if (typeof e.code === 'string' && (PG_UNAVAILABLE.test(e.code) || SOCKET_ERRORS.has(e.code))) return true;
  return typeof e.message === 'string' && PG_CONNECTION_LOST.test(e.message);
}
