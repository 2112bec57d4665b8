import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedClient,
  basicAuth,
  clientToken,
  PUBLIC_URL,
  type TestContext,
} from '../helpers.ts';

for (const dialect of dialects()) {
  describe(`client_credentials token endpoint (${dialect})`, () => {
    let ctx: TestContext;
    let client: { clientId: string; secret: string };
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      client = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
    });
    after(() => ctx.close());

    const tokenRequest = (body: Record<string, string>, headers: Record<string, string> = {}) =>
      ctx.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload: new URLSearchParams(body).toString(),
      });

    it('issues an RFC 9068 JWT access token that verifies against the JWKS', async () => {
      const res = await tokenRequest(
        { grant_type: 'client_credentials', scope: 'passkey.read' },
        { authorization: basicAuth(client.clientId, client.secret) },
      );
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.equal(body.token_type, 'Bearer');
      assert.equal(body.expires_in, 300);
      assert.equal(body.scope, 'passkey.read');
      const jwks = (await ctx.app.inject({ method: 'GET', url: '/openid/jwks' })).json();
      const { payload, protectedHeader } = await jwtVerify(body.access_token, createLocalJWKSet(jwks), {
        issuer: PUBLIC_URL,
        audience: `${PUBLIC_URL}/2/passkey`,
        typ: 'at+jwt',
      });
      assert.equal(protectedHeader.typ, 'at+jwt');
      assert.equal(protectedHeader.alg, 'ES256');
      assert.equal(payload.client_id, client.clientId);
      assert.equal(payload.sub, client.clientId);
      assert.equal(payload.scope, 'passkey.read');
      assert.equal(typeof payload.jti, 'string');
      assert.equal((payload.exp as number) - (payload.iat as number), 300);
    });

    it('accepts client_secret_post', async () => {
      const res = await tokenRequest({
        grant_type: 'client_credentials',
        scope: 'passkey.read passkey.delete',
        client_id: client.clientId,
        client_secret: client.secret,
      });
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().scope, 'passkey.read passkey.delete');
    });

    it('refuses a wrong secret with 401 invalid_client', async () => {
      const res = await tokenRequest(
        { grant_type: 'client_credentials', scope: 'passkey.read' },
        { authorization: basicAuth(client.clientId, `${client.secret}x`) },
      );
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error, 'invalid_client');
    });

    it('refuses an unknown client with 401 invalid_client', async () => {
      const res = await tokenRequest(
        { grant_type: 'client_credentials', scope: 'passkey.read' },
        { authorization: basicAuth('no-such-client', client.secret) },
      );
      assert.equal(res.statusCode, 401);
      assert.equal(res.json().error, 'invalid_client');
    });

    it('refuses a scope the client is not allowed with invalid_scope', async () => {
      const res = await tokenRequest(
        { grant_type: 'client_credentials', scope: 'system-check-user-existence' },
        { authorization: basicAuth(client.clientId, client.secret) },
      );
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().error, 'invalid_scope');
    });

    it('refuses a request without an API scope with invalid_scope', async () => {
      const res = await tokenRequest(
        { grant_type: 'client_credentials' },
        { authorization: basicAuth(client.clientId, client.secret) },
      );
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().error, 'invalid_scope');
    });

    it('a rotated secret without overlap takes effect within a second: the old one is refused, the new one works', async () => {
      const { rotateSecret } = await import('../../src/clients/index.ts');
      const c = await seedClient(ctx, { scopes: ['passkey.read'] });
      const request = (secret: string) =>
        tokenRequest(
          { grant_type: 'client_credentials', scope: 'passkey.read' },
          { authorization: basicAuth(c.clientId, secret) },
        );
      assert.equal((await request(c.secret)).statusCode, 200);
      const fresh = await rotateSecret(ctx.store, ctx.keys, c.clientId, { overlapMs: 0 });
      assert.equal(fresh.previousValidUntil, null);
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal((await request(c.secret)).statusCode, 401);
      assert.equal((await request(fresh.secret)).statusCode, 200);
    });

    it('during a rotation overlap both secrets work; after it only the new one', async () => {
      const { rotateSecret } = await import('../../src/clients/index.ts');
      const c = await seedClient(ctx, { scopes: ['passkey.read'] });
      const request = (secret: string) =>
        tokenRequest(
          { grant_type: 'client_credentials', scope: 'passkey.read' },
          { authorization: basicAuth(c.clientId, secret) },
        );
      const fresh = await rotateSecret(ctx.store, ctx.keys, c.clientId, { overlapMs: 2500 });
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal((await request(c.secret)).statusCode, 200, 'old secret during the overlap');
      assert.equal((await request(fresh.secret)).statusCode, 200, 'new secret during the overlap');
      assert.equal((await request('not-the-secret')).statusCode, 401);
      await new Promise((r) => setTimeout(r, 2600));
      assert.equal((await request(c.secret)).statusCode, 401, 'old secret after the overlap');
      assert.equal((await request(fresh.secret)).statusCode, 200);
    });

    it('honours ACCESS_TOKEN_TTL', async () => {
      const other = await startTestApp(dialect, { ACCESS_TOKEN_TTL: '120' });
      try {
        await seedOrg(other);
        const c = await seedClient(other, { scopes: ['passkey.read'] });
        const token = await clientToken(other, c.clientId, c.secret, 'passkey.read');
        const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
        assert.equal(payload.exp - payload.iat, 120);
      } finally {
        await other.close();
      }
    });

    it('serves discovery on the Feide-like paths with PUBLIC_URL as issuer, whatever the Host header', async () => {
      const res = await ctx.app.inject({
        method: 'GET',
        url: '/.well-known/openid-configuration',
        headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'http' },
      });
      assert.equal(res.statusCode, 200);
      const d = res.json();
      assert.equal(d.issuer, PUBLIC_URL);
      assert.equal(d.token_endpoint, `${PUBLIC_URL}/oauth/token`);
      assert.equal(d.authorization_endpoint, `${PUBLIC_URL}/oauth/authorization`);
      assert.equal(d.jwks_uri, `${PUBLIC_URL}/openid/jwks`);
      assert.equal(d.userinfo_endpoint, `${PUBLIC_URL}/openid/userinfo`);
      assert.equal(d.end_session_endpoint, `${PUBLIC_URL}/openid/endsession`);
      assert.ok(d.grant_types_supported.includes('client_credentials'));
      assert.deepEqual(d.code_challenge_methods_supported, ['S256']);
    });

    it('publishes one ES256 and one RS256 public key, without private parts', async () => {
      const jwks = (await ctx.app.inject({ method: 'GET', url: '/openid/jwks' })).json();
      assert.deepEqual(jwks.keys.map((k: { alg: string }) => k.alg).sort(), ['ES256', 'RS256']);
      for (const k of jwks.keys) assert.equal(k.d, undefined);
    });

    it('token header kid names a published key', async () => {
      const token = await clientToken(ctx, client.clientId, client.secret, 'passkey.read');
      const jwks = (await ctx.app.inject({ method: 'GET', url: '/openid/jwks' })).json();
      assert.ok(jwks.keys.some((k: { kid: string }) => k.kid === decodeProtectedHeader(token).kid));
    });
  });
}
