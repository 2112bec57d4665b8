// The periodic LDAP sync: a directory added with --sync-every is synced when due, by one of several
// instances at a time (the directory's lease), and not again before its interval has passed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, migratedDatabase, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { addLdapDirectory } from '../../src/directory/ldap-directories.ts';
import { listLdapEntries } from '../../src/store/ldap.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { startLdapSyncJob } from '../../src/ldap/index.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

const keys = keyring(TEST_SECRET);

for (const dialect of dialects()) {
  describe(`the periodic LDAP sync (${dialect})`, () => {
    let db: TestDatabase;
    let stores: Store[];
    let slapd: Slapd;

    before(async () => {
      slapd = await startSlapd({ users: testUsers(30) });
      db = await migratedDatabase(dialect);
      // two instances: each its own store (connection pool) on the one database
      stores = [await openStore(db.url), await openStore(db.url)];
      await addOrganization(stores[0]!, { id: 1, realm: 'example.org', name: 'Example' });
    });
    after(async () => {
      for (const s of stores) await s.close();
      await db.drop();
      await slapd.stop();
    });

    it('syncs a due directory once, on one instance, and not again before its interval', async () => {
      const d = await addLdapDirectory(stores[0]!, keys, {
        orgId: 1,
        url: slapd.url,
        bindDn: SERVICE_DN,
        bindPassword: SERVICE_PASSWORD,
        baseDn: PEOPLE,
        syncEveryMs: 15 * 60_000,
      });
      const jobs = stores.map((store) => startLdapSyncJob({ store, keys, now: Date.now, checkEveryMs: 3_600_000 }));
      try {
        const ran = await Promise.all(jobs.map((j) => j.runOnce()));
        assert.equal(ran[0]! + ran[1]!, 1, `one instance synced: ${ran.join(',')}`);
        assert.equal((await listLdapEntries(stores[0]!.db, d.id)).length, 30);
        assert.deepEqual(await Promise.all(jobs.map((j) => j.runOnce())), [0, 0], 'not due yet');
        // 16 minutes later, as far as the directory's last run is concerned
        const last = (
          await stores[0]!.db.selectFrom('ldap_directories').select('last_sync_at').executeTakeFirstOrThrow()
        ).last_sync_at!;
        await stores[0]!.db
          .updateTable('ldap_directories')
          .set({ last_sync_at: Number(last) - 16 * 60_000 })
          .execute();
        const again = await Promise.all(jobs.map((j) => j.runOnce()));
        assert.equal(again[0]! + again[1]!, 1);
        const runs = await listAuditEvents(stores[0]!.db, { action: 'ldap.sync', limit: 10 });
        assert.equal(runs.length, 2);
      } finally {
        for (const j of jobs) await j.stop();
      }
    });
  });
}
