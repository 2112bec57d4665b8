// Prepared queries for per-request paths (the authorization server's artifact and client lookups,
// userinfo's claims on a cache miss, the passkey API's lookups). Kysely builds and
// compiles a query anew on every call, which costs more than running a small indexed query. A
// prepared query is built once per dialect with a marker in place of each argument, compiled, and
// from then on run as that SQL text with the arguments put where the markers were: still written
// with the query builder, still typed by it; SQLite reuses the statement (src/store/sqlite.ts) and
// PostgreSQL runs it as a named prepared statement.
import { CompiledQuery, type Compilable, type Kysely, type Transaction } from 'kysely';
import type { PoolClient } from 'pg';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** PostgreSQL statement names of the prepared queries' SQL texts (see namePreparedStatements). */
const statementNames = new Map<string, string>();

/**
 * On PostgreSQL, a prepared query runs as a named statement: each connection parses and plans it
 * once, then only binds and executes it. Applied to every connection of the pool as it opens; any
 * other SQL goes through unchanged.
 */
export function namePreparedStatements(client: PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const [text, values, callback] = args;
    const name = typeof text === 'string' ? statementNames.get(text) : undefined;
    return name === undefined ? query(...args) : query({ name, text, values }, callback);
  };
}

/** What the builder sees instead of the arguments: typed as the arguments (so the builder checks
 * them against the columns), at run time a marker string for each. */
type Markers<Args> = Readonly<Args>;

interface Compiled {
  sql: string;
  /** for each parameter of the compiled query: the name of the argument it is, or a constant */
  parameters: ({ arg: string } | { constant: unknown })[];
  /** arguments the dialect writes into the text (SQLite's LIMIT and OFFSET, src/store/sqlite.ts):
   * the text around them, and their names in order */
  inText?: { parts: string[]; args: string[] };
}

const MARKER = /^\u0000prepared:[^\u0000']+\u0000$/;
const MARKER_IN_TEXT = /'\u0000prepared:([^\u0000']+)\u0000'/g;

/** Whether a value can be written into SQL text as a LIMIT or OFFSET: a safe integer >= 0. */
export function isWholeNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Whether a value is the marker a prepared query's builder sees in place of an argument. */
export function isPreparedMarker(value: unknown): value is string {
  return typeof value === 'string' && MARKER.test(value);
}

function inText(sql: string): Compiled['inText'] {
  const pieces = sql.split(MARKER_IN_TEXT);
  if (pieces.length === 1) return undefined;
  // split() puts each captured name between the text around it
  return { parts: pieces.filter((_, i) => i % 2 === 0), args: pieces.filter((_, i) => i % 2 === 1) };
}

function textWith(t: NonNullable<Compiled['inText']>, args: Record<string, unknown>): string {
  let text = t.parts[0]!;
  for (let i = 0; i < t.args.length; i++) {
    const value = args[t.args[i]!];
    if (!isWholeNumber(value)) throw new TypeError(`prepared query: ${t.args[i]} must be a whole number`);
    text += String(value) + t.parts[i + 1]!;
  }
  return text;
}

/**
 * `prepare((db, p) => db.selectFrom(...).where('x', '=', p.x).select(...))` returns a function
 * running that query with the given arguments, compiled once per dialect. Every argument must be
 * used as a value (not as an identifier, a limit expression computed in JavaScript, or a list).
 */
export function prepare<Args extends Record<string, unknown>, Row>(
  build: (db: Q, p: Markers<Args>) => Compilable<Row>,
): (db: Q, args: Args) => Promise<Row[]> {
  const byDialect = new Map<unknown, Compiled>();
  const markers = new Map<string, string>();
  const p = new Proxy({} as Markers<Args>, {
    get(_target, name) {
      if (typeof name !== 'string') return undefined;
      let marker = markers.get(name);
      if (!marker) markers.set(name, (marker = `\u0000prepared:${name}\u0000`));
      return marker;
    },
  });
  const compiled = (db: Q): Compiled => {
    const adapter = db.getExecutor().adapter.constructor;
    let c = byDialect.get(adapter);
    if (!c) {
      const query = build(db, p).compile();
      const names = new Map([...markers].map(([name, marker]) => [marker, name]));
      c = {
        sql: query.sql,
        parameters: query.parameters.map((value) => {
          const arg = typeof value === 'string' ? names.get(value) : undefined;
          return arg === undefined ? { constant: value } : { arg };
        }),
        inText: inText(query.sql),
      };
      byDialect.set(adapter, c);
      if (!statementNames.has(c.sql)) statementNames.set(c.sql, `idp_prepared_${statementNames.size + 1}`);
    }
    return c;
  };
  return async (db, args) => {
    const c = compiled(db);
    const values = c.parameters.map((x) => ('arg' in x ? args[x.arg] : x.constant));
    const text = c.inText ? textWith(c.inText, args) : c.sql;
    const result = await db.executeQuery<Row>(CompiledQuery.raw(text, values));
    return result.rows;
  };
}
