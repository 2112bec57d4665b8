import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { importJWK, SignJWT, type JWK } from 'jose';
import { dialects, startTestApp, seedOrg, seedClient, clientToken, PUBLIC_URL, type TestContext } from '../helpers.ts';

for (const dialect of dialects()) {
  describe(`shared HTTP pieces (${dialect})`, () => {
    let ctx: TestContext;
    let token: string;
    const AUD = `${PUBLIC_URL}/2/passkey`;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      const c = await seedClient(ctx, { scopes: ['passkey.read'] });
      token = await clientToken(ctx, c.clientId, c.secret, 'passkey.read');
    });
    after(() => ctx.close());

    it('unknown paths get a JSON 404 body', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/no/such/path' });
      assert.equal(res.statusCode, 404);
      assert.deepEqual(res.json(), { code: 404, message: 'Not Found' });
      assert.match(String(res.headers['content-type']), /^application\/json/);
    });

    it('every response carries a request id; a sane incoming X-Request-Id is kept', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'lb-1234' } });
      assert.equal(res.headers['x-request-id'], 'lb-1234');
      const res2 = await ctx.app.inject({
        method: 'GET',
        url: '/healthz',
        headers: { 'x-request-id': 'bad id with spaces' },
      });
      assert.match(String(res2.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    });

    it('healthz and readyz answer; readyz is 503 once the database is gone', async () => {
      assert.equal((await ctx.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
      assert.deepEqual((await ctx.app.inject({ method: 'GET', url: '/readyz' })).json(), {
        status: 'ready',
        version: JSON.parse(readFileSync('package.json', 'utf8')).version,
      });
      const other = await startTestApp(dialect);
      await other.store.close();
      const res = await other.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(res.statusCode, 503);
      assert.deepEqual(res.json(), { code: 503, message: 'Database unreachable' });
      await other.app.close();
    });

    describe('bearer JWT verification', () => {
      const activeKey = (alg: 'ES256' | 'RS256') =>
        ctx.keyManager.current().providerJwks.find((k) => k.kid === ctx.keyManager.current().active[alg]) as JWK;
      const sign = async (
        claims: Record<string, unknown>,
        opts: { alg?: string; typ?: string; key?: JWK; kid?: string } = {},
      ) => {
        const alg = opts.alg ?? 'ES256';
        const jwk = opts.key ?? activeKey(alg as 'ES256');
        const { key_ops: _ignored, ...usable } = jwk as JWK & { key_ops?: unknown };
        const now = Math.floor(Date.now() / 1000);
        const payload = {
          iss: PUBLIC_URL,
          aud: AUD,
          sub: 'c1',
          iat: now,
          exp: now + 300,
          client_id: 'c1',
          scope: 'passkey.read',
          jti: randomUUID(),
          ...claims,
        };
        return new SignJWT(payload)
          .setProtectedHeader({ alg, typ: opts.typ ?? 'at+jwt', kid: opts.kid ?? jwk.kid })
          .sign(await importJWK(usable, alg));
      };

      it('accepts a token from the token endpoint', async () => {
        const t = await ctx.verifier.verify(token, AUD);
        assert.ok(t.scopes.has('passkey.read'));
      });

      const rejects = async (t: string, audience = AUD) => {
        await assert.rejects(ctx.verifier.verify(t, audience), (e: { status?: number }) => e.status === 401);
      };

      it('accepts a well-formed token signed with our ES256 key', async () => {
        await ctx.verifier.verify(await sign({}), AUD);
      });
      it('rejects a token signed with our RS256 (ID-token) key', async () =>
        rejects(await sign({}, { alg: 'RS256', key: activeKey('RS256') })));
      it('reads the key of a DPoP-bound token (authenticate() then wants its proof)', async () => {
        const t = await ctx.verifier.verify(await sign({ cnf: { jkt: 'abc' } }), AUD);
        assert.equal(t.jkt, 'abc');
      });
      it('rejects a token bound in a way these APIs cannot check (certificate, malformed cnf)', async () => {
        await rejects(await sign({ cnf: { 'x5t#S256': 'abc' } }));
        await rejects(await sign({ cnf: { jkt: 7 } }));
        await rejects(await sign({ cnf: 'abc' }));
      });
      it('rejects a wrong audience', async () => rejects(token, `${PUBLIC_URL}/userinfo/v1/exists`));
      it('rejects a tampered payload', async () => {
        const [h, p, s] = token.split('.');
        const payload = JSON.parse(Buffer.from(p!, 'base64url').toString());
        payload.scope = 'passkey.read passkey.delete';
        await rejects(`${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${s}`);
      });
      it('rejects a signature by a key that is not ours', async () => {
        const foreign = {
          ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }),
          kid: activeKey('ES256').kid,
          alg: 'ES256',
        } as JWK;
        await rejects(await sign({}, { key: foreign }));
      });
      it('rejects an expired token', async () => rejects(await sign({ exp: Math.floor(Date.now() / 1000) - 120 })));
      it('rejects a token not yet valid', async () =>
        rejects(await sign({ nbf: Math.floor(Date.now() / 1000) + 600 })));
      it('rejects another issuer', async () => rejects(await sign({ iss: 'https://evil.example' })));
      it('rejects a token that is not an access token (typ JWT)', async () => rejects(await sign({}, { typ: 'JWT' })));
      it('rejects alg none', async () => {
        const h = Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url');
        await rejects(`${h}.${token.split('.')[1]}.`);
      });
      it('rejects HS256 keyed with our public key (alg confusion)', async () => {
        const pub = ctx.keyManager.current().publicJwks.find((k) => k.alg === 'ES256')!;
        const secret = new TextEncoder().encode(JSON.stringify(pub));
        const forged = await new SignJWT({ client_id: 'c1', scope: 'passkey.read', jti: 'x' })
          .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid: pub.kid })
          .setIssuer(PUBLIC_URL)
          .setAudience(AUD)
          .setSubject('c1')
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(secret);
        await rejects(forged);
      });
      it('rejects a token without client_id', async () => rejects(await sign({ client_id: undefined })));
      it('rejects an opaque token and garbage', async () => {
        await rejects('moJW0PaIvv8sD9tnkkkrcDaDLADwlebRBTHTNWtRG1x');
        await rejects('a.b.c');
      });
    });
  });
}

