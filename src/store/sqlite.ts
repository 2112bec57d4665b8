// Kysely's SqliteDialect over the built-in node:sqlite driver (no native addon to compile).
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
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

// The file's directory must exist: it is checked at start-up (checkStorage), never created here,
// so a mistyped path is an error instead of a new, empty database somewhere else.
export function openSqlite(path: string): DatabaseSync {
  const db = new DatabaseSync(path, { timeout: 5000 });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA foreign_keys = ON');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA busy_timeout = 5000');
  return db;
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
 * Every transaction takes the write lock when it begins (BEGIN IMMEDIATE), waiting for it up to the
 * busy timeout. A deferred transaction (SQLite's default) that reads and then writes cannot wait:
 * when another process (the admin CLI, another instance) has committed since its read began, its
 * first write fails at once with SQLITE_BUSY whatever the busy timeout. Within one process the
 * transactions already take turns on the single connection, so this changes nothing there.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
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
  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
  override createAdapter(): DialectAdapter {
    return new TransactionalDdlSqliteAdapter();
  }
}

export function sqliteDialect(path: string): SqliteDialect {
  return new ServiceSqliteDialect({ database: adapt(openSqlite(path)) });
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
