// PostgreSQL closes the service's connections (a restart, a failover, a proxy that drops them):
// here pg_terminate_backend on every backend of the service's database, over and over, while
// requests run against the real listening service. The service stays up, answers what it cannot
// serve with a 503 (never a 500 or a SQL message), and serves again once the connections return.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { dialects, migratedDatabase, type TestDatabase } from '../helpers.ts';
import { call, startLoadedService, underLoad, type LoadedService } from './loaded-service.ts';

const CUTS = 15;
const CUT_EVERY_MS = 200;

/** Whether the process is still there (signal 0 only checks). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

if (dialects().includes('postgres')) {
  describe('PostgreSQL connections cut under load', () => {
    let database: TestDatabase;
    let loaded: LoadedService;
    let admin: pg.Client;

    before(async () => {
      database = await migratedDatabase('postgres');
      loaded = await startLoadedService(database.url, { users: 20, passkeysEach: 40 });
      admin = new pg.Client({ connectionString: process.env.TEST_POSTGRES_URL });
      await admin.connect();
    });

    after(async () => {
      await admin?.end();
      await loaded?.service.stop();
      await database?.drop();
    });

    it('keeps the service running, answers 503 at worst, and serves again afterwards', async () => {
      const name = new URL(database.url).pathname.slice(1);
      let terminated = 0;
      const answers = await underLoad(loaded, 8, async () => {
        for (let cut = 0; cut < CUTS; cut++) {
          await new Promise((r) => setTimeout(r, CUT_EVERY_MS));
          const { rows } = await admin.query<{ ok: boolean }>(
            'select pg_terminate_backend(pid) as ok from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
            [name],
          );
          terminated += rows.filter((r) => r.ok).length;
          assert.ok(alive(loaded.service.pid), `the service died at cut ${cut + 1}: ${loaded.service.stderr()}`);
        }
      });
      assert.ok(terminated >= CUTS, `only ${terminated} connections were cut`);
      assert.ok(alive(loaded.service.pid), `the service died: ${loaded.service.stderr()}`);

      const statuses = new Map<number, number>();
      for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      const bad = answers.filter((a) => ![200, 503].includes(a.status));
      assert.deepEqual(
        bad.slice(0, 5).map((a) => `${a.what}: ${a.status} ${a.body}`),
        [],
        `answers by status: ${JSON.stringify([...statuses])}`,
      );
      for (const a of answers.filter((x) => x.status === 503)) {
        assert.match(String(a.headers['retry-after']), /^\d+$/);
        assert.doesNotMatch(a.body, /terminat|connection|sql|postgres/i);
      }
      assert.ok((statuses.get(200) ?? 0) > 0, 'nothing was served while the connections were cut');

      // serves again: every request after the cuts is answered
      const user = loaded.users[0]!;
      for (let i = 0; i < 20; i++) {
        const res = await call(`${loaded.service.url}/2/passkey/1?eppn=${user.eppn}`, {
          headers: { authorization: `Bearer ${loaded.token}` },
        });
        assert.equal(res.status, 200, res.body);
      }
      assert.equal((await call(`${loaded.service.url}/readyz`)).status, 200);
    });
  });
}
