// What /metrics reports after a known workload, on each database. The registry is shared by every
// app in the process, so each check compares a scrape before the workload with one after it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { buildApp, type App } from '../../src/app.ts';
import { grantOrganizations } from '../../src/clients/index.ts';
import { keyring } from '../../src/crypto.ts';
import { ensureSamlKeys, rotateSamlSigningKeyIfDue } from '../../src/service-providers/index.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import {
  basicAuth,
  clientToken,
  clearOfWindowEnd,
  dialects,
  migratedDatabase,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  testConfig,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { scrape, scrapeText, total, type Sample } from './metrics-scrape.ts';

const REDIRECT = 'https://rp.example.test/callback';

interface World extends App {
  store: Store;
  database: TestDatabase;
  logs(): string;
}

async function startWorld(dialect: 'sqlite' | 'postgres'): Promise<World> {
  const database = await migratedDatabase(dialect);
  const config = testConfig(database.url, { LOG_LEVEL: 'info', CHECKUSER_RATE_LIMIT: '1' });
  const store = await openStore(config.databaseUrl);
  const logStream = new PassThrough();
  let logged = '';
  logStream.on('data', (chunk) => (logged += chunk));
  const built = await buildApp({ config, store, keys: keyring(TEST_SECRET), logStream });
  await built.app.ready();
  return { ...built, store, database, logs: () => logged };
}

/** A code exactly as the authorization endpoint stores it after sign-in and consent. */
async function mintCode(w: World, accountId: string, clientId: string, scope: string): Promise<string> {
  const provider = w.provider.current();
  const grant = new provider.Grant({ accountId, clientId });
  grant.addOIDCScope(scope);
  const grantId = await grant.save();
  const client = await provider.Client.find(clientId);
  const authTime = Math.floor(Date.now() / 1000);
  return new provider.AuthorizationCode({
    accountId,
    client: client!,
    grantId,
    scope,
    redirectUri: REDIRECT,
    authTime,
    gty: 'authorization_code',
  }).save();
}

async function tokenRequest(w: World, auth: string, form: Record<string, string>) {
  return w.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams(form).toString(),
  });
}

const delta = (before: Sample[], after: Sample[], name: string, labels: Record<string, string> = {}) =>
  total(after, name, labels) - total(before, name, labels);

