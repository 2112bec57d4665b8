// What a driver's error says about the database: whether it could not be used for the moment (and a
// request may succeed if sent again) as opposed to a fault of the query or of the data.

/** SQLite's primary result codes SQLITE_BUSY and SQLITE_LOCKED (node:sqlite gives extended codes). */
const SQLITE_BUSY = 5;
const SQLITE_LOCKED = 6;
/** SQLITE_FULL: the disk (or the file system's quota) is full. */
const SQLITE_FULL = 13;

/** PostgreSQL SQLSTATEs of a server that closed or refuses connections: class 08 (connection
 * exception), admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections; and of a
 * statement cancelled by the statement timeout (query_canceled). */
const PG_UNAVAILABLE = /^(08...|57P01|57P02|57P03|53300|57014)$/;

/** PostgreSQL's disk_full and out_of_memory. */
const PG_FULL = /^(53100|53200)$/;

/** pg's own errors for a connection that was lost, or that the pool could not open in time. */
const PG_CONNECTION_LOST =
  /^(Connection terminated( unexpectedly)?|Client has encountered a connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|Connection terminated due to connection timeout|Query read timeout)$/;

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

/**
 * True when err is a statement that ran out of time: PostgreSQL's query_canceled (57014, the
 * server's statement_timeout, DATABASE_STATEMENT_TIMEOUT_MS) or pg's own read timeout for a server
 * that did not answer at all. isDatabaseUnavailable() is true for both: the same 503.
 */
export function isStatementTimeout(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown };
  return e.code === '57014' || e.message === 'Query read timeout';
}

/**
 * True when err says the database has no room for a write: SQLite's SQLITE_FULL (a full disk or file
 * system; the transaction is rolled back and the database stays consistent), or PostgreSQL's
 * disk_full. Reads go on; writes succeed again once there is room, without a restart.
 */
export function isDatabaseFull(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; errcode?: unknown };
  if (e.code === 'ERR_SQLITE_ERROR' && typeof e.errcode === 'number') return (e.errcode & 0xff) === SQLITE_FULL;
  return typeof e.code === 'string' && PG_FULL.test(e.code);
}
