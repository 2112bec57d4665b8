import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Kysely } from 'kysely';
import { openStore, type Store } from '../../src/store/index.ts';
import { prepare } from '../../src/store/prepared.ts';
import { SqliteLimitsInText, sqliteDialect } from '../../src/store/sqlite.ts';
import type { DB } from '../../src/store/schema.ts';
import { dialects, migratedDatabase, seedOrg, seedUser, type TestDatabase } from '../helpers.ts';

// SQLite compiles a statement again each time a value is bound to a LIMIT or OFFSET parameter, so
// on SQLite whole-number limits are written into the SQL text (the statement kept for the text is
// reused); PostgreSQL keeps them as parameters of its named prepared statements.

const usersOfOrg = prepare<{ orgId: number; afterId: number; limit: number }, { id: number; eppn: string }>((db, p) =>
  db
    .selectFrom('users')
    .select(['users.id', 'users.eppn'])
    .where('users.org_id', '=', p.orgId)
    .where('users.id', '>', p.afterId)
    .orderBy('users.id')
    .limit(p.limit),
);

for (const dialect of dialects()) {
  describe(`LIMIT and OFFSET (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
      await seedOrg({ store });
      for (let i = 1; i <= 5; i++) await seedUser({ store }, 1, `user${i}@example.org`);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    it('a built query: whole numbers in the text on SQLite, parameters on PostgreSQL', () => {
      const q = store.db.selectFrom('users').select('id').where('org_id', '=', 1).limit(3).offset(2).compile();
      if (dialect === 'sqlite') {
        assert.match(q.sql, / limit 3 offset 2$/);
        assert.deepEqual(q.parameters, [1]);
      } else {
        assert.match(q.sql, / limit \$2 offset \$3$/);
        assert.deepEqual(q.parameters, [1, 3, 2]);
      }
    });

    it('a limit that is not a whole number stays a parameter', () => {
      for (const limit of [2.5, -1, Number.MAX_SAFE_INTEGER + 2]) {
        const q = store.db.selectFrom('users').select('id').limit(limit).compile();
        assert.deepEqual(q.parameters, [limit]);
        assert.doesNotMatch(q.sql, /limit \d/);
      }
    });

    it('built queries return what their limit and offset say', async () => {
      for (const [limit, offset] of [
        [1, 0],
        [2, 1],
        [5, 3],
        [10, 0],
      ] as const) {
        const rows = await store.db
          .selectFrom('users')
          .select('eppn')
          .orderBy('id')
          .limit(limit)
          .offset(offset)
          .execute();
        const expected = [1, 2, 3, 4, 5].slice(offset, offset + limit).map((i) => `user${i}@example.org`);
        assert.deepEqual(
          rows.map((r) => r.eppn),
          expected,
        );
      }
    });

    it('a prepared query runs with each limit it is given', async () => {
      const all = await usersOfOrg(store.db, { orgId: 1, afterId: 0, limit: 100 });
      assert.equal(all.length, 5);
      for (const limit of [1, 2, 3, 5, 1, 0]) {
        const rows = await usersOfOrg(store.db, { orgId: 1, afterId: all[0]!.id, limit });
        assert.deepEqual(
          rows.map((r) => r.eppn),
          all.slice(1, 1 + limit).map((r) => r.eppn),
        );
      }
      await store.db.transaction().execute(async (trx) => {
        assert.equal((await usersOfOrg(trx, { orgId: 1, afterId: 0, limit: 2 })).length, 2);
      });
    });

    if (dialect === 'sqlite') {
      it('a prepared query refuses a limit that is not a whole number (it would be written into the text)', async () => {
        for (const limit of [1.5, -1, Number.NaN, '3' as unknown as number]) {
          await assert.rejects(usersOfOrg(store.db, { orgId: 1, afterId: 0, limit }), {
            name: 'TypeError',
            message: 'prepared query: limit must be a whole number',
          });
        }
      });

      it('a prepared query runs on SQLite as SQL text with its limit written in', async () => {
        const texts: string[] = [];
        const db = new Kysely<DB>({
          dialect: sqliteDialect(database.url),
          plugins: [new SqliteLimitsInText()],
          log: (event) => void texts.push(event.query.sql),
        });
        try {
          await usersOfOrg(db, { orgId: 1, afterId: 0, limit: 4 });
          await usersOfOrg(db, { orgId: 1, afterId: 0, limit: 2 });
          assert.equal(texts.length, 2);
          assert.match(texts[0]!, / limit 4$/);
          assert.match(texts[1]!, / limit 2$/);
          assert.ok(texts.every((t) => !t.includes('prepared:')));
        } finally {
          await db.destroy();
        }
      });
    }
  });
}
