// Claiming due deliveries (src/store/events.ts): a claim takes at most what it asks for, the next
// claim takes the next ones, and of one subject's deliveries to one destination only the oldest
// pending one can be claimed; the due ones are found among the pending only, in id order, however
// many were delivered before or wait behind them. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, migratedDatabase, seedOrg, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { claimDueDeliveries, insertEvents, insertWebhook } from '../../src/store/events.ts';
import { planOf, statementsOf } from '../plans.ts';
import { twoStepBacklog } from './backlog.ts';

for (const dialect of dialects()) {
  describe(`claiming deliveries (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;

    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      await seedOrg({ store }, 1, 'example.org');
      await insertWebhook(store.db, { orgId: 1, url: 'https://hooks.example/x', eventTypes: [], secret: 's', at: 1 });
    });
    after(async () => {
      await store.close();
      await db.drop();
    });

    it('takes at most the limit, and the next claim the next ones, the oldest of each subject first', async () => {
      const at = Date.now();
      // 120 users with two events each: 120 deliveries are due, the second of each waits for the first
      await insertEvents(store.db, twoStepBacklog('u', 120, at));
      const lease = at + 15_000;
      const first = await claimDueDeliveries(store.db, store.dialect, at, lease, 50);
      const second = await claimDueDeliveries(store.db, store.dialect, at, lease, 50);
      const third = await claimDueDeliveries(store.db, store.dialect, at, lease, 50);
      assert.deepEqual(
        [first.length, second.length, third.length],
        [50, 50, 20],
        'the limit holds, and the later step of a subject waits for the earlier one',
      );
      const ids = [...first, ...second, ...third].map((d) => Number(d.id));
      assert.equal(new Set(ids).size, 120, 'no delivery claimed twice');
      assert.ok(
        [...first, ...second, ...third].every((d) => d.type === 'user.step1'),
        'only the oldest of each subject',
      );
      assert.deepEqual(await claimDueDeliveries(store.db, store.dialect, at, lease, 50), [], 'all leased');
    });

    it('finds the due deliveries in id order among the pending ones, without sorting them all', async () => {
      // the tables hold no statistics (nothing has analyzed them): planned as a new database's
      const statements = await statementsOf(dialect, db.url, async (q) => {
        await claimDueDeliveries(q, dialect, Date.now(), Date.now() + 15_000, 50);
      });
      const at = statements.findIndex((s) => /^update/i.test(s.sql));
      // what the claim sets before its update, in a transaction as the claim runs it
      const setup = ['begin', ...statements.slice(0, at).map((s) => s.sql)];
      const plan = await planOf(dialect, db.url, statements[at]!, setup);
      assert.match(plan, /event_deliveries_pending/, plan);
      assert.doesNotMatch(plan, /TEMP B-TREE FOR ORDER BY|Sort/, plan);
    });
  });
}
