// NUL bytes and other control characters in request input: PostgreSQL refuses NUL in text, so
// such input must be answered with the endpoint's 4xx before any query runs, never with a 500.
// And an unexpected failure inside the authorization server is logged with the request id.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import {
  dialects,
  migratedDatabase,
  testConfig,
  seedOrg,
  seedUser,
  seedClient,
  basicAuth,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { buildApp, type App } from '../../src/app.ts';

const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://rp.example.test/callback';
const NUL = '\u0000';

interface LoggedApp extends App {
  store: Store;
  keys: ReturnType<typeof keyring>;
  lines(): Record<string, unknown>[];
  close(): Promise<void>;
}

/** The app with its log captured as JSON lines. */
async function loggedApp(dialect: 'sqlite' | 'postgres'): Promise<LoggedApp> {
  const database: TestDatabase = await migratedDatabase(dialect);
  const config = testConfig(database.url, { LOG_LEVEL: 'info' });
  const store = await openStore(config.databaseUrl);
  const keys = keyring(TEST_SECRET);
  const logStream = new PassThrough();
  let text = '';
  logStream.on('data', (chunk) => (text += chunk));
  const built = await buildApp({ config, store, keys, logStream });
  await built.app.ready();
  return {
    ...built,
    store,
    keys,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async close() {
      await built.app.close();
      await store.close();
      await database.drop();
    },
  };
}

