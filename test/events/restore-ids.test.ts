// Event ids after a restore to an earlier moment: the events written after the backup are lost with
// it, but receivers saw their ids (webhook-id, a SET's txn and jti). `events after-restore` (run by
// `restore` itself on SQLite) moves the counters so the next id is above every one issued before.
// PostgreSQL is restored with pg_dump and pg_restore, as docs/backup.md says.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { addUser } from '../../src/directory/index.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { cli, dialects, migratedDatabase, seedOrg } from '../helpers.ts';

const maxId = async (store: Store, table: 'events' | 'event_deliveries') =>
  Number(
    (
      await store.db
        .selectFrom(table)
        .select((eb) => eb.fn.max('id').as('id'))
        .executeTakeFirst()
    )?.id ?? 0,
  );

async function addUsers(store: Store, from: number, count: number): Promise<void> {
  for (let i = from; i < from + count; i++)
    await addUser(store, { orgId: 1, eppn: `u${i}@example.org`, name: `User ${i}`, email: `u${i}@example.org` });
}

for (const dialect of dialects()) {
  describe(`event ids after a restore (${dialect})`, () => {
    it('the first event after `events after-restore` has an id above every id issued before the restore', async () => {
      const database = await migratedDatabase(dialect);
      const dir = mkdtempSync(join(tmpdir(), 'idp-restore-ids-'));
      let restoredUrl: string;
      let dropRestored: () => Promise<void>;
      try {
        let store = await openStore(database.url);
        await seedOrg({ store });
        await addUsers(store, 0, 3);
        // the backup
        const dump = join(dir, 'backup');
        if (dialect === 'sqlite') {
          await store.close();
          copyFileSync(database.url, dump);
          store = await openStore(database.url);
        } else execFileSync('pg_dump', ['--format=custom', `--file=${dump}`, database.url]);
        // writes after it, whose event ids receivers saw
        await addUsers(store, 3, 3);
        const seen = await maxId(store, 'events');
        await store.close();
        // the restore, into a new database
        if (dialect === 'sqlite') {
          restoredUrl = join(dir, 'restored.sqlite');
          copyFileSync(dump, restoredUrl);
          dropRestored = async () => {};
        } else {
          const name = `idp_restored_${process.pid}_${Date.now()}`;
          const admin = new pg.Client({ connectionString: process.env.TEST_POSTGRES_URL });
          await admin.connect();
          await admin.query(`create database ${name}`);
          const url = new URL(process.env.TEST_POSTGRES_URL!);
          url.pathname = `/${name}`;
          restoredUrl = url.toString();
          execFileSync('pg_restore', [
            '--no-owner',
            '--exit-on-error',
            '--single-transaction',
            `--dbname=${restoredUrl}`,
            dump,
          ]);
          dropRestored = async () => {
            await admin.query(`drop database if exists ${name} with (force)`);
            await admin.end();
          };
        }
        const restored = await openStore(restoredUrl);
        try {
          assert.ok((await maxId(restored, 'events')) < seen, 'the restored database is from before the last events');
          const done = await cli(restoredUrl, ['events', 'after-restore']);
          assert.equal(done.code, 0, done.err);
          await addUsers(restored, 100, 1);
          const next = await maxId(restored, 'events');
          assert.ok(next > seen, `the next event id ${next} is above ${seen}`);
          // run again later (another restore of the same database): still only upwards
          assert.equal((await cli(restoredUrl, ['events', 'after-restore'])).code, 0);
          await addUsers(restored, 101, 1);
          assert.ok((await maxId(restored, 'events')) > next);
        } finally {
          await restored.close();
          await dropRestored();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await database.drop();
      }
    });
  });
}
