import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { openStore, type Store } from '../../src/store/index.ts';
import { insertPasskeys, listPasskeysByEppn, listPasskeysOfEppn } from '../../src/store/passkeys.ts';
import { eppnExists } from '../../src/store/checkuser.ts';
import { dialects, migratedDatabase, seedOrg, seedUser, type TestDatabase } from '../helpers.ts';
import { passkeyRow } from './fixtures.ts';
import { planOf, statementsOf, type Statement } from '../plans.ts';

// Lookups of one user by eppn: the user is found by the unique eppn index and the organization is
// checked on that row, so the plan does not depend on statistics. On PostgreSQL without statistics
// (a new database, a bulk import before autovacuum) `eppn = ? and org_id = ?` had been planned as a
// scan of the organization's users by an org_id index, filtered by eppn.

const USERS_PER_ORG = 300;

for (const dialect of dialects()) {
  describe(`one user by eppn (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let alice: number;

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
      await seedOrg({ store }, 1, 'example.org');
      await seedOrg({ store }, 2, 'other.org');
      alice = (await seedUser({ store }, 1, 'alice@example.org')).id;
      const carol = (await seedUser({ store }, 2, 'carol@other.org')).id;
      for (let i = 0; i < USERS_PER_ORG; i++) await seedUser({ store }, 1, `user${i}@example.org`);
      await insertPasskeys(store.db, [
        passkeyRow(alice, 1, { label: 'a1' }),
        passkeyRow(alice, 1, { label: 'a2' }),
        passkeyRow(carol, 2, { label: 'c1' }),
      ]);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    it("lists the user's passkeys in the organization, and none of a user in another one", async () => {
      const own = await listPasskeysOfEppn(store.db, 1, 'alice@example.org', 0, 10);
      assert.deepEqual(
        own.map((p) => [p.eppn, p.label]),
        [
          ['alice@example.org', 'a1'],
          ['alice@example.org', 'a2'],
        ],
      );
      assert.deepEqual(await listPasskeysOfEppn(store.db, 1, 'carol@other.org', 0, 10), []);
      assert.equal((await listPasskeysOfEppn(store.db, 2, 'carol@other.org', 0, 10)).length, 1);
      assert.deepEqual(await listPasskeysOfEppn(store.db, 1, 'nobody@example.org', 0, 10), []);
      const joined = await listPasskeysByEppn(store.db, { orgId: 1, clientId: 'none' }, 'carol@other.org', 0, 10);
      assert.equal(joined.organization?.id, 1);
      assert.deepEqual(joined.passkeys, []);
    });

    it('a user exists only in the organizations asked about', async () => {
      assert.equal(await eppnExists(store.db, [1], 'alice@example.org'), true);
      assert.equal(await eppnExists(store.db, [2], 'alice@example.org'), false);
      assert.equal(await eppnExists(store.db, [2, 1], 'alice@example.org'), true);
      assert.equal(await eppnExists(store.db, [1], 'carol@other.org'), false);
      assert.equal(await eppnExists(store.db, [1], 'nobody@example.org'), false);
      assert.equal(await eppnExists(store.db, [], 'alice@example.org'), false);
    });

    it("reads one user's list from the user's index alone, not from the passkeys' rows", async () => {
      const [statement] = (await statementsOf(dialect, database.url, async (db) => {
        assert.equal((await listPasskeysOfEppn(db, 1, 'alice@example.org', 0, 10)).length, 2);
      })) as [Statement];
      if (dialect === 'sqlite') {
        const plan = await planOf(dialect, database.url, statement);
        assert.match(plan, /SEARCH passkeys USING COVERING INDEX passkeys_user \(user_id=\? AND id>\?\)/, plan);
      } else {
        // what an index-only scan needs: the visibility map of a vacuumed table, and no cheaper seq scan
        const plan = await planOf(dialect, database.url, statement, [
          'vacuum analyze passkeys',
          'set enable_seqscan = off',
        ]);
        assert.match(plan, /Index Only Scan using passkeys_user on passkeys/, plan);
      }
    });

    if (dialect === 'postgres') {
      it('without statistics, PostgreSQL finds the user by the eppn index, not by scanning the organization', async () => {
        const [{ analyzed }] = (
          await sql<{ analyzed: boolean }>`select last_analyze is not null or last_autoanalyze is not null as analyzed
            from pg_stat_user_tables where relname = 'users'`.execute(store.db)
        ).rows as [{ analyzed: boolean }];
        assert.equal(analyzed, false, 'the test needs a users table without statistics');
        // the statements the lookups run, as they run them
        const statements = await statementsOf(dialect, database.url, async (db) => {
          await listPasskeysOfEppn(db, 1, 'alice@example.org', 0, 10);
          await eppnExists(db, [1], 'alice@example.org');
        });
        assert.equal(statements.length, 2);
        for (const statement of statements) {
          const plan = await planOf(dialect, database.url, statement);
          assert.match(plan, /Index Scan using users_eppn_key on users/, plan);
          assert.doesNotMatch(plan, /using users_org/, plan);
        }
      });
    }
  });
}
