import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, sql } from 'kysely';
import { sqliteDialect } from '../../src/store/sqlite.ts';

// The SQLite driver reads rows as arrays and builds ordinary objects from them (src/store/sqlite.ts):
// what a query returns must be what node:sqlite's own row objects held, key for key.

describe('SQLite rows', () => {
  let dir: string;
  let db: Kysely<Record<string, Record<string, unknown>>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idp-sqlite-rows-'));
    db = new Kysely({ dialect: sqliteDialect(join(dir, 'rows.sqlite')) });
    await sql`create table t (id integer primary key, name text, n real, data blob, gone text)`.execute(db);
    await sql`insert into t values (1, 'a', 1.5, x'0102', null), (2, 'b', 2, null, 'x')`.execute(db);
  });
  after(async () => {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('every column by name, in the order selected, as ordinary objects', async () => {
    const rows = await db.selectFrom('t').select(['name', 'id', 'n', 'data', 'gone']).orderBy('id').execute();
    assert.equal(rows.length, 2);
    assert.deepEqual(Object.keys(rows[0]!), ['name', 'id', 'n', 'data', 'gone']);
    assert.equal(Object.getPrototypeOf(rows[0]), Object.prototype);
    assert.deepEqual(rows, [
      { name: 'a', id: 1, n: 1.5, data: new Uint8Array([1, 2]), gone: null },
      { name: 'b', id: 2, n: 2, data: null, gone: 'x' },
    ]);
  });

  it('a later column of the same name wins, as in the driver', async () => {
    const { rows } = await sql<{ v: unknown }>`select 1 as v, 2 as v`.execute(db);
    assert.deepEqual(rows, [{ v: 2 }]);
  });

  it('a column named __proto__ is a property, not the prototype', async () => {
    const { rows } = await sql<Record<string, unknown>>`select 'x' as "__proto__", 1 as id`.execute(db);
    assert.equal(rows.length, 1);
    assert.equal(Object.getOwnPropertyDescriptor(rows[0], '__proto__')?.value, 'x');
    assert.equal(rows[0]!.id, 1);
  });

  it('streamed rows are built the same way', async () => {
    const seen = [];
    for await (const row of db.selectFrom('t').select(['id', 'name']).orderBy('id').stream()) seen.push(row);
    assert.deepEqual(seen, [
      { id: 1, name: 'a' },
      { id: 2, name: 'b' },
    ]);
  });

  it('statements without rows and RETURNING still answer', async () => {
    const r = await db.updateTable('t').set({ name: 'c' }).where('id', '=', 2).executeTakeFirst();
    assert.equal(r.numUpdatedRows, 1n);
    const returned = await db.insertInto('t').values({ id: 3, name: 'd' }).returning(['id', 'name']).execute();
    assert.deepEqual(returned, [{ id: 3, name: 'd' }]);
  });
});
