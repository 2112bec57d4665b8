// Kysely's SqliteDialect over the built-in node:sqlite driver (no native addon to compile).
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CompiledQuery,
  LimitNode,
  OffsetNode,
  OperationNodeTransformer,
  SqliteAdapter,
  SqliteDialect,
  SqliteDriver,
  ValueNode,
  type KyselyPlugin,
  type DatabaseConnection,
  type DialectAdapter,
  type Driver,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type SqliteDatabase,
  type SqliteDialectConfig,
  type SqliteStatement,
  type UnknownRow,
} from 'kysely';
import { isPreparedMarker, isWholeNumber } from './prepared.ts';

function bind(parameters: ReadonlyArray<unknown>): SQLInputValue[] {
  return parameters.map((p) => {
    if (typeof p === 'boolean') return p ? 1 : 0;
    if (p === undefined) return null;
    return p as SQLInputValue;
  });
}

/**
 * How long a statement waits for another process's lock inside SQLite's busy handler. node:sqlite is
 * synchronous, so that wait stops the whole process; it is kept short, long enough for the admin
 * CLI's one-change transactions. Longer waits are asynchronous (ImmediateSqliteDriver, below).
 */
export const SQLITE_BUSY_TIMEOUT_MS = 100;

/** How long a statement keeps trying to get a lock another process holds before the busy error
 * is thrown (a 503 with Retry-After, src/store/database-errors.ts). */
export const SQLITE_LOCK_WAIT_MS = 5000;

/** The pauses between those tries: the first, doubling up to the last. */
const LOCK_RETRY_FIRST_MS = 5;
const LOCK_RETRY_MAX_MS = 100;

// The file's directory must exist: it is checked at start-up (checkStorage), never created here,
// so a mistyped path is an error instead of a new, empty database somewhere else.
export function openSqlite(path: string): DatabaseSync {
  const db = new DatabaseSync(path, { timeout: SQLITE_BUSY_TIMEOUT_MS });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA synchronous = NORMAL');
  return db;
}

/** SQLITE_BUSY, with any extended code: another connection holds the lock. */
function isBusy(err: unknown): boolean {
  const e = err as { code?: unknown; errcode?: unknown };
  return e?.code === 'ERR_SQLITE_ERROR' && typeof e.errcode === 'number' && (e.errcode & 0xff) === 5;
}

/** Kysely's mutex for the single connection, with the same behaviour. */
class ConnectionMutex {
  #held: Promise<void> | undefined;
  #release: (() => void) | undefined;
  async lock(): Promise<void> {
    while (this.#held) await this.#held;
    this.#held = new Promise((resolve) => (this.#release = resolve));
  }
  unlock(): void {
    const release = this.#release;
    this.#held = undefined;
    this.#release = undefined;
    release?.();
  }
}

// Kysely prepares every query anew; preparing is a large share of a small query's cost, so
// statements are kept per SQL text (bounded: query shapes are few, values are parameters).
const STATEMENT_CACHE_SIZE = 500;

/**
 * Turns a statement's rows, read as arrays, into plain objects keyed by column name. node:sqlite's
 * own row objects have no prototype, which makes V8 keep them as hash tables: building them and
 * reading their fields cost more than reading the values by position and setting them on ordinary
 * objects, which all share one shape. A later column of the same name wins, as in the driver's
 * objects. Undefined when a column name would not be an ordinary property (`__proto__`): the
 * driver's objects are used then.
 */
function rowBuilder(names: readonly string[]): ((values: readonly unknown[]) => UnknownRow) | undefined {
  if (names.includes('__proto__')) return undefined;
  return (values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < names.length; i++) row[names[i]!] = values[i];
    return row;
  };
}

function adapt(db: DatabaseSync): SqliteDatabase {
  const cache = new Map<string, SqliteStatement>();
  return {
    close: () => {
      cache.clear();
      db.close();
    },
    prepare(sql: string): SqliteStatement {
      const cached = cache.get(sql);
      if (cached) return cached;
      const stmt = db.prepare(sql);
      const columns = stmt.columns();
      const build = columns.length > 0 ? rowBuilder(columns.map((c) => c.name)) : undefined;
      if (build) stmt.setReturnArrays(true);
      const adapted: SqliteStatement = {
        reader: columns.length > 0,
        all: build
          ? (parameters) => (stmt.all(...bind(parameters)) as unknown as unknown[][]).map(build)
          : (parameters) => stmt.all(...bind(parameters)),
        run: (parameters) => {
          const r = stmt.run(...bind(parameters));
          return { changes: r.changes, lastInsertRowid: r.lastInsertRowid };
        },
        iterate: build
          ? function* (parameters) {
              for (const values of stmt.iterate(...bind(parameters))) yield build(values as unknown as unknown[]);
            }
          : (parameters) => stmt.iterate(...bind(parameters)),
      };
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      cache.set(sql, adapted);
      return adapted;
    },
  };
}