for (const dialect of dialects()) {
  describe(`/metrics after a workload (${dialect})`, () => {
    let w: World;
    let before_: Sample[];
    let after_: Sample[];
    let text: string;
    const secrets: string[] = [];
    let passkeyClient: string;
    let application: string;

    before(async () => {
      w = await startWorld(dialect);
      await seedOrg({ store: w.store });
      const alice = await seedUser({ store: w.store }, 1, 'alice@example.org');
      const keys = keyring(TEST_SECRET);
      const rp = await seedClient({ store: w.store, keys }, { redirectUris: [REDIRECT], scopes: ['offline_access'] });
      application = rp.clientId;
      const code = await mintCode(w, alice.sub, rp.clientId, 'openid offline_access');
      const reader = await seedClient({ store: w.store, keys }, { scopes: ['passkey.read'], orgs: [1] });
      const checker = await seedClient({ store: w.store, keys }, { scopes: ['system-check-user-existence'] });
      await grantOrganizations(w.store, checker.clientId, [1], 'checkuser');
      const checkToken = await clientToken(w, checker.clientId, checker.secret, 'system-check-user-existence');
      passkeyClient = reader.clientId;
      secrets.push(reader.secret, checker.secret, rp.secret, checkToken, code);

      before_ = await scrape(w.app);
      const tokens: string[] = [];
      for (let i = 0; i < 3; i++) tokens.push(await clientToken(w, reader.clientId, reader.secret, 'passkey.read'));
      secrets.push(...tokens);
      // a sign-in's code redeemed, its refresh token used, then the code replayed (refused)
      const rpAuth = basicAuth(rp.clientId, rp.secret);
      const exchange = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT };
      const signedIn = await tokenRequest(w, rpAuth, exchange);
      assert.equal(signedIn.statusCode, 200, signedIn.body);
      const { access_token, id_token, refresh_token } = signedIn.json();
      const refreshed = await tokenRequest(w, rpAuth, { grant_type: 'refresh_token', refresh_token });
      assert.equal(refreshed.statusCode, 200, refreshed.body);
      assert.equal((await tokenRequest(w, rpAuth, exchange)).statusCode, 400);
      secrets.push(
        access_token,
        id_token,
        refresh_token,
        refreshed.json().access_token,
        refreshed.json().refresh_token,
      );
      for (let i = 0; i < 2; i++) {
        const res = await w.app.inject({
          method: 'GET',
          url: '/2/passkey/1?eppn=alice%40example.org',
          headers: { authorization: `Bearer ${tokens[i]}` },
        });
        assert.equal(res.statusCode, 200, res.body);
      }
      assert.equal((await w.app.inject({ method: 'GET', url: '/no/such/path/alice@example.org' })).statusCode, 404);
      assert.equal((await w.app.inject({ method: 'GET', url: '/oauth/no-such-endpoint' })).statusCode, 404);
      // CHECKUSER_RATE_LIMIT=1: the second lookup of the minute is refused
      await clearOfWindowEnd(60_000, 5_000);
      const lookups: number[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await w.app.inject({
          method: 'GET',
          url: '/userinfo/v1/exists/idp:alice@example.org',
          headers: { authorization: `Bearer ${checkToken}` },
        });
        lookups.push(res.statusCode);
      }
      assert.deepEqual(lookups, [200, 429]);
      // a refused token request (wrong secret) issues nothing
      const refused = await w.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: {
          authorization: basicAuth(reader.clientId, 'wrong-secret'),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: 'grant_type=client_credentials&scope=passkey.read',
      });
      assert.equal(refused.statusCode, 401);
      text = await scrapeText(w.app);
      after_ = await scrape(w.app);
    });
    after(async () => {
      await w?.app.close();
      await w?.store.close();
      await w?.database.drop();
    });

    it('counts requests by route pattern, method and status, oidc-provider routes and 404s included', () => {
      const requests = (labels: Record<string, string>) => delta(before_, after_, 'idp_http_requests_total', labels);
      assert.equal(requests({ route: '/oauth/token', method: 'POST', status: '200' }), 5);
      assert.equal(requests({ route: '/oauth/token', method: 'POST', status: '400' }), 1);
      assert.equal(requests({ route: '/oauth/token', method: 'POST', status: '401' }), 1);
      assert.equal(requests({ route: '/2/passkey/:org_id', method: 'GET', status: '200' }), 2);
      assert.equal(requests({ route: 'unmatched', method: 'GET', status: '404' }), 2);
      assert.equal(requests({ route: '/userinfo/v1/exists/:userid_sec', method: 'GET', status: '200' }), 1);
      assert.equal(requests({ route: '/userinfo/v1/exists/:userid_sec', method: 'GET', status: '429' }), 1);
      // nothing else was asked, and /metrics scrapes are not counted
      assert.equal(requests({}), 7 + 2 + 2 + 2);
      assert.equal(total(after_, 'idp_http_requests_total', { route: '/metrics' }), 0);
    });

    it('times every counted request in the latency histogram, by status class', () => {
      const count = (labels: Record<string, string>) =>
        delta(before_, after_, 'idp_http_request_duration_seconds_count', labels);
      assert.equal(count({ route: '/oauth/token', method: 'POST', status_class: '2xx' }), 5);
      assert.equal(count({ route: '/oauth/token', method: 'POST', status_class: '4xx' }), 2);
      assert.equal(count({ route: 'unmatched', status_class: '4xx' }), 2);
      assert.equal(count({}), 13);
      const le5 = delta(before_, after_, 'idp_http_request_duration_seconds_bucket', { le: '5' });
      const inf = delta(before_, after_, 'idp_http_request_duration_seconds_bucket', { le: '+Inf' });
      assert.ok(le5 <= inf && inf === 13, `${le5} ${inf}`);
      assert.ok(delta(before_, after_, 'idp_http_request_duration_seconds_sum') > 0);
    });

    it('keeps raw paths, users, tokens and secrets out of the labels', () => {
      for (const value of ['alice', '/no/such/path', '/oauth/no-such-endpoint', ...secrets])
        assert.ok(!text.includes(value), `${value.slice(0, 12)}... appears in /metrics`);
      const routes = new Set(
        after_.filter((s) => s.name === 'idp_http_requests_total').map((s) => s.labels.route as string),
      );
      for (const route of routes) assert.ok(route === 'unmatched' || route.startsWith('/'), route);
    });

    it('counts each token issued once, by grant type and client, and logs it without the token', () => {
      const issued = (labels: Record<string, string>) => delta(before_, after_, 'idp_tokens_issued_total', labels);
      assert.equal(issued({ grant_type: 'client_credentials', client: passkeyClient }), 3);
      assert.equal(issued({ grant_type: 'authorization_code', client: application }), 1);
      assert.equal(issued({ grant_type: 'refresh_token', client: application }), 1);
      assert.equal(issued({}), 5);
      const lines = w
        .logs()
        .split('\n')
        .filter((l) => l.includes('"token issued"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const logged = (clientId: string) =>
        lines.filter((l) => l.client_id === clientId).map((l) => [l.level, l.grant_type]);
      assert.deepEqual(logged(passkeyClient), Array(3).fill([30, 'client_credentials']));
      assert.deepEqual(logged(application), [
        [30, 'authorization_code'],
        [30, 'refresh_token'],
      ]);
      for (const line of lines) assert.match(String(line.reqId), /^[0-9a-f-]{36}$/);
    });

    it('never logs a token, a client secret or an Authorization header', () => {
      const logs = w.logs();
      assert.ok(logs.length > 0);
      for (const secret of secrets) assert.ok(!logs.includes(secret), `${secret.slice(0, 12)}... was logged`);
      assert.doesNotMatch(logs, /"authorization"\s*:|\bbearer\s+\S|\bbasic\s+\S|"cookie"\s*:/i);
    });

    it('counts rate-limit refusals by limiter', () => {
      assert.equal(delta(before_, after_, 'idp_rate_limited_total', { limiter: 'checkuser' }), 1);
      assert.equal(delta(before_, after_, 'idp_rate_limited_total'), 1);
    });

    it('times database queries by statement kind', () => {
      const count = (kind: string) => delta(before_, after_, 'idp_db_query_duration_seconds_count', { kind });
      assert.ok(count('select') > 0);
      assert.ok(count('insert') > 0); // rate-limit counters, oidc-provider's stored grants
      const kinds = new Set(after_.filter((s) => s.name.startsWith('idp_db_query')).map((s) => s.labels.kind));
      for (const kind of kinds) assert.ok(['select', 'insert', 'update', 'delete', 'other'].includes(kind!), kind);
    });

    it('reports the connection pool on PostgreSQL, and nothing for SQLite', () => {
      const pool = after_.filter((s) => s.name.startsWith('idp_db_pool_'));
      if (dialect === 'sqlite') return assert.deepEqual(pool, []);
      assert.equal(total(after_, 'idp_db_pool_max_connections'), 10);
      const inUse = total(after_, 'idp_db_pool_connections', { state: 'in_use' });
      const idle = total(after_, 'idp_db_pool_connections', { state: 'idle' });
      // at least the connection the workload used stays open; the scrape itself may be using one
      assert.ok(inUse >= 0 && idle >= 0 && inUse + idle >= 1 && inUse + idle <= 10, `${inUse} ${idle}`);
      assert.equal(total(after_, 'idp_db_pool_waiting_queries'), 0);
    });

    it('reports the age of the signing keys in use, per algorithm', async () => {
      const ages = after_.filter((s) => s.name === 'idp_signing_key_age_seconds');
      assert.deepEqual(ages.map((s) => s.labels.alg).sort(), ['ES256', 'RS256']);
      // the keys were made when this test's app started
      for (const age of ages) assert.ok(age.value >= 0 && age.value < 300, String(age.value));
      const later = total(await scrape(w.app), 'idp_signing_key_age_seconds', { alg: 'ES256' });
      assert.ok(later >= total(after_, 'idp_signing_key_age_seconds', { alg: 'ES256' }));
    });

    it("reports the age of the SAML identity provider's keys in use, per use", async () => {
      // keys made 100 days ago; then a scheduled rotation publishes a new signing key that does not sign yet
      const made = Date.now() - 100 * 86_400_000;
      await ensureSamlKeys(w.store, keyring(TEST_SECRET), made);
      const age = async (use: string) => total(await scrape(w.app), 'idp_saml_key_age_seconds', { use }) / 86_400;
      for (const use of ['signing', 'encryption', 'metadata']) {
        const days = await age(use);
        assert.ok(days >= 100 && days < 100.1, `${use}: ${days}`);
      }
      const rotated = await rotateSamlSigningKeyIfDue(w.store, keyring(TEST_SECRET), 90 * 86_400_000);
      assert.ok(rotated && rotated.activatesAt > Date.now());
      // the old key still signs until the new one activates: the age is still the one in use
      assert.ok((await age('signing')) >= 100);
    });

    it('names the running version', () => {
      const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
      assert.equal(total(after_, 'idp_info', { version }), 1);
    });
  });
}

