// Refunds of a rate limit: one statement that never takes back more events than were counted in the
// window, also when refunds run at once, and that starts afresh in a new window.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, migratedDatabase, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { rateLimit } from '../../src/http/rate-limit.ts';
import { AppError } from '../../src/errors.ts';

const WINDOW = 60_000;

for (const dialect of dialects()) {
  describe(`rate limit refunds (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let clock = 10 * WINDOW + 1;

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    const refused = (err: unknown) => err instanceof AppError && err.status === 429;

    it('gives back at most what was counted, however many refunds run at once', async () => {
      const limit = rateLimit(store, 'test', 2, WINDOW, () => clock);
      await limit.consume('k');
      await limit.consume('k');
      await Promise.all(Array.from({ length: 5 }, () => limit.refund('k')));
      assert.equal(await limit.exceeded('k'), false);
      await limit.consume('k');
      await limit.consume('k');
      // two refunds were owed, not five: a third attempt is over the limit
      await assert.rejects(limit.consume('k'), refused);
      assert.equal(await limit.exceeded('k'), true);
    });

    it('refunds nothing for a key with no events in this window, and counts refunds afresh in a new one', async () => {
      const limit = rateLimit(store, 'fresh', 1, WINDOW, () => clock);
      await limit.refund('k');
      await limit.consume('k');
      await assert.rejects(limit.consume('k'), refused, 'the refund before any event was not kept');
      clock += WINDOW;
      await limit.consume('k');
      await limit.refund('k');
      await limit.refund('k');
      await limit.consume('k');
      await assert.rejects(limit.consume('k'), refused, 'one refund for the one event of this window');
    });
  });
}
