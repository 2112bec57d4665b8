// Several instances on one database: concurrent start-up migrates once, tokens minted by one
// verify on another, rotated keys reach every instance, SIGTERM drains and exits cleanly.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { dialects, freshDatabase, cli, spawnService, type ServiceProcess, type TestDatabase } from '../helpers.ts';

async function token(service: ServiceProcess, id: string, secret: string): Promise<string> {
  const res = await fetch(`${service.url}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials&scope=passkey.read',
  });
  assert.equal(res.status, 200);
  return (await res.json()).access_token;
}

async function jwks(service: ServiceProcess) {
  return (await fetch(`${service.url}/openid/jwks`)).json();
}

for (const dialect of dialects().filter((d) => d === 'postgres')) {
  describe('two instances sharing one PostgreSQL', () => {
    let db: TestDatabase;
    let a: ServiceProcess;
    let b: ServiceProcess;
    const PUBLIC = 'https://idp.shared.test';
    before(async () => {
      db = await freshDatabase(dialect);
      // Both start at the same moment on an empty database.
      [a, b] = await Promise.all([
        spawnService({ DATABASE_URL: db.url, PUBLIC_URL: PUBLIC, KEY_REFRESH_INTERVAL: '1' }),
        spawnService({ DATABASE_URL: db.url, PUBLIC_URL: PUBLIC, KEY_REFRESH_INTERVAL: '1' }),
      ]);
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await db.drop();
    });

    it('both migrated cleanly and share one key set', async () => {
      assert.doesNotMatch(a.stderr() + b.stderr(), /error/i);
      const [ka, kb] = await Promise.all([jwks(a), jwks(b)]);
      assert.equal(ka.keys.length, 2);
      assert.deepEqual(ka, kb);
    });

    it("a token from one instance verifies against the other instance's JWKS", async () => {
      assert.equal(
        (await cli(db.url, ['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example'])).code,
        0,
      );
      const c = JSON.parse(
        (await cli(db.url, ['client', 'add', '--name', 'API', '--scopes', 'passkey.read', '--orgs', '1', '--json']))
          .out,
      );
      const t = await token(a, c.client_id, c.client_secret);
      const { payload } = await jwtVerify(t, createLocalJWKSet(await jwks(b)), {
        issuer: PUBLIC,
        audience: `${PUBLIC}/2/passkey`,
        typ: 'at+jwt',
      });
      assert.equal(payload.client_id, c.client_id);
      // and the other way round
      const t2 = await token(b, c.client_id, c.client_secret);
      await jwtVerify(t2, createLocalJWKSet(await jwks(a)), { issuer: PUBLIC, audience: `${PUBLIC}/2/passkey` });
    });

    it('keys rotate: both publish the new key at once, sign with it after activation, keep the old one', async () => {
      const c = JSON.parse(
        (await cli(db.url, ['client', 'add', '--name', 'API 2', '--scopes', 'passkey.read', '--json'])).out,
      );
      const oldToken = await token(a, c.client_id, c.client_secret);
      const oldKid = decodeProtectedHeader(oldToken).kid;
      const rotated = JSON.parse((await cli(db.url, ['keys', 'rotate', '--json'], '')).out);
      const newKid = rotated.find((k: { alg: string }) => k.alg === 'ES256').kid;
      // the CLI runs with the default refresh interval (activation after 120 s): move activation
      // to now so this test need not wait; publication must already have happened by then.
      await new Promise((r) => setTimeout(r, 2500));
      for (const s of [a, b])
        assert.ok(
          (await jwks(s)).keys.some((k: { kid: string }) => k.kid === newKid),
          'new key published before it signs',
        );
      assert.equal(
        decodeProtectedHeader(await token(b, c.client_id, c.client_secret)).kid,
        oldKid,
        'old key still signs until activation',
      );
      const { openStore } = await import('../../src/store/index.ts');
      const store = await openStore(db.url);
      await store.db
        .updateTable('signing_keys')
        .set({ activates_at: Date.now() - 1 })
        .where(
          'kid',
          'in',
          rotated.map((k: { kid: string }) => k.kid),
        )
        .execute();
      await store.db
        .updateTable('signing_keys')
        .set({ retired_at: Date.now() - 1 })
        .where(
          'kid',
          'not in',
          rotated.map((k: { kid: string }) => k.kid),
        )
        .execute();
      await store.close();
      await new Promise((r) => setTimeout(r, 2500));
      for (const s of [a, b]) {
        const t = await token(s, c.client_id, c.client_secret);
        assert.equal(decodeProtectedHeader(t).kid, newKid);
        const published = await jwks(s);
        assert.ok(
          published.keys.some((k: { kid: string }) => k.kid === oldKid),
          'old key still published',
        );
        await jwtVerify(oldToken, createLocalJWKSet(published), { issuer: PUBLIC, audience: `${PUBLIC}/2/passkey` });
      }
    });

    it('both serve byte-identical JWKS, ordered by algorithm, newest activation, then kid', async () => {
      const { openStore } = await import('../../src/store/index.ts');
      const store = await openStore(db.url);
      const rows = await store.db.selectFrom('signing_keys').select(['kid', 'alg', 'activates_at']).execute();
      await store.close();
      const bodies = await Promise.all(
        [a, b, a, b].map(async (s) => {
          const res = await fetch(`${s.url}/openid/jwks`);
          assert.equal(res.status, 200);
          return res.text();
        }),
      );
      for (const body of bodies.slice(1))
        assert.equal(body, bodies[0], 'every answer of every instance, byte for byte');
      const published = (JSON.parse(bodies[0]!) as { keys: { kid: string; alg: string }[] }).keys;
      assert.ok(published.length >= 4, 'the rotated keys and their predecessors');
      const expected = rows
        .filter((r) => published.some((k) => k.kid === r.kid))
        .sort((x, y) =>
          x.alg !== y.alg ? (x.alg < y.alg ? -1 : 1) : y.activates_at - x.activates_at || (x.kid < y.kid ? -1 : 1),
        )
        .map((r) => `${r.alg} ${r.kid}`);
      assert.deepEqual(
        published.map((k) => `${k.alg} ${k.kid}`),
        expected,
      );
    });
  });
}

describe('graceful shutdown', () => {
  it('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    const { connect } = await import('node:net');
    const db = await freshDatabase('sqlite');
    const s = await spawnService({ DATABASE_URL: db.url });
    try {
      const { port } = new URL(s.url);
      const socket = connect(Number(port), '127.0.0.1');
      const closed = new Promise((r) => socket.once('close', r));
      await new Promise((r) => socket.once('connect', r));
      let response = '';
      socket.on('data', (d) => (response += d.toString()));
      const body = 'grant_type=client_credentials&scope=passkey.read';
      // The headers with "expect: 100-continue": the service answers "100 Continue" once it has
      // parsed them and started the request, which is then in flight when SIGTERM arrives.
      socket.write(
        `POST /oauth/token HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: ${body.length}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n`,
      );
      for (let i = 0; !response.includes('\r\n\r\n'); i++) {
        assert.ok(i < 300, 'the service answers 100 Continue');
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(response, /^HTTP\/1\.1 100 Continue\r\n\r\n$/);
      const exit = s.stop('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      socket.write(body);
      await closed;
      assert.match(
        response,
        /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 (400|401) /,
        'the in-flight request got its complete answer',
      );
      assert.equal(await exit, 0, s.stderr());
      // and new connections are refused afterwards
      await assert.rejects(fetch(`${s.url}/healthz`));
    } finally {
      await s.stop();
      await db.drop();
    }
  });
});