describe('/metrics over real HTTP: answers oidc-provider writes itself are counted too', () => {
  it('counts discovery, JWKS, the authorization endpoint and unknown provider paths by their pattern', async () => {
    const ctx = await startTestApp('sqlite', {}, { listen: 0 });
    try {
      const base = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      const before_ = await scrape(ctx.app);
      const statuses: number[] = [];
      for (const path of [
        '/.well-known/openid-configuration',
        '/.well-known/oauth-authorization-server',
        '/openid/jwks',
        '/oauth/authorization?client_id=nobody',
        '/openid/endsession/confirm',
        '/openid/no-such-thing',
      ]) {
        const res = await fetch(`${base}${path}`, { redirect: 'manual' });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      await (await fetch(`${base}/metrics`)).text();
      const after_ = await scrape(ctx.app);
      const requests = (labels: Record<string, string>) => delta(before_, after_, 'idp_http_requests_total', labels);
      assert.equal(requests({ route: '/.well-known/openid-configuration', status: '200' }), 1);
      assert.equal(requests({ route: '/.well-known/oauth-authorization-server', status: '200' }), 1);
      assert.equal(requests({ route: '/openid/jwks', method: 'GET', status: '200' }), 1);
      assert.equal(requests({ route: '/oauth/authorization', status: String(statuses[3]) }), 1);
      assert.equal(requests({ route: '/openid/endsession/confirm', status: String(statuses[4]) }), 1);
      assert.equal(requests({ route: 'unmatched', status: '404' }), 1);
      assert.equal(requests({}), 6);
    } finally {
      await ctx.close();
    }
  });
});
