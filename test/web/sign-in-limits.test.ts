// Sign-in rate limits through HTTP: the per-account limit holds against parallel guesses, the
// per-IP limit counts failures only and keys IPv6 clients by their /64.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, sign } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  PUBLIC_URL,
  p256Credential,
  type TestContext,
  type TestCredential,
  clearOfWindowEnd,
} from '../helpers.ts';
import { clientKey } from '../../src/http/rate-limit.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import type { User } from '../../src/store/directory.ts';

const PASSWORD = 'correct horse battery staple';
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

describe('clientKey', () => {
  it('keeps IPv4, unwraps IPv4-mapped IPv6 and keys IPv6 by its /64', () => {
    assert.equal(clientKey('192.0.2.7'), '192.0.2.7');
    assert.equal(clientKey('::ffff:192.0.2.7'), '192.0.2.7');
    assert.equal(clientKey('::FFFF:c000:0207'), '192.0.2.7');
    assert.equal(clientKey('2001:db8:1:2::1'), '2001:db8:1:2::/64');
    assert.equal(clientKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
    assert.equal(clientKey('2001:DB8:1:2:a:b:c:d'), '2001:db8:1:2::/64');
    assert.notEqual(clientKey('2001:db8:1:3::1'), clientKey('2001:db8:1:2::1'));
    assert.equal(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(clientKey('::1'), '0:0:0:0::/64');
  });
});

/** A browser with its own cookies, at one client address. */
function browser(ctx: TestContext, remoteAddress = '127.0.0.1') {
  const jar = new Map<string, string>();
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) jar.set(c.name, c.value);
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    jar,
    async get(url: string) {
      const res = await ctx.app.inject({ method: 'GET', url, remoteAddress, headers: { cookie: cookie() } });
      remember(res);
      return res;
    },
    async post(url: string, form: Record<string, string>, headers: Record<string, string> = {}, from = remoteAddress) {
      const res = await ctx.app.inject({
        method: 'POST',
        url,
        remoteAddress: from,
        headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload: new URLSearchParams(form).toString(),
      });
      remember(res);
      return res;
    },
  };
}

async function signInForm(b: ReturnType<typeof browser>) {
  return csrfOf((await b.get('/account')).body);
}

const tally = (responses: LightMyRequestResponse[]) => {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.statusCode] = (counts[r.statusCode] ?? 0) + 1;
  return counts;
};

function assertion(key: TestCredential, user: User, challenge: string, counter: number): string {
  const cd = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge, origin: PUBLIC_URL, crossOrigin: false }));
  const counterBytes = Buffer.alloc(4);
  counterBytes.writeUInt32BE(counter);
  const authData = Buffer.concat([
    createHash('sha256').update(new URL(PUBLIC_URL).hostname).digest(),
    Buffer.from([0x05]),
    counterBytes,
  ]);
  const signature = sign('sha256', Buffer.concat([authData, createHash('sha256').update(cd).digest()]), key.privateKey);
  const id = key.id.toString('base64url');
  return JSON.stringify({
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: cd.toString('base64url'),
      authenticatorData: authData.toString('base64url'),
      signature: signature.toString('base64url'),
      userHandle: Buffer.from(user.sub).toString('base64url'),
    },
  });
}

