// Keycloak credentials read as hashes the import takes (src/directory/keycloak-export.ts), and the
// client id and secret a carried-over client keeps (createClient), with their refusals.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { argon2Sync, pbkdf2Sync, randomBytes } from 'node:crypto';
import { keycloakPasswordHash } from '../../src/directory/keycloak-export.ts';
import { verifyPassword } from '../../src/directory/passwords.ts';
import { createClient } from '../../src/clients/index.ts';
import { dialects, startTestApp, type TestContext } from '../helpers.ts';
import { AppError } from '../../src/errors.ts';

const credential = (secret: object, data: object) => ({
  type: 'password',
  secretData: JSON.stringify(secret),
  credentialData: JSON.stringify(data),
});

describe('Keycloak password credentials', () => {
  const salt = randomBytes(16);
  it('pbkdf2, pbkdf2-sha256 and pbkdf2-sha512 (64-byte keys) become passlib PBKDF2 strings that verify', async () => {
    for (const [algorithm, digest] of [
      ['pbkdf2', 'sha1'],
      ['pbkdf2-sha256', 'sha256'],
      ['pbkdf2-sha512', 'sha512'],
    ] as const) {
      const value = pbkdf2Sync('kc password', salt, 1000, 64, digest).toString('base64');
      const r = keycloakPasswordHash(
        credential(
          { value, salt: salt.toString('base64'), additionalParameters: {} },
          { hashIterations: 1000, algorithm },
        ),
      );
      assert.ok('hash' in r, JSON.stringify(r));
      assert.match(r.hash, algorithm === 'pbkdf2' ? /^\$pbkdf2\$1000\$/ : new RegExp(`^\\$${algorithm}\\$1000\\$`));
      assert.deepEqual(await verifyPassword('kc password', r.hash), { valid: true, outdated: true });
      assert.equal((await verifyPassword('kc passwort', r.hash)).valid, false);
    }
  });

  it('argon2 (made here with node:crypto, as Keycloak has no independent generator at hand) becomes a PHC string', async () => {
    const tag = argon2Sync('argon2id', {
      message: 'kc password',
      nonce: salt,
      memory: 7168,
      passes: 5,
      parallelism: 1,
      tagLength: 32,
    });
    const r = keycloakPasswordHash(
      credential(
        { value: tag.toString('base64'), salt: salt.toString('base64') },
        {
          hashIterations: 5,
          algorithm: 'argon2',
          additionalParameters: {
            hashLength: ['32'],
            memory: ['7168'],
            type: ['id'],
            version: ['1.3'],
            parallelism: ['1'],
          },
        },
      ),
    );
    assert.ok('hash' in r);
    assert.deepEqual(await verifyPassword('kc password', r.hash), { valid: true, outdated: true });
  });

  it('the older hashedSaltedValue form is read too', async () => {
    const value = pbkdf2Sync('old form', salt, 2000, 64, 'sha256').toString('base64');
    const r = keycloakPasswordHash({
      type: 'password',
      hashedSaltedValue: value,
      salt: salt.toString('base64'),
      hashIterations: 2000,
      algorithm: 'pbkdf2-sha256',
    });
    assert.ok('hash' in r);
    assert.equal((await verifyPassword('old form', r.hash)).valid, true);
  });

  it('refuses unknown algorithms, malformed credentials and costs beyond the bounds, naming no hash', () => {
    const value = randomBytes(64).toString('base64');
    for (const [cred, reason] of [
      [
        credential({ value, salt: 'c2FsdA==' }, { hashIterations: 1, algorithm: 'md5' }),
        /algorithm 'md5' is not supported/,
      ],
      [credential({ salt: 'c2FsdA==' }, { hashIterations: 1, algorithm: 'pbkdf2-sha256' }), /has no hash/],
      [credential({ value, salt: 'c2FsdA==' }, { hashIterations: '27500', algorithm: 'pbkdf2-sha256' }), /malformed/],
      [
        credential({ value: 'not base64!', salt: 'c2FsdA==' }, { hashIterations: 10, algorithm: 'pbkdf2-sha256' }),
        /malformed/,
      ],
      [
        credential({ value, salt: 'c2FsdA==' }, { hashIterations: 5_000_000, algorithm: 'pbkdf2-sha256' }),
        /iterations 5000000/,
      ],
      [
        credential(
          { value, salt: 'c2FsdA==' },
          { hashIterations: 3, algorithm: 'argon2', additionalParameters: { type: ['d'] } },
        ),
        /argon2 credential parameters/,
      ],
      [{ type: 'password', secretData: '{not json', credentialData: '[]' }, /has no hash/],
    ] as const) {
      const r = keycloakPasswordHash(cred);
      assert.ok('problem' in r, JSON.stringify(r));
      assert.match(r.problem, reason);
      assert.ok(!r.problem.includes(value.slice(0, 12)));
    }
  });
});

for (const dialect of dialects()) {
  describe(`a client carried over with its id and secret (${dialect})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await startTestApp(dialect);
    });
    after(() => ctx?.close());
    const add = (input: object) =>
      createClient(ctx.store, ctx.keys, { name: 'App', redirectUris: ['https://app.example.org/cb'], ...input });
    const refused = (status: number, message: RegExp) => (err: unknown) =>
      err instanceof AppError && err.status === status && message.test(err.message);

    it('keeps the id and secret given; refuses a taken id, a bad id, a short secret and a secret for a public client', async () => {
      const { client, secret } = await add({ clientId: 'legacy-app', secret: 'a-secret-of-32-characters-abcdef' });
      assert.equal(client.clientId, 'legacy-app');
      assert.equal(secret, 'a-secret-of-32-characters-abcdef');
      await assert.rejects(add({ clientId: 'legacy-app' }), refused(409, /already exists/));
      await assert.rejects(add({ clientId: 'has space' }), refused(400, /client id must be/));
      await assert.rejects(add({ clientId: '../etc' }), refused(400, /client id must be/));
      await assert.rejects(add({ clientId: 'x'.repeat(201) }), refused(400, /client id must be/));
      await assert.rejects(add({ clientId: 'short-secret', secret: 'too-short' }), refused(400, /16-512 printable/));
      await assert.rejects(
        add({ clientId: 'spa', public: true, secret: 'a-secret-of-32-characters-abcdef' }),
        refused(400, /public client has no secret/),
      );
      const parallel = await Promise.allSettled([add({ clientId: 'raced' }), add({ clientId: 'raced' })]);
      assert.deepEqual(parallel.map((p) => p.status).sort(), ['fulfilled', 'rejected']);
      const lost = parallel.find((p) => p.status === 'rejected') as PromiseRejectedResult;
      assert.ok(refused(409, /already exists/)(lost.reason), String(lost.reason));
    });
  });
}
