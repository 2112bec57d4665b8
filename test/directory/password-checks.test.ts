// How imported password hashes are checked: bcrypt in worker threads, not on the event loop, under
// the same bounded queue (503 with Retry-After when it is full); imported hashes against the password
// as typed (python3-argon2's hash of a password NFKC changes), the service's own against the
// normalised one; and a sign-in does the same work (counted derivations, by kind) for an unknown
// account, one without a password, one with the service's own hash and one with the organization's
// costliest imported hash. SQLite and PostgreSQL for the sign-ins.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { argon2Sync, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { threadCpuUsage } from 'node:process';
import {
  DEFAULT_HASHING,
  hashPassword,
  limitPasswordHashing,
  passwordHashing,
  passwordWork,
  verifyPassword,
} from '../../src/directory/passwords.ts';
import { bcryptWorkers } from '../../src/directory/bcrypt-workers.ts';
import { forgetPasswordProfiles } from '../../src/directory/password-profile.ts';
import { AppError } from '../../src/errors.ts';
import { cookieBrowser, dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { independentHashes, passlibMissing } from './imported-hashes.ts';

/** NFKC changes it: the ligature ﬁ becomes "fi", the full-width letters plain ones. */
const UNSTABLE = 'ﬁle ｐａｓｓword – ünïcode';
const PASSWORD = 'correct horse battery staple';

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

describe('imported bcrypt hashes are checked in worker threads', { skip: passlibMissing }, () => {
  it('the event loop spends next to nothing of a bcrypt check', async () => {
    const bcrypt = createRequire(import.meta.url)('bcryptjs') as typeof import('bcryptjs');
    const hash = bcrypt.hashSync(PASSWORD, 12);
    // a first check starts the worker (a one-time cost on this thread, larger on a busy machine)
    assert.equal((await verifyPassword(PASSWORD, hash)).valid, true);
    // what the same hash costs on this thread, for comparison
    const t0 = threadCpuUsage();
    bcrypt.hashSync(PASSWORD, hash.slice(0, 29));
    const onThread = threadCpuUsage(t0);
    const t1 = threadCpuUsage();
    assert.equal((await verifyPassword(PASSWORD, hash)).valid, true);
    const checked = threadCpuUsage(t1);
    const ratio = (checked.user + checked.system) / (onThread.user + onThread.system);
    assert.ok(ratio < 0.25, `the main thread did ${Math.round(ratio * 100)}% of a bcrypt hash's work`);
    assert.ok(bcryptWorkers() >= 1, 'a worker computed it');
  });

  it('goes through the bounded queue: refused with 503 and Retry-After when it is full', async () => {
    const hash = independentHashes(PASSWORD).bcrypt_2b!;
    limitPasswordHashing({ concurrency: 1, maxWaiting: 0 });
    try {
      let release!: () => void;
      const occupied = passwordHashing().run(() => new Promise<void>((resolve) => (release = resolve)));
      await assert.rejects(
        verifyPassword(PASSWORD, hash),
        (err) => err instanceof AppError && err.status === 503 && err.headers?.['retry-after'] === '1',
      );
      release();
      await occupied;
      assert.equal((await verifyPassword(PASSWORD, hash)).valid, true);
      assert.ok(bcryptWorkers() <= 1, 'no more workers than hashes may run at once');
    } finally {
      limitPasswordHashing(DEFAULT_HASHING);
    }
  });
});

describe('imported hashes are checked against the password as typed', { skip: passlibMissing }, () => {
  const hashes = passlibMissing ? {} : independentHashes(UNSTABLE);

  it('python3-argon2 hashed the raw password: it verifies as typed, not normalised', async () => {
    assert.notEqual(UNSTABLE.normalize('NFKC'), UNSTABLE);
    const hash = hashes.argon2id;
    assert.ok(hash, 'passlib with python3-argon2 made an argon2id hash');
    assert.deepEqual(await verifyPassword(UNSTABLE, hash), { valid: true, outdated: true });
    // the source system never normalised: its hash is not tried with the normalised password
    assert.equal((await verifyPassword(UNSTABLE.normalize('NFKC'), hash)).valid, false);
    assert.equal((await verifyPassword(UNSTABLE.normalize('NFKC'), hashes.bcrypt_2b!)).valid, false);
    assert.equal((await verifyPassword(UNSTABLE, hashes.bcrypt_2b!)).valid, true);
    assert.equal((await verifyPassword(UNSTABLE, hashes.scrypt!)).valid, true);
  });

  it("an import in exactly the service's own shape verifies as typed, and is replaced", async () => {
    const salt = randomBytes(16);
    const tag = argon2Sync('argon2id', {
      message: UNSTABLE,
      nonce: salt,
      memory: 19_456,
      passes: 2,
      parallelism: 1,
      tagLength: 32,
    });
    const imported = `$argon2id$v=19$m=19456,t=2,p=1$${b64(salt)}$${b64(tag)}`;
    assert.deepEqual(await verifyPassword(UNSTABLE, imported), { valid: true, outdated: true });
  });

  it("the service's own hashes keep their normalisation", async () => {
    const own = await hashPassword(UNSTABLE);
    assert.deepEqual(await verifyPassword(UNSTABLE, own), { valid: true, outdated: false });
    assert.deepEqual(await verifyPassword(UNSTABLE.normalize('NFKC'), own), { valid: true, outdated: false });
    assert.equal((await verifyPassword(`${UNSTABLE}x`, own)).valid, false);
  });
});

/** The derivations done since `before`, by kind. */
function workSince(before: Map<string, number>): Record<string, number> {
  const done: Record<string, number> = {};
  for (const [kind, n] of passwordWork()) if (n > (before.get(kind) ?? 0)) done[kind] = n - (before.get(kind) ?? 0);
  return done;
}

for (const dialect of dialects()) {
  describe(`a sign-in does the same work for every account (${dialect})`, { skip: passlibMissing }, () => {
    let ctx: TestContext;
    let hashes: Record<string, string> = {};
    let address = 0;
    const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

    before(async () => {
      hashes = independentHashes(PASSWORD);
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      await seedUser(ctx, 1, 'own@example.org', { password: PASSWORD });
      await seedUser(ctx, 1, 'none@example.org');
      for (const [eppn, hash] of [
        ['bcrypt@example.org', hashes.bcrypt_2b!],
        ['ssha@example.org', hashes.ldap_salted_sha1!],
      ]) {
        await seedUser(ctx, 1, eppn!);
        await ctx.store.db.updateTable('users').set({ password_hash: hash }).where('eppn', '=', eppn!).execute();
      }
      await seedUser(ctx, 2, 'own@other.org', { password: PASSWORD });
      await seedUser(ctx, 2, 'none@other.org');
      forgetPasswordProfiles();
    });
    after(() => ctx?.close());

    /** A refused sign-in (a wrong password), each from an address of its own; the derivations it did. */
    async function attempt(username: string, password = 'not the password at all') {
      const b = cookieBrowser(ctx.app);
      address += 1;
      const page = await b.get('/account');
      const before = passwordWork();
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/account/login',
        remoteAddress: `192.0.2.${address}`,
        headers: {
          cookie: page.cookies.map((c) => `${c.name}=${c.value}`).join('; '),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: new URLSearchParams({ _csrf: csrfOf(page.body), username, password }).toString(),
      });
      assert.equal(res.statusCode, 401, `${username}: ${res.body.slice(0, 200)}`);
      return workSince(before);
    }

    it("in an organization with imported hashes: one of the service's kind and one of the costliest imported kind", async () => {
      const unknown = await attempt('nobody@example.org');
      assert.deepEqual(Object.values(unknown), [1, 1], JSON.stringify(unknown));
      assert.deepEqual(unknown, { 'argon2id m=19456,t=2,p=1': 1, 'bcrypt 10': 1 });
      for (const username of ['none@example.org', 'own@example.org', 'bcrypt@example.org'])
        assert.deepEqual(await attempt(username), unknown, username);
      // the residual (docs/sign-in.md): an imported hash cheaper than the costliest is checked with the
      // service's kind, without the costliest
      assert.deepEqual(await attempt('ssha@example.org'), { 'argon2id m=19456,t=2,p=1': 1, '{SSHA}': 1 });
    });

    it('with a password NFKC changes, every account does the same two derivations of the service kind', async () => {
      const unknown = await attempt('nobody@example.org', UNSTABLE);
      assert.deepEqual(unknown, { 'argon2id m=19456,t=2,p=1': 2, 'bcrypt 10': 1 });
      for (const username of ['none@example.org', 'own@example.org', 'bcrypt@example.org'])
        assert.deepEqual(await attempt(username, UNSTABLE), unknown, username);
    });

    it('in an organization without imported hashes: one argon2id, as before', async () => {
      const unknown = await attempt('nobody@other.org');
      assert.deepEqual(unknown, { 'argon2id m=19456,t=2,p=1': 1 });
      assert.deepEqual(await attempt('none@other.org'), unknown);
      assert.deepEqual(await attempt('own@other.org'), unknown);
    });

    it('the right password still signs in, and the imported hash is replaced by the service kind', async () => {
      const b = cookieBrowser(ctx.app);
      const res = await b.post('/account/login', {
        _csrf: csrfOf((await b.get('/account')).body),
        username: 'bcrypt@example.org',
        password: PASSWORD,
      });
      assert.equal(res.statusCode, 303, res.body);
      const row = await ctx.store.db
        .selectFrom('users')
        .select('password_hash')
        .where('eppn', '=', 'bcrypt@example.org')
        .executeTakeFirstOrThrow();
      assert.match(row.password_hash!, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    });
  });
}
