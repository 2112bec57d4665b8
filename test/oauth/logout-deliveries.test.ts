// The outbox of back-channel logout deliveries: a delivery's first attempt holds its lease, so the
// retry job on any instance leaves it alone, and an attempt that outlived its lease records nothing.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, migratedDatabase, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import {
  claimLogoutDelivery,
  dueLogoutDeliveries,
  insertLogoutDelivery,
  recordLogoutAttempt,
} from '../../src/store/logout-deliveries.ts';

for (const dialect of dialects()) {
  describe(`logout deliveries (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
    });
    after(async () => {
      await store.close();
      await db.drop();
    });

    const outcome = (at: number) => ({
      at,
      attempts: 1,
      status: 200,
      error: null,
      delivered: true,
      nextAttemptAt: null,
    });

    it('a new delivery is not due while its first attempt holds the lease', async () => {
      const delivery = await insertLogoutDelivery(
        store.db,
        { client_id: 'c1', sub: 's', sid: null, created_at: 1_000 },
        61_000,
      );
      assert.deepEqual(
        (await dueLogoutDeliveries(store.db, 60_999, 10)).map((d) => d.id),
        [],
      );
      assert.deepEqual(
        (await dueLogoutDeliveries(store.db, 61_000, 10)).map((d) => d.id),
        [delivery.id],
      );
    });

    it('of attempts racing for one due delivery exactly one claims it', async () => {
      const delivery = await insertLogoutDelivery(
        store.db,
        { client_id: 'c2', sub: 's', sid: null, created_at: 1_000 },
        2_000,
      );
      const claims = await Promise.all(
        Array.from({ length: 20 }, (_, i) => claimLogoutDelivery(store.db, delivery, 100_000 + i)),
      );
      assert.equal(claims.filter(Boolean).length, 1);
    });

    it('an attempt whose lease was taken over records nothing', async () => {
      const delivery = await insertLogoutDelivery(
        store.db,
        { client_id: 'c3', sub: 's', sid: null, created_at: 1_000 },
        2_000,
      );
      assert.ok(await claimLogoutDelivery(store.db, delivery, 90_000)); // the retry job took it over
      await recordLogoutAttempt(store.db, delivery.id, 2_000, outcome(3_000)); // the first attempt, late
      const [row] = (await dueLogoutDeliveries(store.db, 90_000, 10)).filter((d) => d.id === delivery.id);
      assert.equal(row?.attempts, 0, 'the late attempt wrote nothing');
      await recordLogoutAttempt(store.db, delivery.id, 90_000, outcome(90_500)); // the holder of the lease
      assert.deepEqual(
        (await dueLogoutDeliveries(store.db, Number.MAX_SAFE_INTEGER, 10)).filter((d) => d.id === delivery.id),
        [],
      );
    });
  });
}
