// The formats of imported password hashes (src/directory/passwords.ts): hashes made by passlib and
// python3-bcrypt verify with the right password and fail with a wrong one, are reported outdated
// (so a sign-in replaces them with the service's own argon2id, argon2id imports too), and malformed hashes or parameters beyond the bounds
// are refused with a reason that never repeats the hash.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, pbkdf2Sync, randomBytes } from 'node:crypto';
import { BOUNDS, passwordHashProblem, verifyPassword } from '../../src/directory/passwords.ts';
import { independentHashes, passlibMissing } from './imported-hashes.ts';

const PASSWORD = 'Tr0ub4dor & 3 – ünïcode';

describe('imported password hashes', { skip: passlibMissing }, () => {
  const hashes = passlibMissing ? {} : independentHashes(PASSWORD);

  it('covers every format the import documents', () => {
    for (const name of [
      'bcrypt_2a',
      'bcrypt_2b',
      'bcrypt_2y',
      'django_pbkdf2_sha256',
      'django_pbkdf2_sha1',
      'pbkdf2_sha1',
      'pbkdf2_sha256',
      'pbkdf2_sha512',
      'scrypt',
      'ldap_salted_sha1',
      'ldap_salted_sha512',
    ])
      assert.ok(hashes[name], name);
    assert.ok(hashes.argon2id ?? hashes.argon2id_node);
  });

  for (const [name, hash] of Object.entries(hashes)) {
    it(`${name}: accepted; the right password verifies (outdated), a wrong one does not`, async () => {
      assert.equal(passwordHashProblem(hash), undefined);
      const right = await verifyPassword(PASSWORD, hash);
      assert.equal(right.valid, true);
      assert.equal(right.outdated, true, "every imported hash is replaced by the service's own");
      assert.deepEqual(await verifyPassword(`${PASSWORD}x`, hash), { valid: false, outdated: false });
      assert.deepEqual(await verifyPassword(PASSWORD.slice(0, -1), hash), { valid: false, outdated: false });
    });
  }

  it('a hash changed in one character of its value no longer verifies', async () => {
    for (const name of ['bcrypt_2b', 'django_pbkdf2_sha256', 'pbkdf2_sha512', 'scrypt', 'ldap_salted_sha1']) {
      const hash = hashes[name]!;
      const i = hash.length - 3;
      const flipped = hash.slice(0, i) + (hash[i] === 'A' ? 'B' : 'A') + hash.slice(i + 1);
      const verdict = await verifyPassword(PASSWORD, flipped);
      assert.equal(verdict.valid, false, name);
    }
  });
});

describe('bounds and malformed hashes', () => {
  const salt = randomBytes(16);
  const ab64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '').replace(/\+/g, '.');
  const pbkdf2 = (digest: string, n: number) =>
    `$pbkdf2-${digest}$${n}$${ab64(salt)}$${ab64(pbkdf2Sync('pw', salt, 1, digest === 'sha512' ? 64 : 32, digest))}`;
  const refused: [string, string, RegExp][] = [
    ['bcrypt cost 13', `$2b$13$${'a'.repeat(53)}`, /bcrypt cost 13 is not within 4-12/],
    ['bcrypt cost 31', `$2a$31$${'a'.repeat(53)}`, /bcrypt cost 31/],
    ['bcrypt cut short', `$2b$10$${'a'.repeat(40)}`, /malformed bcrypt/],
    ['bcrypt 2x', `$2x$10$${'a'.repeat(53)}`, /malformed bcrypt/],
    ['PBKDF2-SHA-256 beyond its bound', pbkdf2('sha256', 1_000_001), /PBKDF2-sha256 iterations 1000001 is not within/],
    ['PBKDF2-SHA-512 beyond its bound', pbkdf2('sha512', 600_001), /PBKDF2-sha512 iterations 600001/],
    ['PBKDF2 with 0 iterations', pbkdf2('sha256', 0), /iterations 0/],
    ['Django beyond its bound', `pbkdf2_sha256$2000000$salt$${'A'.repeat(43)}=`, /iterations 2000000/],
    ['Django with a short hash', `pbkdf2_sha256$1000$salt$${'A'.repeat(27)}=`, /must be 32 bytes/],
    ['scrypt with 128 MiB', `$scrypt$ln=17,r=8,p=1$${ab64(salt)}$${'A'.repeat(43)}`, /scrypt memory/],
    ['scrypt with p 16', `$scrypt$ln=16,r=8,p=16$${ab64(salt)}$${'A'.repeat(43)}`, /scrypt work/],
    ['argon2 v=16', `$argon2id$v=16$m=19456,t=2,p=1$${'A'.repeat(22)}$${'A'.repeat(43)}`, /version 16/],
    [
      'argon2 at 256 MiB × 16',
      `$argon2i$v=19$m=262144,t=16,p=1$${'A'.repeat(22)}$${'A'.repeat(43)}`,
      /memory × passes/,
    ],
    ['argon2 above 256 MiB', `$argon2id$v=19$m=524288,t=1,p=1$${'A'.repeat(22)}$${'A'.repeat(43)}`, /memory 524288/],
    ['{SSHA} without a salt', `{SSHA}${createHash('sha1').update('pw').digest('base64')}`, /wrong length/],
    ['{SHA} of the wrong size', `{SHA}${Buffer.alloc(24).toString('base64')}`, /wrong length/],
    ['MD5 crypt', '$1$saltsalt$abcdefghijklmnopqrstuv', /no accepted format/],
    ['SHA-512 crypt', `$6$rounds=5000$salt$${'a'.repeat(86)}`, /no accepted format/],
    ['{CRYPT}', '{CRYPT}$1$abc$def', /no accepted format/],
    ['plain text', 'hunter2-hunter2', /no accepted format/],
    ['too long', `$pbkdf2-sha256$1000$${'A'.repeat(600)}`, /longer than 512/],
  ];
  for (const [what, hash, reason] of refused) {
    it(`refuses ${what}, without repeating the hash`, async () => {
      const problem = passwordHashProblem(hash);
      assert.ok(problem, what);
      assert.match(problem, reason);
      const value = hash.split('$').at(-1)!;
      if (value.length > 8) assert.ok(!problem.includes(value), 'the reason must not carry the hash');
      assert.deepEqual(await verifyPassword('pw', hash), { valid: false, outdated: false });
    });
  }

  it('accepts hashes at the bounds, and they verify', async () => {
    const n = BOUNDS.pbkdf2Iterations.sha512;
    const at = `$pbkdf2-sha512$${n}$${ab64(salt)}$${ab64(pbkdf2Sync('pw', salt, n, 64, 'sha512'))}`;
    assert.equal(passwordHashProblem(at), undefined);
    assert.deepEqual(await verifyPassword('pw', at), { valid: true, outdated: true });
    const ssha256 = `{ssha256}${Buffer.concat([createHash('sha256').update('pw').update(salt).digest(), salt]).toString('base64')}`;
    assert.deepEqual(await verifyPassword('pw', ssha256), { valid: true, outdated: true }, 'scheme names in any case');
  });
});
