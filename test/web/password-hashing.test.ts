// Password sign-in and the hash behind it: an earlier scrypt hash is replaced by argon2id on the next
// successful sign-in (in the one function that sets a password hash, audited); a burst beyond the
// hashing queue's bound is refused with 503 and Retry-After on a page that says so, without
// counting against the user; token requests keep flowing while hashes run.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, scryptSync } from 'node:crypto';
import {
  clientToken,
  cookieBrowser,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { hashPassword, passwordHashing } from '../../src/directory/passwords.ts';
import { setPassword } from '../../src/directory/index.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { listAuditEvents } from '../../src/store/audit.ts';

const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://rp.example.test/callback';

/** A hash as the service wrote them before argon2id: scrypt$N$r$p$salt$hash, base64url. */
function scryptHash(password: string): string {
  const salt = randomBytes(16);
  const key = scryptSync(password.normalize('NFKC'), salt, 32, { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
  return `scrypt$${1 << 15}$8$1$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

/** Opens a sign-in page for the client in a fresh browser; posts the password form. */
async function passwordSignIn(ctx: TestContext, clientId: string, username: string, password: string) {
  const b = cookieBrowser(ctx.app);
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: 'code',
    scope: 'openid',
  });
  const start = await b.get(`/oauth/authorization?${query}`);
  assert.equal(start.statusCode, 303);
  const location = start.headers.location as string;
  const page = await b.get(new URL(location, 'https://x').pathname);
  assert.equal(page.statusCode, 200);
  return b.post(`${new URL(location, 'https://x').pathname}/login`, { _csrf: csrfOf(page.body), username, password });
}

const storedHash = async (ctx: TestContext, eppn: string) => (await findUserByEppn(ctx.store.db, eppn))!.password_hash!;

for (const dialect of dialects()) {
  describe(`password hashing at sign-in (${dialect})`, () => {
    let ctx: TestContext;
    let rp: { clientId: string };

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      await seedUser(ctx, 1, 'old@example.org', { password: PASSWORD });
      rp = await seedClient(ctx, { name: 'Portal', redirectUris: [REDIRECT], firstParty: true });
    });
    after(() => ctx.close());

    it('stores argon2id for new passwords', async () => {
      assert.match(await storedHash(ctx, 'ada@example.org'), /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    });

    it('replaces a scrypt hash by argon2id on the next sign-in, once, audited; a wrong password still fails', async () => {
      const old = scryptHash(PASSWORD);
      await ctx.store.db
        .updateTable('users')
        .set({ password_hash: old })
        .where('eppn', '=', 'old@example.org')
        .execute();
      const wrong = await passwordSignIn(ctx, rp.clientId, 'old@example.org', 'not the password');
      assert.equal(wrong.statusCode, 401);
      assert.equal(await storedHash(ctx, 'old@example.org'), old, 'a failed sign-in changes nothing');
      assert.equal((await passwordSignIn(ctx, rp.clientId, 'old@example.org', PASSWORD)).statusCode, 303);
      const upgraded = await storedHash(ctx, 'old@example.org');
      assert.match(upgraded, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      const rehashes = () => listAuditEvents(ctx.store.db, { action: 'password.rehash', after: 0 });
      assert.deepEqual(
        (await rehashes()).map((e) => e.eppn),
        ['old@example.org'],
      );
      const changed = await ctx.store.db
        .selectFrom('events')
        .select('type')
        .where('type', '=', 'password.changed')
        .execute();
      const before = changed.length;
      assert.equal((await passwordSignIn(ctx, rp.clientId, 'old@example.org', PASSWORD)).statusCode, 303);
      assert.equal(await storedHash(ctx, 'old@example.org'), upgraded, 'a current hash is kept');
      assert.equal((await rehashes()).length, 1);
      assert.equal((await passwordSignIn(ctx, rp.clientId, 'old@example.org', `${PASSWORD}?`)).statusCode, 401);
      const after = await ctx.store.db
        .selectFrom('events')
        .select('type')
        .where('type', '=', 'password.changed')
        .execute();
      assert.equal(after.length, before, 'a rehash is no password change for the event receivers');
    });

    it('a rehash does not overwrite a password changed meanwhile', async () => {
      const current = await storedHash(ctx, 'ada@example.org');
      const written = await setPassword(ctx.store, 'ada@example.org', PASSWORD, {
        action: 'password.rehash',
        replacing: scryptHash(PASSWORD),
      });
      assert.equal(written, false);
      assert.equal(await storedHash(ctx, 'ada@example.org'), current);
    });
  });

  describe(`the hashing queue's bound at sign-in (${dialect})`, () => {
    let ctx: TestContext;
    let rp: { clientId: string };

    before(async () => {
      ctx = await startTestApp(dialect, { PASSWORD_HASH_CONCURRENCY: '1', PASSWORD_HASH_QUEUE: '0' });
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      rp = await seedClient(ctx, { name: 'Portal', redirectUris: [REDIRECT], firstParty: true });
    });
    after(() => ctx.close());

    it('refuses a sign-in beyond the bound with 503, Retry-After and a page saying so, not counting it', async () => {
      let release!: () => void;
      const occupied = passwordHashing().run(() => new Promise<void>((resolve) => (release = resolve)));
      try {
        // more than the account's limit of attempts (10): refusals the password was not checked for do not count
        for (let i = 0; i < 12; i++) {
          const refused = await passwordSignIn(ctx, rp.clientId, 'ada@example.org', PASSWORD);
          assert.equal(refused.statusCode, 503);
          assert.equal(refused.headers['retry-after'], '1');
          assert.match(refused.headers['content-type'] as string, /^text\/html/);
          assert.match(refused.body, /Too many people are signing in right now/);
          assert.match(refused.body, /Wait a moment and try again/);
        }
      } finally {
        release();
        await occupied;
      }
      assert.equal((await passwordSignIn(ctx, rp.clientId, 'ada@example.org', PASSWORD)).statusCode, 303);
    });
  });

  describe(`token requests while passwords are hashed (${dialect})`, () => {
    let ctx: TestContext;
    let api: { clientId: string; secret: string };

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      api = await seedClient(ctx, { name: 'API', scopes: ['passkey.read'], orgs: [1] });
      await clientToken(ctx, api.clientId, api.secret, 'passkey.read'); // the first one loads what tokens need
    });
    after(() => ctx.close());

    it('do not wait behind the hashes: many tokens are issued while few hashes finish', async () => {
      // Hashes are kept coming, six asked for at all times, while tokens are requested one after the
      // other. Were hashes free to take every thread of libuv's pool, each token's signature would
      // wait behind the hashes already there: at least one would finish per token.
      let finished = 0;
      let stop = false;
      const worker = async () => {
        while (!stop) {
          await hashPassword(PASSWORD);
          finished += 1;
        }
      };
      const workers = Array.from({ length: 6 }, worker);
      await new Promise((r) => setTimeout(r, 100)); // the hashes are under way
      const before = finished;
      const tokens = 20;
      for (let i = 0; i < tokens; i++) await clientToken(ctx, api.clientId, api.secret, 'passkey.read');
      const during = finished - before;
      stop = true;
      await Promise.all(workers);
      assert.ok(during < tokens / 2, `${during} hashes finished while ${tokens} tokens were issued`);
    });
  });
}