for (const dialect of dialects()) {
  describe(`control characters in request input (${dialect})`, () => {
    let ctx: LoggedApp;
    let client: { clientId: string; secret: string };

    before(async () => {
      ctx = await loggedApp(dialect);
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      client = await seedClient(ctx, {
        redirectUris: [REDIRECT],
        scopes: ['passkey.read', 'offline_access'],
        orgs: [1],
      });
    });
    after(() => ctx?.close());

    const form = (url: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
      ctx.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload: new URLSearchParams(body).toString(),
      });

    function refused(res: LightMyRequestResponse, status: number, error?: string) {
      assert.equal(res.statusCode, status, res.body);
      if (error) assert.equal(res.json().error, error);
      assert.doesNotMatch(res.body, /stack|postgres|sqlite|invalid byte sequence|0x00/i);
    }

    /** No request of this file ended in an unexpected failure. */
    function noServerErrors() {
      const bad = ctx
        .lines()
        .filter((l) => (l.level as number) >= 50 || (l.res as { statusCode?: number } | undefined)?.statusCode === 500);
      assert.deepEqual(bad, []);
    }

    it('client_id with a NUL in Basic credentials at the token endpoint: 400 invalid_request', async () => {
      const body = { grant_type: 'client_credentials', scope: 'passkey.read' };
      // form-encoded in the header as RFC 6749 2.3.1 asks, and raw
      refused(
        await form('/oauth/token', body, { authorization: basicAuth(`${client.clientId}${NUL}`, client.secret) }),
        400,
        'invalid_request',
      );
      const raw = `Basic ${Buffer.from(`${client.clientId}${NUL}:${client.secret}`).toString('base64')}`;
      refused(await form('/oauth/token', body, { authorization: raw }), 400, 'invalid_request');
    });

    it('client_id with a NUL in the form at the token endpoint: 401 invalid_client', async () => {
      const res = await form('/oauth/token', {
        grant_type: 'client_credentials',
        scope: 'passkey.read',
        client_id: `x${NUL}`,
        client_secret: client.secret,
      });
      refused(res, 401, 'invalid_client');
    });

    it('a code or refresh token with a NUL: 400 invalid_grant', async () => {
      const auth = { authorization: basicAuth(client.clientId, client.secret) };
      refused(
        await form(
          '/oauth/token',
          { grant_type: 'authorization_code', code: `abc${NUL}def`, redirect_uri: REDIRECT },
          auth,
        ),
        400,
        'invalid_grant',
      );
      refused(
        await form('/oauth/token', { grant_type: 'refresh_token', refresh_token: `abc${NUL}def` }, auth),
        400,
        'invalid_grant',
      );
    });

    it('a token with a NUL at the revocation endpoint changes nothing and fails nothing', async () => {
      const res = await form(
        '/oauth/revoke',
        { token: `abc${NUL}` },
        { authorization: basicAuth(client.clientId, client.secret) },
      );
      assert.ok(res.statusCode === 200 || res.statusCode === 400, res.body);
    });

    it('a NUL in the query of the authorization endpoint: 400 invalid_request', async () => {
      for (const query of [
        `client_id=${encodeURIComponent(`${client.clientId}${NUL}`)}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=openid`,
        `client_id=${client.clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}&response_type=code&scope=openid&state=a%00b`,
      ]) {
        const res = await ctx.app.inject({
          method: 'GET',
          url: `/oauth/authorization?${query}`,
          headers: { accept: 'application/json' },
        });
        refused(res, 400, 'invalid_request');
      }
    });

    it('a NUL in the end-session query: 400', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: `/openid/endsession?client_id=x%00` });
      refused(res, 400);
    });

    it('a NUL in the username or password of the sign-in form: the form answers 400, printable Unicode passwords still work', async () => {
      const jar = new Map<string, string>();
      const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const remember = (res: LightMyRequestResponse) => {
        for (const c of res.cookies) jar.set(c.name, c.value);
        return res;
      };
      const get = async (url: string) =>
        remember(await ctx.app.inject({ method: 'GET', url, headers: { cookie: cookie() } }));
      const start = await get(
        `/oauth/authorization?${new URLSearchParams({ client_id: client.clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 's' })}`,
      );
      assert.equal(start.statusCode, 303);
      const location = new URL(start.headers.location as string, 'https://x').pathname;
      const page = await get(location);
      assert.equal(page.statusCode, 200);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
      const login = (username: string, password: string) =>
        form(`${location}/login`, { username, password, _csrf: csrf }, { cookie: cookie() });

      for (const [username, password] of [
        [`ada@example.org${NUL}`, PASSWORD],
        [`${NUL}`, PASSWORD],
        ['ada@example.org', `${PASSWORD}${NUL}`],
      ] as const) {
        const res = await login(username, password);
        assert.equal(res.statusCode, 400, res.body);
        assert.match(res.headers['content-type'] as string, /^text\/html/);
      }
      // a wrong password of printable Unicode is an ordinary refusal, not a malformed request
      const unicode = await login('ada@example.org', 'ærlig talt 🔑 пароль\t');
      assert.equal(unicode.statusCode, 401);
      // and the right one still signs in
      const ok = await login('ada@example.org', PASSWORD);
      assert.equal(ok.statusCode, 303, ok.body);
    });

    it('a NUL in a path: each route refuses it as its own malformed parameter', async () => {
      const page = await ctx.app.inject({ method: 'GET', url: '/interaction/abc%00def' });
      refused(page, 400);
      assert.match(page.headers['content-type'] as string, /^text\/html/);
      refused(await ctx.app.inject({ method: 'GET', url: '/oauth/authorization/abc%00def' }), 400);
    });

    it('a NUL in the query or JSON body of an API: 400 with the JSON error body', async () => {
      const token = (
        await form(
          '/oauth/token',
          { grant_type: 'client_credentials', scope: 'passkey.read' },
          { authorization: basicAuth(client.clientId, client.secret) },
        )
      ).json().access_token;
      const list = await ctx.app.inject({
        method: 'GET',
        url: '/2/passkey/1?eppn=ada%00@example.org',
        headers: { authorization: `Bearer ${token}` },
      });
      refused(list, 400);
      assert.equal(list.json().code, 400);
      const json = await ctx.app.inject({
        method: 'POST',
        url: '/account/passkeys',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ response: `x${NUL}` }),
      });
      assert.equal(json.statusCode, 400, json.body);
    });

    it('none of the above ended in an unexpected failure', () => {
      noServerErrors();
    });

    it('a failure inside the authorization server is logged at error level with the request id', async () => {
      // Take the storage of the authorization server away under it.
      await sql`drop table oidc_payloads`.execute(ctx.store.db);
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: basicAuth(client.clientId, client.secret),
          'x-request-id': 'broken-storage-1',
        },
        payload: new URLSearchParams({
          grant_type: 'authorization_code',
          code: 'abcdef',
          redirect_uri: REDIRECT,
        }).toString(),
      });
      assert.equal(res.statusCode, 500);
      assert.equal(res.json().error, 'server_error');
      assert.doesNotMatch(res.body, /oidc_payloads|relation|no such table/);
      const logged = ctx.lines().filter((l) => l.reqId === 'broken-storage-1' && (l.level as number) >= 50);
      assert.equal(logged.length, 1, JSON.stringify(ctx.lines().filter((l) => l.reqId === 'broken-storage-1')));
      assert.match(JSON.stringify(logged[0]!.err), /oidc_payloads/);
    });
  });
}
