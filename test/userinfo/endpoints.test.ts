// /openid/userinfo and legacy /userinfo as a client sees them: RFC 6750 errors, CORS, signed
// userinfo, POST, deprecation signalling and the legacy-call counter.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify } from 'jose';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  PUBLIC_URL,
  type TestContext,
  cli as adminCli,
} from '../helpers.ts';
import { mintUserToken } from './fixtures.ts';
import { revokeGrant } from '../../src/store/oidc-payloads.ts';

const REDIRECT = 'https://rp.example.com/callback';
const REALM = `Bearer realm="${PUBLIC_URL}"`;

function wwwAuthenticate(res: { headers: Record<string, unknown> }): string[] {
  const h = res.headers['www-authenticate'];
  return h === undefined ? [] : Array.isArray(h) ? h : [String(h)];
}

function bearerChallenge(res: { headers: Record<string, unknown> }): string {
  const bearer = wwwAuthenticate(res).find((h) => h.startsWith('Bearer '));
  assert.ok(bearer, `no Bearer challenge in ${JSON.stringify(res.headers['www-authenticate'])}`);
  return bearer;
}

const cli = (ctx: TestContext, args: string[]) => adminCli(ctx.config.databaseUrl, args);

for (const dialect of dialects()) {
  describe(`userinfo endpoints (${dialect})`, () => {
    let ctx: TestContext;
    let sub: string;
    let client: { clientId: string; secret: string };
    let token: string;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      sub = (await seedUser(ctx, 1, 'alice@example.org', { name: 'Alice', email: 'alice@example.org' })).sub;
      client = await seedClient(ctx, {
        groups: ['userinfo-name', 'email'],
        redirectUris: [REDIRECT, 'http://localhost:3000/cb'],
      });
      token = await mintUserToken(ctx, { accountId: sub, clientId: client.clientId, scope: 'openid profile email' });
    });
    after(() => ctx.close());

    const call = (method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, payload?: string) =>
      ctx.app.inject({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });

    describe('/openid/userinfo', () => {
      it('answers GET with 200 application/json and no-store', async () => {
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${token}` });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] as string, /^application\/json/);
        assert.equal(res.headers['cache-control'], 'no-store');
        assert.deepEqual(res.json(), { sub, name: 'Alice', email: 'alice@example.org', email_verified: false });
      });

      it('GET (short path) and POST (oidc-provider) answer with the same body and headers', async () => {
        const get = await call('GET', '/openid/userinfo', { authorization: `Bearer ${token}` });
        const post = await call('POST', '/openid/userinfo', { authorization: `Bearer ${token}` });
        assert.deepEqual(get.json(), post.json());
        for (const name of [
          'content-type',
          'cache-control',
          'vary',
          'access-control-allow-origin',
          'access-control-expose-headers',
        ]) {
          assert.equal(get.headers[name], post.headers[name], name);
        }
      });

      it('HEAD (served by oidc-provider) answers like GET without a body', async () => {
        const res = await ctx.app.inject({
          method: 'HEAD',
          url: '/openid/userinfo',
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.body, '');
        const none = await ctx.app.inject({ method: 'HEAD', url: '/openid/userinfo' });
        assert.equal(none.statusCode, 401);
      });

      it('keeps claims per token until what they depend on changes; revocation acts at once', async () => {
        const other = await startTestApp(dialect, { USERINFO_CACHE_TTL: '60' });
        try {
          await seedOrg(other);
          const u = await seedUser(other, 1, 'dora@example.org', { name: 'Dora', email: 'dora@example.org' });
          const c = await seedClient(other, { groups: ['userinfo-name', 'email'], redirectUris: [REDIRECT] });
          const get = (t: string, method: 'GET' | 'POST' = 'GET') =>
            other.app.inject({ method, url: '/openid/userinfo', headers: { authorization: `Bearer ${t}` } });
          const t1 = await mintUserToken(other, {
            accountId: u.sub,
            clientId: c.clientId,
            scope: 'openid profile email',
          });
          assert.equal((await get(t1)).json().name, 'Dora');

          const { setGroups } = await import('../../src/clients/index.ts');
          await setGroups(other.store, c.clientId, ['email']);
          // the change invalidates the kept claims: the short path answers like oidc-provider's at once
          assert.equal((await get(t1, 'POST')).json().name, undefined);
          const later = (await get(t1)).json();
          assert.equal(later.name, undefined);
          assert.equal(later.email, 'dora@example.org');

          // a revoked token fails at once, cached or not
          assert.equal((await get(t1)).statusCode, 200);
          await (await other.provider.current().AccessToken.find(t1))!.destroy();
          const revoked = await get(t1);
          assert.equal(revoked.statusCode, 401);
          assert.match(bearerChallenge(revoked), /error="invalid_token"/);

          // so does one whose grant was revoked
          const t2 = await mintUserToken(other, { accountId: u.sub, clientId: c.clientId, scope: 'openid email' });
          assert.equal((await get(t2)).statusCode, 200);
          const at = await other.provider.current().AccessToken.find(t2);
          await revokeGrant(other.store.db, at!.grantId!);
          assert.equal((await get(t2)).statusCode, 401);
        } finally {
          await other.close();
        }
      });

      it('with USERINFO_CACHE_TTL=0 a group change shows on the next call', async () => {
        const other = await startTestApp(dialect, { USERINFO_CACHE_TTL: '0' });
        try {
          await seedOrg(other);
          const u = await seedUser(other, 1, 'erin@example.org', { name: 'Erin' });
          const c = await seedClient(other, { groups: ['userinfo-name'], redirectUris: [REDIRECT] });
          const t = await mintUserToken(other, { accountId: u.sub, clientId: c.clientId, scope: 'openid profile' });
          const get = () =>
            other.app.inject({ method: 'GET', url: '/openid/userinfo', headers: { authorization: `Bearer ${t}` } });
          assert.equal((await get()).json().name, 'Erin');
          const { setGroups } = await import('../../src/clients/index.ts');
          await setGroups(other.store, c.clientId, []);
          assert.deepEqual((await get()).json(), { sub: u.sub });
        } finally {
          await other.close();
        }
      });

      it('answers POST with the token in the header, or form-encoded in the body', async () => {
        const a = await call('POST', '/openid/userinfo', { authorization: `Bearer ${token}` });
        assert.equal(a.statusCode, 200);
        assert.equal(a.json().sub, sub);
        const b = await call(
          'POST',
          '/openid/userinfo',
          { 'content-type': 'application/x-www-form-urlencoded' },
          new URLSearchParams({ access_token: token }).toString(),
        );
        assert.equal(b.statusCode, 200);
        assert.equal(b.json().sub, sub);
      });

      it('no token: 401 with WWW-Authenticate Bearer realm and no error code', async () => {
        const res = await call('GET', '/openid/userinfo');
        assert.equal(res.statusCode, 401);
        assert.equal(bearerChallenge(res), REALM);
      });

      it('unknown token: 401 invalid_token', async () => {
        const res = await call('GET', '/openid/userinfo', { authorization: 'Bearer not-a-real-token' });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /^Bearer realm="[^"]+", error="invalid_token"/);
        assert.equal(res.json().error, 'invalid_token');
      });

      it('expired token: 401 invalid_token', async () => {
        const expired = await mintUserToken(ctx, {
          accountId: sub,
          clientId: client.clientId,
          scope: 'openid profile',
          expiresIn: -10,
        });
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${expired}` });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /error="invalid_token"/);
      });

      it('token without openid: 403 insufficient_scope naming openid', async () => {
        const oauthOnly = await mintUserToken(ctx, {
          accountId: sub,
          clientId: client.clientId,
          scope: 'profile email',
        });
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${oauthOnly}` });
        assert.equal(res.statusCode, 403);
        const challenge = bearerChallenge(res);
        assert.match(challenge, /error="insufficient_scope"/);
        assert.match(challenge, /scope="openid"/);
      });

      it('a client_credentials API token is not a userinfo token: 401 invalid_token', async () => {
        const api = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
        const jwt = await clientToken(ctx, api.clientId, api.secret, 'passkey.read');
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${jwt}` });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /error="invalid_token"/);
      });

      it('a token bound to another resource: 401 invalid_token', async () => {
        const bound = await mintUserToken(ctx, {
          accountId: sub,
          clientId: client.clientId,
          scope: 'openid',
          aud: `${PUBLIC_URL}/2/passkey`,
        });
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${bound}` });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /error="invalid_token"/);
      });

      it('a token in the query string: 400 invalid_request', async () => {
        const res = await call('GET', `/openid/userinfo?access_token=${token}`);
        assert.equal(res.statusCode, 400);
        assert.equal(res.json().error, 'invalid_request');
      });

      it('a token in two places at once: 400 invalid_request', async () => {
        const res = await call(
          'POST',
          '/openid/userinfo',
          { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
          `access_token=${token}`,
        );
        assert.equal(res.statusCode, 400);
        assert.equal(res.json().error, 'invalid_request');
      });

      it('a token whose user was deleted: 401 invalid_token', async () => {
        const gone = await seedUser(ctx, 1, 'gone@example.org');
        const t = await mintUserToken(ctx, { accountId: gone.sub, clientId: client.clientId, scope: 'openid' });
        await ctx.store.db.deleteFrom('users').where('id', '=', gone.id).execute();
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${t}` });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /error="invalid_token"/);
      });

      it('a token whose grant was revoked: 401 invalid_token', async () => {
        const t = await mintUserToken(ctx, { accountId: sub, clientId: client.clientId, scope: 'openid' });
        const at = await ctx.provider.current().AccessToken.find(t);
        await ctx.store.db
          .deleteFrom('oidc_payloads')
          .where('type', '=', 'Grant')
          .where('id', '=', at!.grantId)
          .execute();
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${t}` });
        assert.equal(res.statusCode, 401);
        assert.match(bearerChallenge(res), /error="invalid_token"/);
      });

      it('CORS: a preflight from any origin is answered', async () => {
        const res = await ctx.app.inject({
          method: 'OPTIONS',
          url: '/openid/userinfo',
          headers: {
            origin: 'https://rp.example.com',
            'access-control-request-method': 'GET',
            'access-control-request-headers': 'authorization',
          },
        });
        assert.equal(res.statusCode, 204);
        assert.equal(res.headers['access-control-allow-origin'], 'https://rp.example.com');
        assert.match(String(res.headers['access-control-allow-headers']), /authorization/i);
      });

      it('CORS: the origins of the client redirect URIs are allowed', async () => {
        for (const origin of ['https://rp.example.com', 'http://localhost:3000']) {
          const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${token}`, origin });
          assert.equal(res.statusCode, 200, origin);
          assert.equal(res.headers['access-control-allow-origin'], origin);
          assert.match(String(res.headers.vary), /Origin/);
        }
      });

      it('CORS: another origin is refused with 400 and no Allow-Origin', async () => {
        for (const origin of ['https://evil.example.com', 'http://rp.example.com', 'https://rp.example.com:8443']) {
          const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${token}`, origin });
          assert.equal(res.statusCode, 400, origin);
          assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
          assert.equal(res.json().error, 'invalid_request');
        }
      });

      it('signs userinfo (application/jwt) for a client registered with --userinfo-signed-alg RS256', async () => {
        const created = await cli(ctx, [
          'client',
          'add',
          '--name',
          'Signed RP',
          '--groups',
          'userinfo-name email',
          '--redirect-uri',
          REDIRECT,
          '--userinfo-signed-alg',
          'RS256',
          '--json',
        ]);
        assert.equal(created.code, 0, created.err);
        const signedClient = JSON.parse(created.out).client_id as string;
        const t = await mintUserToken(ctx, { accountId: sub, clientId: signedClient, scope: 'openid profile' });
        const res = await call('GET', '/openid/userinfo', { authorization: `Bearer ${t}` });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] as string, /^application\/jwt/);
        const jwks = (await call('GET', '/openid/jwks')).json();
        const { payload, protectedHeader } = await jwtVerify(res.body, createLocalJWKSet(jwks), {
          issuer: PUBLIC_URL,
          audience: signedClient,
          algorithms: ['RS256'],
        });
        assert.equal(protectedHeader.alg, 'RS256');
        assert.equal(payload.sub, sub);
        assert.equal(payload.name, 'Alice');
        // profile was granted, email was not: the signed answer releases the same as the plain one
        assert.equal(payload.email, undefined);
      });

      it('refuses an unknown userinfo signing alg at registration', async () => {
        const res = await cli(ctx, [
          'client',
          'add',
          '--name',
          'Bad',
          '--redirect-uri',
          REDIRECT,
          '--userinfo-signed-alg',
          'none',
        ]);
        assert.equal(res.code, 1);
        assert.match(res.err, /RS256 or ES256/);
      });
    });

    describe('legacy /userinfo', () => {
      const deprecationHeaders = (res: { headers: Record<string, unknown> }) => {
        assert.match(String(res.headers.deprecation), /^@\d+$/);
        assert.equal(res.headers.link, `<${PUBLIC_URL}/openid/userinfo>; rel="deprecation"`);
      };

      it('answers 200 { user, audience } with deprecation headers and no Sunset when none is set', async () => {
        const res = await call('GET', '/userinfo', { authorization: `Bearer ${token}` });
        assert.equal(res.statusCode, 200);
        assert.match(res.headers['content-type'] as string, /^application\/json/);
        assert.deepEqual(res.json(), {
          user: { userid: sub, name: 'Alice', email: 'alice@example.org' },
          audience: client.clientId,
        });
        deprecationHeaders(res);
        assert.equal(res.headers.sunset, undefined);
        assert.equal(res.headers['cache-control'], 'no-store');
      });

      it('accepts an OAuth token without openid (the legacy flow never required it)', async () => {
        const oauthOnly = await mintUserToken(ctx, {
          accountId: sub,
          clientId: client.clientId,
          scope: 'userinfo-name',
        });
        const res = await call('GET', '/userinfo', { authorization: `Bearer ${oauthOnly}` });
        assert.equal(res.statusCode, 200);
        assert.deepEqual(res.json().user, { userid: sub, name: 'Alice' });
      });

      it('no token: 401 with Bearer realm, deprecation headers still sent', async () => {
        for (const authorization of [undefined, '', 'Basic dXNlcjpwYXNz']) {
          const res = await call('GET', '/userinfo', authorization === undefined ? {} : { authorization });
          assert.equal(res.statusCode, 401, String(authorization));
          assert.deepEqual(wwwAuthenticate(res), [REALM]);
          assert.deepEqual(res.json(), { code: 401, message: 'Bearer access token required' });
          deprecationHeaders(res);
        }
      });

      it('malformed Authorization: 400 invalid_request', async () => {
        for (const authorization of ['Bearer', 'Bearer a b', 'Bearer ä', `Bearer ${'a'.repeat(3000)}`]) {
          const res = await call('GET', '/userinfo', { authorization });
          assert.equal(res.statusCode, 400, authorization.slice(0, 20));
          assert.match(bearerChallenge(res), /error="invalid_request"/);
          assert.equal(res.json().code, 400);
        }
      });

      it('unknown, expired, resource-bound, sender-constrained or API tokens: 401 invalid_token', async () => {
        const api = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
        const bad = {
          unknown: 'not-a-real-token',
          expired: await mintUserToken(ctx, {
            accountId: sub,
            clientId: client.clientId,
            scope: 'openid profile',
            expiresIn: -10,
          }),
          bound: await mintUserToken(ctx, {
            accountId: sub,
            clientId: client.clientId,
            scope: 'openid',
            aud: `${PUBLIC_URL}/2/passkey`,
          }),
          dpop: await mintUserToken(ctx, {
            accountId: sub,
            clientId: client.clientId,
            scope: 'openid',
            jkt: 'X6cFvj7n7bkOjbO4n7vQW0d3m8hC4Mdn4uO6k5lq9qQ',
          }),
          api: await clientToken(ctx, api.clientId, api.secret, 'passkey.read'),
        };
        for (const [what, t] of Object.entries(bad)) {
          const res = await call('GET', '/userinfo', { authorization: `Bearer ${t}` });
          assert.equal(res.statusCode, 401, what);
          assert.match(
            bearerChallenge(res),
            /^Bearer realm="[^"]+", error="invalid_token", error_description="[^"]+"$/,
            what,
          );
          assert.equal(res.json().code, 401, what);
          deprecationHeaders(res);
        }
      });

      it('a token whose user or grant is gone: 401 invalid_token', async () => {
        const gone = await seedUser(ctx, 1, 'gone2@example.org');
        const t1 = await mintUserToken(ctx, { accountId: gone.sub, clientId: client.clientId, scope: 'openid' });
        await ctx.store.db.deleteFrom('users').where('id', '=', gone.id).execute();
        const t2 = await mintUserToken(ctx, { accountId: sub, clientId: client.clientId, scope: 'openid' });
        const at = await ctx.provider.current().AccessToken.find(t2);
        await ctx.store.db
          .deleteFrom('oidc_payloads')
          .where('type', '=', 'Grant')
          .where('id', '=', at!.grantId)
          .execute();
        for (const t of [t1, t2]) {
          const res = await call('GET', '/userinfo', { authorization: `Bearer ${t}` });
          assert.equal(res.statusCode, 401);
          assert.match(bearerChallenge(res), /error="invalid_token"/);
        }
      });

      it('other methods: 405 with Allow', async () => {
        for (const method of ['POST', 'PUT', 'DELETE'] as const) {
          const res = await ctx.app.inject({ method, url: '/userinfo', headers: { authorization: `Bearer ${token}` } });
          assert.equal(res.statusCode, 405, method);
          assert.equal(res.headers.allow, 'GET, HEAD');
        }
      });

      it('counts legacy calls per client in /metrics', async () => {
        const metric = async () => {
          const text = (await call('GET', '/metrics')).body;
          const line = text
            .split('\n')
            .find(
              (l) =>
                l.startsWith('idp_legacy_requests_total{') &&
                l.includes('endpoint="userinfo"') &&
                l.includes(`client_id="${client.clientId}"`),
            );
          return line ? Number(line.split(' ').pop()) : 0;
        };
        const before = await metric();
        await call('GET', '/userinfo', { authorization: `Bearer ${token}` });
        await call('GET', '/userinfo', { authorization: `Bearer ${token}` });
        assert.equal(await metric(), before + 2);
      });

      it('sends Sunset when SUNSET_DATE is set', async () => {
        const other = await startTestApp(dialect, { SUNSET_DATE: '2027-06-30' });
        try {
          await seedOrg(other);
          const u = await seedUser(other, 1, 'carol@example.org');
          const c = await seedClient(other, { groups: ['userinfo-name'], redirectUris: [REDIRECT] });
          const t = await mintUserToken(other, { accountId: u.sub, clientId: c.clientId, scope: 'userinfo-name' });
          const ok = await other.app.inject({
            method: 'GET',
            url: '/userinfo',
            headers: { authorization: `Bearer ${t}` },
          });
          assert.equal(ok.statusCode, 200);
          assert.equal(ok.headers.sunset, 'Wed, 30 Jun 2027 00:00:00 GMT');
          deprecationHeaders(ok);
          const denied = await other.app.inject({ method: 'GET', url: '/userinfo' });
          assert.equal(denied.statusCode, 401);
          assert.equal(denied.headers.sunset, 'Wed, 30 Jun 2027 00:00:00 GMT');
        } finally {
          await other.close();
        }
      });
    });
  });
}