/**
 * Every transaction takes the write lock when it begins (BEGIN IMMEDIATE). A deferred transaction
 * (SQLite's default) that reads and then writes cannot wait: when another process (the admin CLI,
 * another instance) has committed since its read began, its first write fails at once with
 * SQLITE_BUSY whatever the busy timeout. Within one process the transactions already take turns on
 * the single connection, so this changes nothing there.
 *
 * A statement outside a transaction (BEGIN IMMEDIATE itself, or an autocommit write) that finds the
 * file locked by another process (past the short busy timeout) is tried again after a pause, until
 * SQLITE_LOCK_WAIT_MS have passed: the wait is on a timer, so the process goes on serving, and the
 * connection is left to the process's other queries meanwhile (reads do not need the lock in WAL
 * mode). Only statements outside a transaction are tried again: one that failed changed nothing,
 * and the connection holds no transaction another query could step into. Once BEGIN IMMEDIATE has
 * succeeded the transaction holds the lock and its statements do not wait for it.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  readonly #db: DatabaseSync;
  readonly #mutex = new ConnectionMutex();
  /** statements now waiting on a timer for another process's lock */
  #waiting = 0;
  #connection: DatabaseConnection | undefined;

  constructor(config: SqliteDialectConfig, db: DatabaseSync) {
    super(config);
    this.#db = db;
  }

  override async init(): Promise<void> {
    await super.init();
    // Kysely's connection, taken once and kept: this driver's own mutex hands it out instead
    const inner = await super.acquireConnection();
    this.#connection = {
      executeQuery: (query) => this.#execute(inner, query),
      streamQuery: (query, chunkSize) => inner.streamQuery(query, chunkSize),
    };
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock();
    return this.#connection!;
  }

  override async releaseConnection(): Promise<void> {
    this.#mutex.unlock();
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  /**
   * SQLite itself rolls a transaction back on some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM,
   * SQLITE_BUSY in some cases); a ROLLBACK then fails with "no transaction is active" and would take
   * the place of the error that says what happened. Nothing is left to undo then.
   */
  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.#db.isTransaction) await super.rollbackTransaction(connection);
  }

  /** Runs query on the connection, which the caller holds; holds it again when this settles. */
  async #execute<R>(inner: DatabaseConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    const giveUp = performance.now() + SQLITE_LOCK_WAIT_MS;
    let pause = LOCK_RETRY_FIRST_MS;
    // The first try may wait in SQLite's busy handler, unless a statement already waits on a timer:
    // the file is locked then, and statements queued behind each other would stop the process for
    // the busy timeout each.
    let waitInHandler = this.#waiting === 0;
    let waiting = false;
    try {
      for (;;) {
        try {
          return await (waitInHandler ? inner.executeQuery<R>(query) : this.#withoutBusyHandler<R>(inner, query));
        } catch (err) {
          if (!isBusy(err) || this.#db.isTransaction || performance.now() >= giveUp) throw err;
        }
        if (!waiting) this.#waiting++;
        waiting = true;
        waitInHandler = false;
        this.#mutex.unlock();
        await sleep(Math.min(pause, Math.max(0, giveUp - performance.now())));
        await this.#mutex.lock();
        pause = Math.min(pause * 2, LOCK_RETRY_MAX_MS);
      }
    } finally {
      if (waiting) this.#waiting--;
    }
  }

  /** One try that fails at once if the file is locked: the pauses between tries do the waiting. */
  #withoutBusyHandler<R>(inner: DatabaseConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    this.#db.exec('PRAGMA busy_timeout = 0');
    try {
      // node:sqlite runs the statement before executeQuery returns
      return inner.executeQuery<R>(query);
    } finally {
      this.#db.exec(`PRAGMA busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`);
    }
  }
}

/** SQLite's DDL is transactional: Kysely's Migrator then runs the migrations in a transaction, as on
 * PostgreSQL, so a run that stops part-way (a crash, kill -9) leaves the schema as it was before. */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

class ServiceSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  readonly #db: DatabaseSync;
  constructor(db: DatabaseSync) {
    const config = { database: adapt(db) };
    super(config);
    this.#config = config;
    this.#db = db;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config, this.#db);
  }
  override createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

export function sqliteDialect(path: string): SqliteDialect {
  return new ServiceSqliteDialect(openSqlite(path));
}

/** A LIMIT or OFFSET value written into the SQL text: a whole number, or a prepared query's marker
 * (src/store/prepared.ts puts the number there when the query runs). */
function inline(node: OperationNode): OperationNode {
  if (!ValueNode.is(node)) return node;
  const { value } = node;
  return isWholeNumber(value) || isPreparedMarker(value) ? ValueNode.createImmediate(value) : node;
}

class LimitsInText extends OperationNodeTransformer {
  protected override transformLimit(node: LimitNode): LimitNode {
    return LimitNode.create(inline(node.limit));
  }
  protected override transformOffset(node: OffsetNode): OffsetNode {
    return OffsetNode.create(inline(node.offset));
  }
}

/**
 * SQLite plans a query with its LIMIT: a statement whose LIMIT (or OFFSET) is a bound parameter is
 * compiled again every time it runs with a value bound, which costs more than running a small
 * indexed query. With this plugin a LIMIT or OFFSET is part of the SQL text, so the statement kept
 * for that text (above) runs as it was compiled. Only whole numbers are written into the text.
 */
export class SqliteLimitsInText implements KyselyPlugin {
  readonly #transformer = new LimitsInText();
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return this.#transformer.transformNode(args.node);
  }
  transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(args.result);
  }
}