for (const dialect of dialects()) {
  describe(`sign-in rate limits (${dialect})`, () => {
    let ctx: TestContext;
    let ada: User;
    let key: TestCredential;

    before(async () => {
      await clearOfWindowEnd(15 * 60 * 1000, 60_000); // the sign-in limits' window
      ctx = await startTestApp(dialect, { LOGIN_RATE_LIMIT_ACCOUNT: '5', LOGIN_RATE_LIMIT_IP: '3' });
      await seedOrg(ctx);
      ada = await seedUser(ctx, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      await seedUser(ctx, 1, 'grace@example.org', { name: 'Grace', password: PASSWORD });
      key = p256Credential();
      await insertPasskeys(ctx.store.db, [
        {
          user_id: ada.id,
          org_id: 1,
          credential_id: key.id,
          public_key: key.cose,
          sign_count: 1,
          transports: '[]',
          label: 'Laptop',
          aaguid: ZERO_AAGUID,
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: Date.now(),
          last_used_at: null,
        },
      ]);
    });
    after(() => ctx.close());

    it('checks at most the account limit of passwords when guesses arrive all at once', async () => {
      // Each guess from its own address, so only the per-account limit (5) is in play.
      const b = browser(ctx);
      const csrf = await signInForm(b);
      const responses = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          b.post(
            '/account/login',
            { _csrf: csrf, username: 'grace@example.org', password: `wrong-${i}` },
            {},
            `198.51.100.${i + 1}`,
          ),
        ),
      );
      const counts = tally(responses);
      assert.ok((counts[401] ?? 0) <= 5, `at most 5 passwords checked: ${JSON.stringify(counts)}`);
      assert.equal((counts[401] ?? 0) + (counts[429] ?? 0), 15, JSON.stringify(counts));
      const right = await b.post(
        '/account/login',
        { _csrf: csrf, username: 'grace@example.org', password: PASSWORD },
        {},
        '198.51.100.99',
      );
      assert.equal(right.statusCode, 429, 'the account stays locked for the window');
      assert.ok(Number(right.headers['retry-after']) > 0);
    });

    it('counts every address of an IPv6 /64, and IPv4-mapped addresses as IPv4, against one budget', async () => {
      const b = browser(ctx);
      const csrf = await signInForm(b);
      const statuses: number[] = [];
      for (let i = 1; i <= 5; i++) {
        const res = await b.post(
          '/account/login',
          { _csrf: csrf, username: `nobody${i}@example.org`, password: 'wrong-password' },
          {},
          `2001:db8:7:7::${i.toString(16)}`,
        );
        statuses.push(res.statusCode);
      }
      assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
      const elsewhere = await b.post(
        '/account/login',
        { _csrf: csrf, username: 'nobody@example.org', password: 'wrong-password' },
        {},
        '2001:db8:7:8::1',
      );
      assert.equal(elsewhere.statusCode, 401, 'the next /64 has its own budget');

      const mapped: number[] = [];
      for (const from of ['203.0.113.9', '::ffff:203.0.113.9', '203.0.113.9', '::ffff:203.0.113.9']) {
        mapped.push(
          (
            await b.post(
              '/account/login',
              { _csrf: csrf, username: 'nobody@example.org', password: 'wrong-password' },
              {},
              from,
            )
          ).statusCode,
        );
      }
      assert.deepEqual(mapped, [401, 401, 401, 429]);
    });

    it('does not count successful password sign-ins against the address, only failures', async () => {
      const from = '192.0.2.50';
      for (let i = 0; i < 6; i++) {
        const b = browser(ctx, from);
        const res = await b.post('/account/login', {
          _csrf: await signInForm(b),
          username: 'ada@example.org',
          password: PASSWORD,
        });
        assert.equal(res.statusCode, 303, `sign-in ${i + 1} of many behind one address`);
      }
      const b = browser(ctx, from);
      const csrf = await signInForm(b);
      const failures: number[] = [];
      for (let i = 0; i < 4; i++)
        failures.push(
          (await b.post('/account/login', { _csrf: csrf, username: `x${i}@example.org`, password: 'wrong-password' }))
            .statusCode,
        );
      assert.deepEqual(failures, [401, 401, 401, 429]);
    });

    it('does not count successful passkey sign-ins against the address', async () => {
      const from = '192.0.2.60';
      for (let i = 0; i < 6; i++) {
        const b = browser(ctx, from);
        const csrf = await signInForm(b);
        const options = await b.post('/account/passkey/options', {}, { 'x-csrf-token': csrf });
        assert.equal(options.statusCode, 200);
        const res = await b.post('/account/passkey', {
          _csrf: csrf,
          response: assertion(key, ada, options.json().challenge, 10 + i),
        });
        assert.equal(res.statusCode, 303, `passkey sign-in ${i + 1} of many behind one address`);
        assert.equal(res.headers.location, '/account');
      }
      const b = browser(ctx, from);
      const csrf = await signInForm(b);
      const failures: number[] = [];
      for (let i = 0; i < 4; i++)
        failures.push((await b.post('/account/passkey', { _csrf: csrf, response: '{}' })).statusCode);
      assert.deepEqual(failures, [401, 401, 401, 429]);
    });
  });
}
