// The expand-then-contract rules of docs/architecture.md (Migrations), checked on the schema itself:
// every migration is run one at a time on an empty database of each dialect and the tables and
// columns compared before and after. A migration may add tables, columns and indexes; it may not
// drop or rename a table or column that a release still running could use (an older instance during
// an upgrade one at a time), add a NOT NULL column without a default (the older release's inserts
// leave it out), or make a nullable column NOT NULL. A contract step, a release after the code
// stopped using what it removes, is listed in CONTRACTS with the release that stopped using it.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { Kysely } from 'kysely';
import { dialects, freshDatabase, type TestDatabase } from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';
import { migrate, migrationNames } from '../../src/store/migrations.ts';

/**
 * Removals allowed as contract steps: `migration: ['table' | 'table.column', ...]`. Each needs the
 * release whose code stopped using it to be out before the migration ships.
 */
const CONTRACTS: Record<string, string[]> = {};

interface Column {
  nullable: boolean;
  hasDefault: boolean;
}
type Schema = Map<string, Map<string, Column>>;

async function schemaOf(db: Kysely<any>): Promise<Schema> {
  const tables = await db.introspection.getTables();
  return new Map(
    tables
      .filter((t) => !t.isView && !t.name.startsWith('schema_migrations'))
      .map((t) => [
        t.name,
        new Map(t.columns.map((c) => [c.name, { nullable: c.isNullable, hasDefault: c.hasDefaultValue }])),
      ]),
  );
}

/** What a migration did that older code running beside it could trip over. */
function breaking(name: string, before: Schema, after: Schema): string[] {
  const allowed = new Set(CONTRACTS[name] ?? []);
  const problems: string[] = [];
  for (const [table, columns] of before) {
    const now = after.get(table);
    if (!now) {
      if (!allowed.has(table)) problems.push(`${name}: table ${table} dropped or renamed`);
      continue;
    }
    for (const [column, was] of columns) {
      const is = now.get(column);
      if (!is) {
        if (!allowed.has(`${table}.${column}`)) problems.push(`${name}: column ${table}.${column} dropped or renamed`);
      } else if (was.nullable && !is.nullable && !is.hasDefault)
        problems.push(`${name}: column ${table}.${column} made NOT NULL without a default`);
    }
    for (const [column, is] of now)
      if (!columns.has(column) && !is.nullable && !is.hasDefault)
        problems.push(`${name}: column ${table}.${column} added NOT NULL without a default`);
  }
  return problems;
}

for (const dialect of dialects()) {
  describe(`migrations only expand, or contract what is listed (${dialect})`, () => {
    let database: TestDatabase;
    after(() => database?.drop());

    it('no migration drops or renames a table or column, or adds a NOT NULL column without a default', async () => {
      database = await freshDatabase(dialect);
      const store = await openStore(database.url, { migrate: false });
      try {
        const names = migrationNames();
        assert.ok(names.length > 1);
        await migrate(store.db, dialect, names[0]);
        let before = await schemaOf(store.db);
        const problems: string[] = [];
        for (const name of names.slice(1)) {
          await migrate(store.db, dialect, name);
          const now = await schemaOf(store.db);
          problems.push(...breaking(name, before, now));
          before = now;
        }
        assert.deepEqual(problems, []);
      } finally {
        await store.close();
      }
    });

    it('the check sees a dropped column, a renamed table and a NOT NULL column without a default', () => {
      const col = (nullable: boolean, hasDefault = false): Column => ({ nullable, hasDefault });
      const before: Schema = new Map([
        [
          'users',
          new Map([
            ['id', col(false)],
            ['nick', col(true)],
          ]),
        ],
        ['things', new Map([['id', col(false)]])],
      ]);
      const after: Schema = new Map([
        [
          'users',
          new Map([
            ['id', col(false)],
            ['flag', col(false)],
            ['note', col(false, true)],
          ]),
        ],
        ['stuff', new Map([['id', col(false)]])],
      ]);
      assert.deepEqual(breaking('099_x', before, after).sort(), [
        '099_x: column users.flag added NOT NULL without a default',
        '099_x: column users.nick dropped or renamed',
        '099_x: table things dropped or renamed',
      ]);
      CONTRACTS['099_x'] = ['things', 'users.nick'];
      try {
        assert.deepEqual(breaking('099_x', before, after), [
          '099_x: column users.flag added NOT NULL without a default',
        ]);
      } finally {
        delete CONTRACTS['099_x'];
      }
    });
  });
}