describe('housekeeping', () => {
  for (const dialect of dialects()) {
    it(`removes expired authorization artifacts and keeps live ones (${dialect})`, async () => {
      const { sweepExpired } = await import('../../src/store/housekeeping.ts');
      const { upsertPayload, findPayload } = await import('../../src/store/oidc-payloads.ts');
      const ctx = await startTestApp(dialect);
      try {
        const row = (id: string, expires_at: number) => ({
          type: 'Session',
          id,
          payload: '{}',
          grant_id: null,
          user_code: null,
          uid: null,
          expires_at,
        });
        await upsertPayload(ctx.store.db, row('old', Date.now() - 1000));
        await upsertPayload(ctx.store.db, row('live', Date.now() + 60_000));
        assert.equal((await sweepExpired(ctx.store)).payloads, 1);
        assert.equal(await findPayload(ctx.store.db, 'Session', 'id', 'old'), undefined);
        assert.ok(await findPayload(ctx.store.db, 'Session', 'id', 'live'));
      } finally {
        await ctx.close();
      }
    });
  }
});

describe('malformed URLs', () => {
  it('bad percent-encoding gets the JSON error body', async () => {
    const ctx = await startTestApp('sqlite');
    try {
      const res = await ctx.app.inject({ method: 'GET', url: '/check_single/%E0%A4%A' });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json(), { code: 400, message: 'Malformed request URL' });
    } finally {
      await ctx.close();
    }
  });
});

