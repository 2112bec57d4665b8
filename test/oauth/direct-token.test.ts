// The token, introspection and revocation endpoints over real HTTP, where plain POSTs take the direct
// route (src/http/direct.ts) instead of Fastify's: the answer is the one Fastify's path gives
// (app.inject() takes that path), and the service's own parts are all there: the request id, the
// request log lines, the request metrics, the client address under TRUST_PROXY in the audit trail.
// Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { buildApp, type App } from '../../src/app.ts';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import {
  basicAuth,
  dialects,
  migratedDatabase,
  seedClient,
  testConfig,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { scrape, total } from '../foundation/metrics-scrape.ts';
import type { Config } from '../../src/config.ts';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

interface Line {
  msg: string;
  reqId?: string;
  req?: Record<string, unknown>;
  res?: Record<string, unknown>;
}

for (const dialect of dialects()) {
  describe(`token endpoints over HTTP, beside Fastify's path (${dialect})`, () => {
    let built: App;
    let store: Store;
    let database: TestDatabase;
    let url: string;
    let logged = '';
    let client: { clientId: string; secret: string };
    let config: Config;

    before(async () => {
      database = await migratedDatabase(dialect);
      // one proxy in front: X-Forwarded-For's last hop is the client
      config = testConfig(database.url, { LOG_LEVEL: 'info', TRUST_PROXY: '1' });
      store = await openStore(config.databaseUrl);
      const logStream = new PassThrough();
      logStream.on('data', (chunk) => (logged += chunk));
      built = await buildApp({ config, store, keys: keyring(TEST_SECRET), logStream });
      await built.app.listen({ port: 0, host: '127.0.0.1' });
      url = `http://127.0.0.1:${(built.app.server.address() as AddressInfo).port}`;
      client = await seedClient({ store, keys: keyring(TEST_SECRET) }, { name: 'API', scopes: ['passkey.read'] });
    });
    after(async () => {
      await built?.app.close();
      await store?.close();
      await database?.drop();
    });

    const lines = (): Line[] =>
      logged
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Line);
    const tokenForm = 'grant_type=client_credentials&scope=passkey.read';
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { ...FORM, ...headers }, body });

    it('answers a token request as Fastify’s path does', async () => {
      const auth = { authorization: basicAuth(client.clientId, client.secret) };
      const http = await post('/oauth/token', tokenForm, auth);
      const injected = await built.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { ...FORM, ...auth },
        payload: tokenForm,
      });
      assert.equal(http.status, 200);
      assert.equal(injected.statusCode, 200);
      const [a, b] = [(await http.json()) as Record<string, unknown>, injected.json() as Record<string, unknown>];
      assert.deepEqual(Object.keys(a).sort(), Object.keys(b).sort());
      assert.equal(a.token_type, 'Bearer');
      assert.equal(a.scope, 'passkey.read');
      for (const name of ['content-type', 'cache-control', 'x-content-type-options'])
        assert.equal(http.headers.get(name), injected.headers[name], name);
      assert.match(http.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
      // the server the direct routes make carries Fastify's own server options (its 72 s keep-alive)
      assert.equal(built.app.server.keepAliveTimeout, 72_000);
      // the token is the service's: its own verifier accepts it
      const claims = await built.verifier.verify(a.access_token as string, `${config.publicUrl}/2/passkey`);
      assert.equal(claims.clientId, client.clientId);
      assert.ok(claims.scopes.has('passkey.read'));
    });

    it('keeps a given request id, logs the request under it, and never the secret', async () => {
      logged = '';
      const res = await post('/oauth/token', tokenForm, {
        authorization: basicAuth(client.clientId, client.secret),
        'x-request-id': 'rp-call-42',
        'x-forwarded-for': '203.0.113.50',
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-request-id'), 'rp-call-42');
      await res.text();
      const mine = lines().filter((l) => l.reqId === 'rp-call-42');
      // the service's own line about the token comes under the same id
      assert.deepEqual(
        mine.map((l) => l.msg),
        ['incoming request', 'token issued', 'request completed'],
      );
      assert.deepEqual(mine[0]!.req, { method: 'POST', url: '/oauth/token', remoteAddress: '203.0.113.50' });
      assert.deepEqual(mine.at(-1)!.res, { statusCode: 200 });
      assert.ok(!logged.includes(client.secret), 'the client secret is not logged');
      assert.ok(!logged.includes(basicAuth(client.clientId, client.secret).slice(6)), 'nor the Basic credentials');
    });

    it('records a failed client authentication with the request id and the client address', async () => {
      const res = await post('/oauth/token', tokenForm, {
        authorization: basicAuth(client.clientId, 'not the secret'),
        'x-forwarded-for': '198.51.100.77',
      });
      assert.equal(res.status, 401);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_client');
      const requestId = res.headers.get('x-request-id');
      let row;
      for (let i = 0; i < 50 && !row; i++) {
        row = (await listAuditEvents(store.db, { limit: 20 })).find((r) => r.request_id === requestId);
        if (!row) await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(row, 'an audit record with the request id');
      assert.equal(row.kind, 'client.auth_failed');
      assert.equal(row.source, '198.51.100.77');
    });

    it('counts each answer in the request metrics under the endpoint', async () => {
      const labels = (status: string) => ({ route: '/oauth/token', method: 'POST', status });
      const before = await scrape(built.app);
      await (
        await post('/oauth/token', tokenForm, { authorization: basicAuth(client.clientId, client.secret) })
      ).text();
      await (await post('/oauth/token', tokenForm, { authorization: basicAuth(client.clientId, 'wrong') })).text();
      const after = await scrape(built.app);
      for (const status of ['200', '401'])
        assert.equal(
          total(after, 'idp_http_requests_total', labels(status)) -
            total(before, 'idp_http_requests_total', labels(status)),
          1,
          status,
        );
    });

    it('answers introspection and revocation as Fastify’s path does', async () => {
      const auth = { authorization: basicAuth(client.clientId, client.secret) };
      const { access_token: token } = (await (await post('/oauth/token', tokenForm, auth)).json()) as {
        access_token: string;
      };
      const cases: [string, string, Record<string, string>][] = [
        // JWT access tokens are not introspected (the provider's answer)
        ['/oauth/introspect', `token=${token}`, auth],
        ['/oauth/introspect', 'token=unknown', auth],
        ['/oauth/introspect', 'token=unknown', { authorization: basicAuth(client.clientId, 'wrong') }],
        ['/oauth/revoke', 'token=unknown', auth],
        ['/oauth/revoke', `token=${token}`, auth],
        ['/oauth/revoke', 'token_type_hint=access_token', auth],
      ];
      for (const [path, body, headers] of cases) {
        const http = await post(path, body, headers);
        const injected = await built.app.inject({
          method: 'POST',
          url: path,
          headers: { ...FORM, ...headers },
          payload: body,
        });
        const label = `${path} ${body.slice(0, 20)}`;
        assert.equal(http.status, injected.statusCode, label);
        assert.equal(await http.text(), injected.body, label);
        assert.equal(http.headers.get('content-type'), injected.headers['content-type'], label);
      }
    });

    it('leaves requests that are not plain POSTs to Fastify: a NUL in the query is refused there', async () => {
      const res = await post('/oauth/token?x=%00', tokenForm, {
        authorization: basicAuth(client.clientId, client.secret),
      });
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_request');
    });
  });
}
