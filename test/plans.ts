// Query plans for the tests that pin one: the statements a store function sends, caught as it
// sends them, and the database's plan of each.
import type { SQLInputValue } from 'node:sqlite';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import type { Dialect } from '../src/store/index.ts';
import { openSqlite, SqliteLimitsInText, sqliteDialect } from '../src/store/sqlite.ts';
import type { DB } from '../src/store/schema.ts';

export interface Statement {
  sql: string;
  parameters: readonly unknown[];
}

/** The statements `run` sends, as the store's queries send them, on a connection of the test's own. */
export async function statementsOf(
  dialect: Dialect,
  url: string,
  run: (db: Kysely<DB>) => Promise<void>,
): Promise<Statement[]> {
  const statements: Statement[] = [];
  const log = (event: { query: Statement }) => void statements.push(event.query);
  const db =
    dialect === 'sqlite'
      ? new Kysely<DB>({ dialect: sqliteDialect(url), plugins: [new SqliteLimitsInText()], log })
      : new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }), log });
  try {
    await run(db);
  } finally {
    await db.destroy();
  }
  return statements;
}

/** A statement's plan, one line per step: SQLite's EXPLAIN QUERY PLAN, or PostgreSQL's EXPLAIN after `setup`. */
export async function planOf(
  dialect: Dialect,
  url: string,
  statement: Statement,
  setup: string[] = [],
): Promise<string> {
  if (dialect === 'sqlite') {
    const raw = openSqlite(url);
    try {
      return raw
        .prepare(`explain query plan ${statement.sql}`)
        .all(...(statement.parameters as SQLInputValue[]))
        .map((r) => String(r.detail))
        .join('\n');
    } finally {
      raw.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const command of setup) await client.query(command);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`explain ${statement.sql}`, [
      ...statement.parameters,
    ]);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await client.end();
  }
}