describe('request logs', () => {
  it('log routes with parameters by their pattern and never log query strings', async () => {
    const { PassThrough } = await import('node:stream');
    const { migratedDatabase, testConfig, TEST_SECRET } = await import('../helpers.ts');
    const { openStore } = await import('../../src/store/index.ts');
    const { keyring } = await import('../../src/crypto.ts');
    const { buildApp } = await import('../../src/app.ts');
    const db = await migratedDatabase('sqlite');
    const store = await openStore(db.url);
    let logged = '';
    const stream = new PassThrough();
    stream.on('data', (d) => (logged += d));
    const { app } = await buildApp({
      config: testConfig(db.url, { LOG_LEVEL: 'info' }),
      store,
      keys: keyring(TEST_SECRET),
      logStream: stream,
    });
    try {
      await app.inject({ method: 'GET', url: '/userinfo/v1/exists/nin%3A01017012345' });
      await app.inject({ method: 'GET', url: '/2/passkey/1?eppn=alice%40example.org' });
      await app.inject({ method: 'GET', url: '/.well-known/openid-configuration?hint=carol%40example.org' });
      assert.match(logged, /"url":"\/userinfo\/v1\/exists\/:userid_sec"/);
      assert.match(logged, /"url":"\/\.well-known\/openid-configuration"/);
      assert.doesNotMatch(logged, /01017012345|alice|carol/);
    } finally {
      await app.close();
      await store.close();
      await db.drop();
    }
  });

  it('responses of the authorization server carry the request id too', async () => {
    const ctx = await startTestApp('sqlite');
    try {
      const res = await ctx.app.inject({ method: 'GET', url: '/openid/jwks', headers: { 'x-request-id': 'lb-77' } });
      assert.equal(res.headers['x-request-id'], 'lb-77');
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      // PUBLIC_URL of the tests is https
      assert.equal(res.headers['strict-transport-security'], 'max-age=31536000');
      assert.equal(
        (await ctx.app.inject({ method: 'GET', url: '/healthz' })).headers['strict-transport-security'],
        'max-age=31536000',
      );
    } finally {
      await ctx.close();
    }
  });
});

describe('client IP behind proxies', () => {
  it('a client cannot choose its IP with X-Forwarded-For', async () => {
    const { default: Fastify } = await import('fastify');
    const { trustProxy } = await import('../../src/http/client-address.ts');
    const { loadConfig } = await import('../../src/config.ts');
    const cases: [string, string][] = [
      ['false', '10.0.0.2'],
      ['1', '10.0.0.1'],
      ['2', '6.6.6.6'],
      ['10.0.0.2', '10.0.0.1'],
      ['10.0.0.0/8', '6.6.6.6'],
    ];
    for (const [setting, expected] of cases) {
      const app = Fastify({ trustProxy: trustProxy(loadConfig({ TRUST_PROXY: setting }).trustProxy) });
      app.get('/ip', async (request) => ({ ip: request.ip }));
      const res = await app.inject({
        method: 'GET',
        url: '/ip',
        remoteAddress: '10.0.0.2',
        headers: { 'x-forwarded-for': '6.6.6.6, 10.0.0.1' },
      });
      assert.equal(res.json().ip, expected, `TRUST_PROXY=${setting}`);
      await app.close();
    }
  });
});

describe('ids from requests that cannot name a stored row', () => {
  for (const dialect of dialects()) {
    it(`a NUL byte in a token or code is an OAuth error, not a 500 (${dialect})`, async () => {
      const ctx = await startTestApp(dialect);
      try {
        const form = { 'content-type': 'application/x-www-form-urlencoded' };
        const userinfo = await ctx.app.inject({
          method: 'POST',
          url: '/openid/userinfo',
          headers: form,
          payload: 'access_token=abc%00def',
        });
        assert.equal(userinfo.statusCode, 401);
        const c = await seedClient(ctx, { scopes: ['openid'], redirectUris: ['https://rp.example.org/cb'] });
        const token = await ctx.app.inject({
          method: 'POST',
          url: '/oauth/token',
          headers: { ...form, authorization: `Basic ${Buffer.from(`${c.clientId}:${c.secret}`).toString('base64')}` },
          payload: 'grant_type=authorization_code&code=a%00b&redirect_uri=https%3A%2F%2Frp.example.org%2Fcb',
        });
        assert.equal(token.statusCode, 400);
        assert.equal(token.json().error, 'invalid_grant');
      } finally {
        await ctx.close();
      }
    });
  }
});
