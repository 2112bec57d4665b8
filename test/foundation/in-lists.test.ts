// Store functions that bind a list of values from input (an `in (...)` list, the rows of one insert)
// take lists longer than one statement may carry: SQLite refuses more than 32,766 parameters and
// PostgreSQL more than 65,535, so each runs in chunks and answers as for a short list. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  migratedDatabase,
  seedOrg,
  seedUser,
  seedClient,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import * as events from '../../src/store/events.ts';
import { eppnExists, emailExists, namespacedIdExists, ninExists } from '../../src/store/checkuser.ts';
import { findUserByEmailIn, insertUserId } from '../../src/store/directory.ts';
import { grantOrganizations, listGrantedOrganizations, revokeOrganizations } from '../../src/store/clients.ts';
import { findUsersBySubs } from '../../src/store/provisioning.ts';

/** More values than either database takes in one statement. */
const MANY = 70_000;
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

for (const dialect of dialects()) {
  describe(`long value lists in store functions (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let user: { id: number; sub: string };

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
      await seedOrg({ store }, 1, 'example.org');
      user = await seedUser({ store }, 1, 'ada@example.org', { email: 'ada@example.org', nin: '01017012345' });
      await insertUserId(store.db, user.id, 'edugain', 'ada-1');
    });
    after(async () => {
      await store?.close();
      await database?.drop();
    });

    it('acknowledges a stream delivery named among 70,000 ids', async () => {
      const now = Date.now();
      // (verification_requested_at is left to its default)
      const stream: Omit<events.StreamRow, 'verification_requested_at'> = {
        id: 'stream-1',
        client_id: 'rx',
        delivery_method: events.POLL,
        endpoint_url: null,
        authorization_header: null,
        events_requested: '[]',
        description: null,
        status: 'enabled',
        reason: null,
        all_subjects: 1,
        created_at: now,
        updated_at: now,
      };
      await events.insertStream(store.db, stream as events.StreamRow);
      for (const state of ['a', 'b', 'c'])
        await events.insertStreamEvent(store.db, stream, { at: now, type: 'ssf.verification', data: { state } });
      const pending = await events.pendingForStream(store.db, stream.id, 10);
      assert.equal(pending.length, 3);
      const [first, second, third] = pending.map((d) => Number(d.id));
      // the two acknowledged at both ends of a list of fakes
      await events.settleStreamDeliveries(
        store.db,
        stream.id,
        [first!, ...range(1_000_000, MANY), third!],
        'delivered',
        now,
      );
      assert.deepEqual(
        (await events.pendingForStream(store.db, stream.id, 10)).map((d) => Number(d.id)),
        [second],
      );
    });

    it('answers the existence checks for a client of 70,000 organizations', async () => {
      const orgIds = [...range(100_000, MANY), 1];
      assert.equal(await eppnExists(store.db, orgIds, 'ada@example.org'), true);
      assert.equal(await ninExists(store.db, orgIds, '01017012345'), true);
      assert.equal(await emailExists(store.db, orgIds, 'ada@example.org'), true);
      assert.equal(await namespacedIdExists(store.db, orgIds, 'edugain', 'ada-1'), true);
      const others = range(100_000, MANY);
      assert.equal(await eppnExists(store.db, others, 'ada@example.org'), false);
      assert.equal(await ninExists(store.db, others, '01017012345'), false);
      assert.equal(await emailExists(store.db, others, 'ada@example.org'), false);
      assert.equal(await namespacedIdExists(store.db, others, 'edugain', 'ada-1'), false);
      assert.equal((await findUserByEmailIn(store.db, orgIds, 'ada@example.org'))?.id, user.id);
      assert.equal(await findUserByEmailIn(store.db, others, 'ada@example.org'), undefined);
    });

    it('finds the members named among 70,000 subs', async () => {
      const subs = [...range(0, MANY).map((i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`), user.sub];
      assert.deepEqual(
        (await findUsersBySubs(store.db, 1, subs)).map((u) => u.sub),
        [user.sub],
      );
    });

    it('grants and revokes 12,000 organizations at once', async () => {
      // three parameters a row: 36,000 in one insert, more than SQLite takes
      const ids = range(2, 12_000);
      for (let i = 0; i < ids.length; i += 1000)
        await store.db
          .insertInto('organizations')
          .values(
            ids.slice(i, i + 1000).map((id) => ({ id, realm: `org${id}.example`, name: `Org ${id}`, created_at: 0 })),
          )
          .execute();
      const { clientId } = await seedClient({ store, keys: keyring(TEST_SECRET) });
      await grantOrganizations(store.db, clientId, ids, 'admin');
      assert.equal((await listGrantedOrganizations(store.db, clientId, 'admin')).length, ids.length);
      assert.equal(
        await revokeOrganizations(store.db, clientId, [...ids, ...range(1_000_000, MANY)], 'admin'),
        ids.length,
      );
      assert.deepEqual(await listGrantedOrganizations(store.db, clientId, 'admin'), []);
    });
  });
}
