// Password hashes: argon2id PHC strings for new passwords, the earlier scrypt format still verified
// (and reported outdated), formats refused, and the bounded queue every hash goes through.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, scryptSync } from 'node:crypto';
import {
  ARGON2ID,
  DEFAULT_HASHING,
  hashPassword,
  limitPasswordHashing,
  passwordHashing,
  verifyPassword,
} from '../../src/directory/passwords.ts';
import { createHashingQueue } from '../../src/directory/hashing-queue.ts';
import { AppError } from '../../src/errors.ts';

const PASSWORD = 'correct horse battery staple';

/** A hash as the service wrote them before argon2id: scrypt$N$r$p$salt$hash, base64url. */
function scryptHash(password: string): string {
  const salt = randomBytes(16);
  const key = scryptSync(password.normalize('NFKC'), salt, 32, { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${1 << 15}$8$1$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

// First in the file: the decoy hash (for users without one) is made on the first check that needs it.
describe('the decoy hash while the queue is full', () => {
  it('is refused like any hash, and made on a later check rather than kept refused', async () => {
    limitPasswordHashing({ concurrency: 1, maxWaiting: 0 });
    try {
      let release!: () => void;
      const occupied = passwordHashing().run(() => new Promise<void>((resolve) => (release = resolve)));
      await assert.rejects(verifyPassword(PASSWORD, null), (err) => err instanceof AppError && err.status === 503);
      release();
      await occupied;
      assert.deepEqual(await verifyPassword(PASSWORD, null), { valid: false, outdated: false });
    } finally {
      limitPasswordHashing(DEFAULT_HASHING);
    }
  });
});

describe('password hashes', () => {
  it('new hashes are argon2id PHC strings with the OWASP parameters, salted afresh each time', async () => {
    const hash = await hashPassword(PASSWORD);
    assert.match(hash, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.equal(ARGON2ID.memory, 19 * 1024);
    assert.notEqual(await hashPassword(PASSWORD), hash);
    assert.deepEqual(await verifyPassword(PASSWORD, hash), { valid: true, outdated: false });
    assert.deepEqual(await verifyPassword(`${PASSWORD}!`, hash), { valid: false, outdated: false });
    // compatibility normalisation: the same password typed in another Unicode form
    const composed = await hashPassword('pässword-ﬁ');
    assert.equal((await verifyPassword('pa\u0308ssword-fi', composed)).valid, true);
  });

  it('the earlier scrypt hashes verify and are reported outdated; a wrong password still fails', async () => {
    const old = scryptHash(PASSWORD);
    assert.deepEqual(await verifyPassword(PASSWORD, old), { valid: true, outdated: true });
    assert.deepEqual(await verifyPassword('wrong password', old), { valid: false, outdated: false });
  });

  it("argon2id hashes of other parameters than the service's own are outdated, stronger ones too", async () => {
    const weak = '$argon2id$v=19$m=4096,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$';
    const { argon2Sync } = await import('node:crypto');
    const tag = (m: number, t: number) =>
      argon2Sync('argon2id', {
        message: PASSWORD,
        nonce: Buffer.from('somesaltsomesalt'),
        memory: m,
        passes: t,
        parallelism: 1,
        tagLength: 32,
      })
        .toString('base64')
        .replace(/=+$/, '');
    assert.deepEqual(await verifyPassword(PASSWORD, `${weak}${tag(4096, 1)}`), { valid: true, outdated: true });
    const strong = `$argon2id$v=19$m=32768,t=3,p=1$c29tZXNhbHRzb21lc2FsdA$${tag(32768, 3)}`;
    // an import: of the password as typed, replaced by the service's own (normalised) at the first sign-in
    assert.deepEqual(await verifyPassword(PASSWORD, strong), { valid: true, outdated: true });
  });

  it('no hash, an unknown format or parameters beyond the bounds never verify', async () => {
    const good = await hashPassword(PASSWORD);
    const tail = good.split('$').slice(-2).join('$');
    for (const stored of [
      null,
      undefined,
      '',
      PASSWORD,
      `$argon2i$v=19$m=19456,t=2,p=1$${tail}`,
      `$argon2id$v=16$m=19456,t=2,p=1$${tail}`,
      `$argon2id$v=19$m=4194304,t=2,p=1$${tail}`, // 4 GiB: an imported hash may not ask for that
      `$argon2id$v=19$m=19456,t=99,p=1$${tail}`,
      `$argon2id$v=19$m=19456,t=2,p=1$${tail}=`,
      `scrypt$${1 << 20}$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`,
      '{SSHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=',
    ])
      assert.deepEqual(await verifyPassword(PASSWORD, stored), { valid: false, outdated: false }, String(stored));
  });
});

describe('the hashing queue', () => {
  it('runs at most `concurrency` at once, in order, and refuses beyond `maxWaiting` with 503 and Retry-After', async () => {
    const queue = createHashingQueue({ concurrency: 2, maxWaiting: 2 });
    const started: number[] = [];
    const finish: (() => void)[] = [];
    const job = (n: number) =>
      queue.run(
        () =>
          new Promise<number>((resolve) => {
            started.push(n);
            finish[n] = () => resolve(n);
          }),
      );
    const jobs = [0, 1, 2, 3].map(job);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1]);
    assert.equal(queue.running, 2);
    assert.equal(queue.waiting, 2);
    await assert.rejects(job(4), (err) => {
      assert.ok(err instanceof AppError);
      assert.equal(err.status, 503);
      assert.equal(err.headers['retry-after'], '1');
      return true;
    });
    finish[1]!();
    await jobs[1];
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1, 2], 'the first in line takes the place that came free');
    finish[0]!();
    finish[2]!();
    await new Promise((r) => setImmediate(r));
    finish[3]!();
    assert.deepEqual(await Promise.all(jobs), [0, 1, 2, 3]);
    assert.equal(queue.running, 0);
    assert.equal(queue.waiting, 0);
  });

  it('a failed job frees its place', async () => {
    const queue = createHashingQueue({ concurrency: 1, maxWaiting: 0 });
    await assert.rejects(
      queue.run(() => Promise.reject(new Error('boom'))),
      /boom/,
    );
    assert.equal(await queue.run(async () => 'next'), 'next');
  });
});
