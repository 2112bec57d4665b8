// The admin CLI writes to the database while the service is busy writing to it. On SQLite writers
// wait for each other (BEGIN IMMEDIATE, the busy timeout); none is refused with "database is locked"
// as a 500, and a lock held beyond the busy timeout is a 503 with Retry-After. PostgreSQL is run
// under the same load for comparison.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import {
  clientToken,
  dialects,
  freshDatabase,
  PUBLIC_URL,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  TEST_SECRET,
  type TestContext,
  type TestDatabase,
} from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { startLoadedService, underLoad, type LoadedService } from './loaded-service.ts';

const CLI_RUNS = 12;
const CLI_AT_ONCE = 3;

/** `node src/main.ts <args>` as an operator runs it; its exit code and stderr. */
function adminCli(databaseUrl: string, args: string[]): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['src/main.ts', ...args], {
      env: { ...process.env, DATABASE_URL: databaseUrl, IDP_SECRET: TEST_SECRET, PUBLIC_URL, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => resolve({ code, err }));
  });
}

for (const dialect of dialects())
  describe(`admin CLI writes while the service writes (${dialect})`, () => {
    let database: TestDatabase;
    let loaded: LoadedService;

    before(async () => {
      database = await freshDatabase(dialect);
      loaded = await startLoadedService(database.url, { users: 20, passkeysEach: 60 });
    });

    after(async () => {
      await loaded?.service.stop();
      await database?.drop();
    });

    it('answers no request with a 500, and every CLI write succeeds', async () => {
      const cliResults: { args: string[]; code: number | null; err: string }[] = [];
      const answers = await underLoad(loaded, 6, async () => {
        let next = 0;
        const runner = async () => {
          while (next < CLI_RUNS) {
            const i = next++;
            const args =
              i % 2 === 0
                ? ['user', 'add', '--org', '1', '--eppn', `cli${i}@example.org`, '--name', `CLI ${i}`]
                : ['user', 'set', `user${i % loaded.users.length}@example.org`, '--name', `Renamed ${i}`];
            cliResults.push({ args, ...(await adminCli(database.url, args)) });
          }
        };
        await Promise.all(Array.from({ length: CLI_AT_ONCE }, runner));
      });
      const deletes = answers.filter((a) => a.what.startsWith('DELETE'));
      assert.ok(deletes.length >= 50, `only ${deletes.length} deletes ran beside the CLI`);
      const failed = answers.filter((a) => a.status !== 200);
      assert.deepEqual(
        failed.slice(0, 5).map((a) => `${a.what}: ${a.status} ${a.body}`),
        [],
        `${failed.length} of ${answers.length} requests failed`,
      );
      assert.deepEqual(
        cliResults.filter((r) => r.code !== 0).map((r) => `${r.args.join(' ')}: ${r.code} ${r.err}`),
        [],
      );
    });
  });

describe('a lock held beyond the busy timeout (sqlite)', () => {
  let ctx: TestContext;
  let token: string;
  let passkeys: number[];

  before(async () => {
    ctx = await startTestApp('sqlite');
    await seedOrg(ctx);
    const user = await seedUser(ctx, 1, 'erin@example.org');
    passkeys = await seedPasskeys(ctx.store, 1, [user.id], 2);
    const client = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
    token = await clientToken(ctx, client.clientId, client.secret, 'passkey.read passkey.delete');
  });

  after(async () => ctx?.close());

  it('answers 503 with Retry-After, and deletes once the lock is gone', async () => {
    const other = new DatabaseSync(ctx.config.databaseUrl);
    other.exec('begin immediate');
    const started = performance.now();
    let res;
    try {
      res = await ctx.app.inject({
        method: 'DELETE',
        url: `/2/passkey/1/${passkeys[0]}`,
        headers: { authorization: `Bearer ${token}` },
      });
    } finally {
      other.exec('rollback');
      other.close();
    }
    assert.equal(res.statusCode, 503, res.body);
    assert.equal(res.headers['retry-after'], '1');
    assert.deepEqual(res.json(), {
      code: 503,
      message: 'Service Unavailable: the database is busy or unreachable, try again',
    });
    // it waited for the lock (the busy timeout) before giving up
    assert.ok(performance.now() - started >= 4500, `gave up after ${Math.round(performance.now() - started)} ms`);

    const again = await ctx.app.inject({
      method: 'DELETE',
      url: `/2/passkey/1/${passkeys[0]}`,
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(again.statusCode, 200, again.body);
  });
});
