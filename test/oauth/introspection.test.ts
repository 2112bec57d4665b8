// Token introspection (RFC 7662, JWT answers per RFC 9701), revocation (RFC 7009) and the RFC 8414
// metadata, over real HTTP with openid-client as the client library. A client sees only what it may
// see: its own tokens, tokens whose audience names it, or, as a resource server registered with
// --introspection, the access tokens of its organizations' users and the service's JWT access
// tokens; everything else, and every token that is not live, is `{ "active": false }`.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { dialects, seedOrg, seedUser, seedClient, basicAuth, cli } from '../helpers.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { setClientEnabled, updateClient } from '../../src/clients/index.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
const JWT_TYPE = 'application/token-introspection+jwt';

interface Registered {
  clientId: string;
  secret: string;
}

interface Tokens {
  access_token: string;
  refresh_token: string;
}

for (const dialect of dialects()) {
  describe(`token introspection and revocation (${dialect})`, () => {
    let server: E2EServer;
    let sub: string;
    let otherOrgSub: string;
    let rp: Registered;
    let resourceServer: Registered;
    let otherRp: Registered;
    let gateway: Registered;
    let publicRp: { clientId: string };

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      await seedOrg(server, 2, 'other.example.org', 'Other University');
      sub = (await seedUser(server, 1, 'ada@example.org')).sub;
      otherOrgSub = (await seedUser(server, 2, 'bob@other.example.org')).sub;
      rp = await seedClient(server, { name: 'Course portal', redirectUris: [REDIRECT], scopes: ['offline_access'] });
      otherRp = await seedClient(server, { name: 'Library', redirectUris: [REDIRECT], scopes: ['offline_access'] });
      gateway = await seedClient(server, { name: 'API gateway', scopes: ['passkey.read'] });
      publicRp = await seedClient(server, { name: 'App', redirectUris: [REDIRECT], public: true });
      // registered the way an operator does: the admin CLI
      const added = await cli(server.config.databaseUrl, [
        'client',
        'add',
        '--name',
        'Course API',
        '--scopes',
        'passkey.read',
        '--orgs',
        '1',
        '--introspection',
        '--json',
      ]);
      assert.equal(added.code, 0, added.err);
      const view = JSON.parse(added.out) as { client_id: string; client_secret: string; introspection: boolean };
      assert.equal(view.introspection, true);
      resourceServer = { clientId: view.client_id, secret: view.client_secret };
    });
    after(() => server?.close());

    /** openid-client configured from the RFC 8414 metadata for a confidential client. */
    function rpConfig(client: Registered, metadata: Partial<oidc.ClientMetadata> = {}) {
      return oidc.discovery(new URL(server.url), client.clientId, metadata, oidc.ClientSecretBasic(client.secret), {
        execute: [oidc.allowInsecureRequests],
        algorithm: 'oauth2',
      });
    }

    /** A signed-in user's tokens for a client: a code as the authorization endpoint stores it, redeemed. */
    async function signIn(client: Registered, scope = 'openid offline_access'): Promise<Tokens> {
      const provider = server.provider.current();
      const grant = new provider.Grant({ accountId: sub, clientId: client.clientId });
      grant.addOIDCScope(scope);
      const grantId = await grant.save();
      const code = await new provider.AuthorizationCode({
        accountId: sub,
        client: (await provider.Client.find(client.clientId))!,
        grantId,
        scope,
        redirectUri: REDIRECT,
        authTime: Math.floor(Date.now() / 1000),
        gty: 'authorization_code',
      }).save();
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(client.clientId, client.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT }),
      });
      const body = (await res.json()) as Tokens;
      assert.equal(res.status, 200, JSON.stringify(body));
      return body;
    }

    /** An opaque access token issued to `clientId` for a user, with the given audience and lifetime. */
    async function accessToken(
      clientId: string,
      options: { aud?: string; expiresIn?: number; accountId?: string } = {},
    ): Promise<string> {
      const provider = server.provider.current();
      const accountId = options.accountId ?? sub;
      const grant = new provider.Grant({ accountId, clientId });
      grant.addOIDCScope('openid');
      const grantId = await grant.save();
      const token = new provider.AccessToken({
        accountId,
        client: (await provider.Client.find(clientId))!,
        grantId,
        scope: 'openid',
        gty: 'authorization_code',
        ...(options.aud ? { aud: options.aud } : {}),
        ...(options.expiresIn ? { expiresIn: options.expiresIn } : {}),
      });
      return token.save();
    }

    async function post(path: string, form: Record<string, string>, headers: Record<string, string> = {}) {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form),
      });
      const text = await res.text();
      return {
        status: res.status,
        headers: res.headers,
        text,
        json: () => JSON.parse(text) as Record<string, unknown>,
      };
    }

    const introspect = (client: Registered, form: Record<string, string>, headers: Record<string, string> = {}) =>
      post('/oauth/introspect', form, { authorization: basicAuth(client.clientId, client.secret), ...headers });

    async function assertInactive(client: Registered, form: Record<string, string>, why: string) {
      const res = await introspect(client, form);
      assert.equal(res.status, 200, `${why}: ${res.text}`);
      assert.deepEqual(res.json(), { active: false }, why);
    }

    it('both metadata documents are one document and advertise introspection and revocation', async () => {
      const [openid, oauth] = await Promise.all(
        ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'].map(async (path) => {
          const res = await fetch(`${server.url}${path}`);
          assert.equal(res.status, 200, path);
          assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
          return (await res.json()) as Record<string, unknown>;
        }),
      );
      assert.deepEqual(oauth, openid);
      assert.equal(oauth!.issuer, server.url);
      assert.equal(oauth!.introspection_endpoint, `${server.url}/oauth/introspect`);
      assert.equal(oauth!.revocation_endpoint, `${server.url}/oauth/revoke`);
      assert.ok((oauth!.introspection_signing_alg_values_supported as string[]).includes('RS256'));
      // openid-client's RFC 8414 discovery accepts it (it checks the issuer against the URL)
      const config = await rpConfig(rp);
      assert.equal(config.serverMetadata().introspection_endpoint, `${server.url}/oauth/introspect`);
    });

    it("a client introspects its own access and refresh tokens (openid-client's tokenIntrospection)", async () => {
      const tokens = await signIn(rp);
      const config = await rpConfig(rp);
      const at = await oidc.tokenIntrospection(config, tokens.access_token);
      assert.equal(at.active, true);
      assert.equal(at.client_id, rp.clientId);
      assert.equal(at.sub, sub);
      assert.equal(at.token_type, 'Bearer');
      assert.deepEqual(new Set(at.scope!.split(' ')), new Set(['openid', 'offline_access']));
      assert.equal(at.iss, server.url);
      const now = Math.floor(Date.now() / 1000);
      assert.ok(at.iat! <= now + 1 && at.iat! > now - 60, `iat ${at.iat}`);
      assert.ok(at.exp! > now, `exp ${at.exp}`);

      const rt = await oidc.tokenIntrospection(config, tokens.refresh_token, { token_type_hint: 'refresh_token' });
      assert.equal(rt.active, true);
      assert.equal(rt.client_id, rp.clientId);
      assert.equal(rt.sub, sub);
      assert.ok(rt.exp! > at.exp!, 'a refresh token outlives its access token');
      assert.equal(rt.token_type, undefined, 'a refresh token is not a bearer token for an API');
    });

    it('Accept: application/token-introspection+jwt gets a signed JWT answer (RFC 9701)', async () => {
      const tokens = await signIn(rp);
      const res = await introspect(rp, { token: tokens.access_token }, { accept: JWT_TYPE });
      assert.equal(res.status, 200, res.text);
      assert.match(res.headers.get('content-type') ?? '', /^application\/token-introspection\+jwt/);
      const { payload, protectedHeader } = await jwtVerify(
        res.text,
        createRemoteJWKSet(new URL(`${server.url}/openid/jwks`)),
        { issuer: server.url, audience: rp.clientId, typ: 'token-introspection+jwt' },
      );
      assert.equal(protectedHeader.alg, 'RS256');
      const answer = payload.token_introspection as Record<string, unknown>;
      assert.equal(answer.active, true);
      assert.equal(answer.client_id, rp.clientId);
      assert.equal(answer.sub, sub);

      // openid-client asks for and validates the JWT form when the client says it wants it
      const config = await rpConfig(rp, { introspection_signed_response_alg: 'RS256' });
      const viaLibrary = await oidc.tokenIntrospection(config, tokens.access_token);
      assert.equal(viaLibrary.active, true);
      assert.equal(viaLibrary.sub, sub);

      // an inactive token is a JWT too, and says only that
      const inactive = await introspect(rp, { token: 'no-such-token' }, { accept: JWT_TYPE });
      assert.equal(decodeProtectedHeader(inactive.text).typ, 'token-introspection+jwt');
      const { payload: none } = await jwtVerify(
        inactive.text,
        createRemoteJWKSet(new URL(`${server.url}/openid/jwks`)),
        { issuer: server.url, audience: rp.clientId },
      );
      assert.deepEqual(none.token_introspection, { active: false });
    });

    it('a resource server introspects the tokens whose audience names it, and no others', async () => {
      const forGateway = await accessToken(rp.clientId, { aud: gateway.clientId });
      const config = await rpConfig(gateway);
      const seen = await oidc.tokenIntrospection(config, forGateway);
      assert.equal(seen.active, true);
      assert.equal(seen.client_id, rp.clientId);
      assert.equal(seen.aud, gateway.clientId);
      assert.equal(seen.sub, sub);
      // the client the token was issued to sees it as well
      assert.equal((await oidc.tokenIntrospection(await rpConfig(rp), forGateway)).active, true);

      const tokens = await signIn(rp);
      await assertInactive(gateway, { token: tokens.access_token }, "a token without the gateway's audience");
      await assertInactive(gateway, { token: tokens.refresh_token }, 'a refresh token of another client');
      const forOther = await accessToken(rp.clientId, { aud: 'https://api.other.example' });
      await assertInactive(gateway, { token: forOther }, 'a token for another audience');
    });

    it("another client sees nothing of a client's tokens", async () => {
      const tokens = await signIn(rp);
      await assertInactive(otherRp, { token: tokens.access_token }, "another client's access token");
      await assertInactive(otherRp, { token: tokens.refresh_token }, "another client's refresh token");
      await assertInactive(
        otherRp,
        { token: tokens.access_token, token_type_hint: 'access_token' },
        "another client's access token, with a hint",
      );
    });

    it('a public client cannot authenticate: 401, and nothing about the token, not even its own', async () => {
      const own = await accessToken(publicRp.clientId);
      for (const token of [own, 'no-such-token']) {
        const res = await post('/oauth/introspect', { token, client_id: publicRp.clientId });
        assert.equal(res.status, 401, res.text);
        assert.equal(res.json().error, 'invalid_client');
        assert.equal(res.json().active, undefined);
        assert.match(res.headers.get('www-authenticate') ?? '', /^Basic realm="/);
      }
    });

    it('unknown, expired and revoked tokens are inactive; hints never make a live token inactive', async () => {
      await assertInactive(rp, { token: 'no-such-token' }, 'an unknown token');
      await assertInactive(rp, { token: 'no-such-token', token_type_hint: 'refresh_token' }, 'unknown, with a hint');
      await assertInactive(rp, { token: 'no-such-token', token_type_hint: 'id_token' }, 'unknown, with an odd hint');
      await assertInactive(rp, { token: 'x'.repeat(2000) }, 'an absurdly long token');

      const expiring = await accessToken(rp.clientId, { expiresIn: 1 });
      assert.equal((await introspect(rp, { token: expiring })).json().active, true);
      await new Promise((r) => setTimeout(r, 2100));
      await assertInactive(rp, { token: expiring }, 'an expired token');

      // RFC 7662 2.1: a hint that does not fit, or that the server does not know, only widens the search
      const tokens = await signIn(rp);
      for (const hint of ['refresh_token', 'id_token', 'no_such_hint']) {
        const res = await introspect(rp, { token: tokens.access_token, token_type_hint: hint });
        assert.equal(res.json().active, true, `hint ${hint}`);
      }
    });

    it('the endpoint requires client authentication and a token', async () => {
      const tokens = await signIn(rp);
      // RFC 7662 2.1: no client authentication at all is a 401 with a challenge, like a wrong secret
      const anonymous = await post('/oauth/introspect', { token: tokens.access_token });
      assert.equal(anonymous.status, 401, anonymous.text);
      assert.equal(anonymous.json().error, 'invalid_client');
      assert.equal(anonymous.json().active, undefined);
      assert.equal(anonymous.headers.get('www-authenticate'), `Basic realm="${server.url}"`);
      const anonymousJwt = await post('/oauth/introspect', { token: tokens.access_token }, { accept: JWT_TYPE });
      assert.equal(anonymousJwt.status, 401, 'nor does asking for a JWT answer change that');

      const wrongSecret = await post(
        '/oauth/introspect',
        { token: tokens.access_token },
        { authorization: basicAuth(rp.clientId, 'not-the-secret') },
      );
      assert.equal(wrongSecret.status, 401, wrongSecret.text);
      assert.equal(wrongSecret.json().error, 'invalid_client');
      assert.match(wrongSecret.headers.get('www-authenticate') ?? '', /^Basic /);

      const idOnly = await post('/oauth/introspect', { token: tokens.access_token, client_id: rp.clientId });
      assert.equal(idOnly.status, 401, 'a confidential client must present its secret');
      assert.equal(idOnly.json().error, 'invalid_client');

      const noToken = await introspect(rp, {});
      assert.equal(noToken.status, 400);
      assert.equal(noToken.json().error, 'invalid_request');

      const get = await fetch(`${server.url}/oauth/introspect?token=${tokens.access_token}`, {
        headers: { authorization: basicAuth(rp.clientId, rp.secret) },
      });
      assert.notEqual(get.status, 200, 'tokens are never taken from the query');
      await get.arrayBuffer();
    });

    /** A client_credentials JWT access token (RFC 9068) from the token endpoint. */
    async function jwtAccessToken(client: Registered, scope = 'passkey.read'): Promise<string> {
      const issued = await post(
        '/oauth/token',
        { grant_type: 'client_credentials', scope },
        { authorization: basicAuth(client.clientId, client.secret) },
      );
      assert.equal(issued.status, 200, issued.text);
      const token = issued.json().access_token as string;
      assert.equal(decodeProtectedHeader(token).typ, 'at+jwt');
      return token;
    }

    it('a JWT access token (client_credentials) is introspected by its client, as JSON and as a JWT', async () => {
      const token = await jwtAccessToken(gateway);
      const seen = await oidc.tokenIntrospection(await rpConfig(gateway), token);
      assert.equal(seen.active, true);
      assert.equal(seen.client_id, gateway.clientId);
      assert.equal(seen.sub, gateway.clientId);
      assert.equal(seen.scope, 'passkey.read');
      assert.equal(seen.aud, `${server.url}/2/passkey`);
      assert.equal(seen.iss, server.url);
      assert.equal(seen.token_type, 'Bearer');
      assert.ok(seen.exp! > Math.floor(Date.now() / 1000));
      assert.equal(typeof seen.jti, 'string');

      // RFC 9701: the same answer signed, through openid-client
      const signed = await oidc.tokenIntrospection(
        await rpConfig(gateway, { introspection_signed_response_alg: 'RS256' }),
        token,
      );
      assert.equal(signed.active, true);
      assert.equal(signed.client_id, gateway.clientId);
      const raw = await introspect(gateway, { token }, { accept: JWT_TYPE });
      assert.match(raw.headers.get('content-type') ?? '', /^application\/token-introspection\+jwt/);
      const { payload } = await jwtVerify(raw.text, createRemoteJWKSet(new URL(`${server.url}/openid/jwks`)), {
        issuer: server.url,
        audience: gateway.clientId,
        typ: 'token-introspection+jwt',
      });
      assert.equal((payload.token_introspection as Record<string, unknown>).active, true);
    });

    it('a JWT access token is seen by a resource server granted introspection, by no other client', async () => {
      const token = await jwtAccessToken(gateway);
      const seen = await introspect(resourceServer, { token, token_type_hint: 'access_token' });
      assert.equal(seen.status, 200, seen.text);
      assert.equal(seen.json().active, true);
      assert.equal(seen.json().client_id, gateway.clientId);
      await assertInactive(otherRp, { token }, 'a client that is neither its own nor a resource server');
      const asJwt = await introspect(otherRp, { token }, { accept: JWT_TYPE });
      const { payload } = await jwtVerify(asJwt.text, createRemoteJWKSet(new URL(`${server.url}/openid/jwks`)), {
        issuer: server.url,
        audience: otherRp.clientId,
      });
      assert.deepEqual(payload.token_introspection, { active: false });
    });

    it('a forged, altered or foreign JWT is inactive, and so are the tokens of a disabled client', async () => {
      const token = await jwtAccessToken(gateway);
      const [header, body, signature] = token.split('.');
      const claims = JSON.parse(Buffer.from(body!, 'base64url').toString()) as Record<string, unknown>;
      const altered = Buffer.from(JSON.stringify({ ...claims, scope: 'passkey.delete' })).toString('base64url');
      await assertInactive(gateway, { token: `${header}.${altered}.${signature}` }, 'an altered JWT');
      const unsigned = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${body}.`;
      await assertInactive(gateway, { token: unsigned }, 'an unsigned JWT');
      // an ID token is signed by the service but is not an access token
      const idToken = await new (server.provider.current().IdToken)(
        { sub },
        { client: (await server.provider.current().Client.find(rp.clientId))! },
      ).issue({ use: 'idtoken' });
      await assertInactive(rp, { token: idToken }, 'an ID token');

      const doomed = await seedClient(server, { name: 'Batch job', scopes: ['passkey.read'] });
      const doomedToken = await jwtAccessToken(doomed);
      assert.equal((await introspect(resourceServer, { token: doomedToken })).json().active, true);
      await setClientEnabled(server.store, doomed.clientId, false);
      await assertInactive(resourceServer, { token: doomedToken }, 'a token of a disabled client');
    });

    it("a resource server granted introspection sees its organizations' users' access tokens, nothing else", async () => {
      // issued to another client, naming no audience: what a relying party sends to an API
      const tokens = await signIn(rp);
      const seen = await oidc.tokenIntrospection(await rpConfig(resourceServer), tokens.access_token);
      assert.equal(seen.active, true);
      assert.equal(seen.client_id, rp.clientId);
      assert.equal(seen.sub, sub);
      assert.equal(seen.token_type, 'Bearer');
      assert.deepEqual(new Set(seen.scope!.split(' ')), new Set(['openid', 'offline_access']));

      await assertInactive(resourceServer, { token: tokens.refresh_token }, "another client's refresh token");
      const otherOrg = await accessToken(rp.clientId, { accountId: otherOrgSub });
      await assertInactive(resourceServer, { token: otherOrg }, 'a user of an organization it is not granted');
      assert.equal((await introspect(rp, { token: otherOrg })).json().active, true, 'its own client still sees it');
      // a client without --introspection (the gateway has organizations too) does not see it
      const gatewayWithOrg = await seedClient(server, { name: 'Old gateway', scopes: ['passkey.read'], orgs: [1] });
      await assertInactive(gatewayWithOrg, { token: tokens.access_token }, 'a client not granted introspection');

      // the grant is withdrawn (client update --no-introspection): at once, and audited
      const withdrawn = await cli(server.config.databaseUrl, [
        'client',
        'update',
        resourceServer.clientId,
        '--no-introspection',
      ]);
      assert.equal(withdrawn.code, 0, withdrawn.err);
      // the CLI is another process: the service hears of the change within a fraction of a second
      for (let i = 0; i < 40 && (await introspect(resourceServer, { token: tokens.access_token })).json().active; i++)
        await new Promise((r) => setTimeout(r, 100));
      await assertInactive(resourceServer, { token: tokens.access_token }, 'after --no-introspection');
      await updateClient(server.store, resourceServer.clientId, { introspection: true });
      assert.equal((await introspect(resourceServer, { token: tokens.access_token })).json().active, true);
      const audit = await listAuditEvents(server.store.db, { subject: resourceServer.clientId });
      const actions = audit.map((a) => [a.kind, JSON.parse(a.details) as Record<string, unknown>] as const);
      assert.ok(actions.some(([action, d]) => action === 'client.add' && d.introspection === true));
      assert.ok(actions.some(([action, d]) => action === 'client.update' && d.introspection === false));
      assert.ok(actions.some(([action, d]) => action === 'client.update' && d.introspection === true));
    });

    it('client add --help lists --introspection; a public client cannot have it', async () => {
      const help = await cli(server.config.databaseUrl, ['client', 'add', '--help']);
      assert.match(help.out, /--introspection/);
      const refused = await cli(server.config.databaseUrl, [
        'client',
        'add',
        '--name',
        'SPA',
        '--public',
        '--redirect-uri',
        REDIRECT,
        '--introspection',
      ]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.err, /--introspection/);
    });

    it('a client revokes only its own tokens; introspection then says inactive', async () => {
      const tokens = await signIn(rp);
      const revoke = (client: Registered, form: Record<string, string>) =>
        post('/oauth/revoke', form, { authorization: basicAuth(client.clientId, client.secret) });

      const refused = await revoke(otherRp, { token: tokens.access_token });
      assert.equal(refused.status, 400, refused.text);
      assert.equal(refused.json().error, 'invalid_request');
      const byPublic = await post('/oauth/revoke', { token: tokens.access_token, client_id: publicRp.clientId });
      assert.equal(byPublic.status, 200, "a public client learns nothing about others' tokens");
      assert.equal((await introspect(rp, { token: tokens.access_token })).json().active, true, 'still live');

      // revoking an access token revokes the tokens issued under its grant with it (oidc-provider)
      const config = await rpConfig(rp);
      await oidc.tokenRevocation(config, tokens.access_token);
      await assertInactive(rp, { token: tokens.access_token }, 'a revoked access token');
      await assertInactive(rp, { token: tokens.refresh_token }, 'the refresh token of its grant');

      // revoking a refresh token ends its grant: the access tokens issued under it die too
      const again = await signIn(rp);
      await oidc.tokenRevocation(config, again.refresh_token, { token_type_hint: 'refresh_token' });
      await assertInactive(rp, { token: again.refresh_token }, 'a revoked refresh token');
      await assertInactive(rp, { token: again.access_token }, 'an access token of a revoked grant');
      const refreshed = await post(
        '/oauth/token',
        { grant_type: 'refresh_token', refresh_token: again.refresh_token },
        { authorization: basicAuth(rp.clientId, rp.secret) },
      );
      assert.equal(refreshed.status, 400);
      assert.equal(refreshed.json().error, 'invalid_grant');
      // revoking an unknown or already revoked token is not an error (RFC 7009 2.2)
      assert.equal((await revoke(rp, { token: again.refresh_token })).status, 200);
      assert.equal((await revoke(rp, { token: 'no-such-token' })).status, 200);
    });
  });
}
