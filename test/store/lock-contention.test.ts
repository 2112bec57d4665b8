// The admin CLI writes to the database while the service is busy writing to it. On SQLite writers
// wait for each other (BEGIN IMMEDIATE, retried until the lock is free); none is refused with
// "database is locked" as a 500, a lock held for longer than 5 s is a 503 with Retry-After, and while
// a writer waits the process goes on serving. PostgreSQL is run under the same load for comparison.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { DatabaseSync } from 'node:sqlite';
import {
  clientToken,
  dialects,
  migratedDatabase,
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
import { hit } from '../../src/store/rate-limits.ts';
import { startLoadedService, underLoad, type LoadedService } from './loaded-service.ts';

const CLI_RUNS = 12;
const CLI_AT_ONCE = 3;
/** How long the other process holds the lock in the tests that wait for it. */
const HOLD_MS = 3000;
/**
 * The longest stall that still counts as "went on serving". A wait that blocked the thread would stop
 * everything for the whole hold; a machine busy with other test files deschedules the process for a few
 * hundred milliseconds now and then, which is not what these tests are about.
 */
const STALL_MS = 1000;

/**
 * Another process that holds SQLite's write lock on the file for `ms` (it waits for the lock first if the
 * service's own background work holds it); resolves once it holds it.
 * `released` is the time (Date.now()) at which it let go, read from its output.
 */
async function lockHolder(path: string, ms: number): Promise<{ released: Promise<number> }> {
  const code = `const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(process.argv[1], { timeout: 5000 });
    db.exec('begin immediate');
    process.stdout.write('locked\\n');
    setTimeout(() => {
      db.exec('rollback');
      process.stdout.write('released ' + Date.now() + '\\n');
      db.close();
    }, Number(process.argv[2]));`;
  const child = spawn(process.execPath, ['-e', code, path, String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    void exited.then((code) => reject(new Error(`the lock holder exited with ${code}`)));
  });
  const released = exited.then((code) => {
    const at = /released (\d+)/.exec(out)?.[1];
    if (code !== 0 || !at) throw new Error(`the lock holder exited with ${code}: ${out}`);
    return Number(at);
  });
  released.catch(() => {}); // awaited by the test; a failure before then is reported there
  return { released };
}

/** The longest time the event loop went without running a timer, from now until stop(). */
function eventLoopGaps(): { stop(): number } {
  let last = performance.now();
  let longest = 0;
  const tick = () => {
    longest = Math.max(longest, performance.now() - last);
    last = performance.now();
  };
  const timer = setInterval(tick, 20);
  return {
    stop() {
      tick();
      clearInterval(timer);
      return Math.round(longest);
    },
  };
}

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
      database = await migratedDatabase(dialect);
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

describe('a lock held by another process (sqlite)', () => {
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

  it('waits for the lock without stopping the process, then deletes', async () => {
    const gaps = eventLoopGaps();
    const holder = await lockHolder(ctx.config.databaseUrl, HOLD_MS);
    let done = false;
    const deleting = ctx.app
      .inject({ method: 'DELETE', url: `/2/passkey/1/${passkeys[1]}`, headers: { authorization: `Bearer ${token}` } })
      .finally(() => (done = true));
    // meanwhile the process answers: /healthz every 50 ms, and a read of the database now and then
    const health: number[] = [];
    const reads: { status: number; ms: number }[] = [];
    while (!done) {
      const t = performance.now();
      const res = await ctx.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(res.statusCode, 200);
      health.push(performance.now() - t);
      if (health.length % 10 === 5) {
        const r = performance.now();
        const list = await ctx.app.inject({
          method: 'GET',
          url: '/2/passkey/1',
          headers: { authorization: `Bearer ${token}` },
        });
        reads.push({ status: list.statusCode, ms: performance.now() - r });
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const res = await deleting;
    const answeredAt = Date.now();
    const longestGap = gaps.stop();
    const releasedAt = await holder.released;
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(longestGap < STALL_MS, `timers stopped for ${longestGap} ms while the delete waited`);
    const slowest = Math.round(Math.max(...health));
    assert.ok(slowest < STALL_MS, `/healthz took ${slowest} ms while the delete waited`);
    assert.ok(answeredAt >= releasedAt, `deleted ${releasedAt - answeredAt} ms before the lock was released`);
    assert.ok(health.length >= 20, `/healthz answered only ${health.length} times while the delete waited`);
    assert.ok(reads.length >= 2, `only ${reads.length} reads ran while the delete waited`);
    for (const r of reads) {
      assert.equal(r.status, 200);
      assert.ok(r.ms < STALL_MS, `a read took ${Math.round(r.ms)} ms while the delete waited`);
    }
    const left = await ctx.store.db.selectFrom('passkeys').select('id').where('id', '=', passkeys[1]!).execute();
    assert.deepEqual(left, []);
  });

  it('waits for the lock outside a transaction too (an autocommit write), without stopping the process', async () => {
    const gaps = eventLoopGaps();
    const holder = await lockHolder(ctx.config.databaseUrl, HOLD_MS);
    const count = await hit(ctx.store.db, 'lock-contention', 1);
    const writtenAt = Date.now();
    const longestGap = gaps.stop();
    const releasedAt = await holder.released;
    assert.equal(count, 1);
    assert.ok(longestGap < STALL_MS, `timers stopped for ${longestGap} ms while the write waited`);
    assert.ok(writtenAt >= releasedAt, `written ${releasedAt - writtenAt} ms before the lock was released`);
  });

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
    // it waited for the lock (5 s) before giving up
    assert.ok(performance.now() - started >= 4500, `gave up after ${Math.round(performance.now() - started)} ms`);

    const again = await ctx.app.inject({
      method: 'DELETE',
      url: `/2/passkey/1/${passkeys[0]}`,
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(again.statusCode, 200, again.body);
  });
});
