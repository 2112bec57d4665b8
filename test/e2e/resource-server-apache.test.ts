// Resource servers that are not ours: Debian's Apache with mod_oauth2 and with mod_auth_openidc in
// its resource-server mode (AuthType oauth20), each protecting an API path by introspecting the
// presented access token at the discovery document's introspection_endpoint, authenticated as a
// client registered with `client add ... --introspection` through the admin CLI. A user's access
// token issued to a relying party is accepted (the user reaches the API as REMOTE_USER), and so is
// a client_credentials JWT access token; a bad token, and a user of an organization the resource
// server is not granted, are refused. mod_auth_openidc takes only an https introspection endpoint:
// Apache itself, on a second port with a throwaway certificate, passes that path on to the service,
// as a TLS-terminating proxy in front of it would.
//
// DPoP (RFC 9449): mod_oauth2 on a third path takes the DPoP scheme and checks each proof itself
// (signature, htm, htu, iat, a proof not seen before) against the cnf.jkt of the introspection
// answer. A bound token is refused as a bearer token everywhere: at the DPoP path by its scheme, at
// the bearer paths by requiring the introspection answer's token_type to be Bearer. Debian
// bookworm's liboauth2 (1.4.5) does not compare a proof's ath with the token; the proofs here carry
// the right one all the same.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import * as oidc from 'openid-client';
import { calculateJwkThumbprint, decodeJwt, exportJWK, SignJWT, type JWK } from 'jose';
import { basicAuth, cli, dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { apacheMissing, startApache, type Apache } from './apache.ts';
import { freePort, startServer, type E2EServer } from './helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
const insecure = { execute: [oidc.allowInsecureRequests] };

interface Key {
  pair: CryptoKeyPair;
  jwk: JWK;
  jkt: string;
}

async function newKey(): Promise<Key> {
  const pair = await oidc.randomDPoPKeyPair('ES256', { extractable: true });
  const jwk = await exportJWK(pair.publicKey);
  return { pair, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

/** A DPoP proof for a GET of url with token, as a client builds one (RFC 9449 4.2). */
function proof(key: Key, url: string, token: string): Promise<string> {
  const ath = createHash('sha256').update(token).digest('base64url');
  return new SignJWT({ jti: randomUUID(), iat: Math.floor(Date.now() / 1000), htm: 'GET', htu: url, ath })
    .setProtectedHeader({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk })
    .sign(key.pair.privateKey);
}

const skip = apacheMissing(
  ['mod_oauth2.so', 'mod_auth_openidc.so', 'mod_proxy_http.so', 'mod_headers.so', 'mod_ssl.so'],
  'apache2, libapache2-mod-oauth2 and libapache2-mod-auth-openidc',
);

/** Both modules, each on its own path, in front of the same API; the API sees who Apache let in. */
function site(values: {
  introspection: string;
  clientId: string;
  secret: string;
  api: string;
  tlsPort: number;
  certificate: string;
}): string {
  const { introspection, clientId, secret, api, tlsPort, certificate } = values;
  return `
Listen 127.0.0.1:${tlsPort}
<VirtualHost 127.0.0.1:${tlsPort}>
  SSLEngine on
  SSLCertificateFile ${certificate}/cert.pem
  SSLCertificateKeyFile ${certificate}/key.pem
  ProxyPass /oauth/introspect ${introspection}
</VirtualHost>

OIDCCryptoPassphrase a-throwaway-passphrase-for-this-test-only
OIDCOAuthIntrospectionEndpoint https://127.0.0.1:${tlsPort}${new URL(introspection).pathname}
OIDCOAuthSSLValidateServer Off
OIDCOAuthIntrospectionEndpointAuth client_secret_basic
OIDCOAuthClientID ${clientId}
OIDCOAuthClientSecret ${secret}
OIDCOAuthRemoteUserClaim sub
OIDCOAuthTokenExpiryClaim exp absolute mandatory

<Location /mod-oauth2/>
  AuthType oauth2
  OAuth2TokenVerify introspect ${introspection} introspect.auth=client_secret_basic&client_id=${clientId}&client_secret=${secret}
  Require oauth2_claim token_type:Bearer
  RequestHeader set X-Remote-User "%{REMOTE_USER}s"
  ProxyPass ${api}/
</Location>

<Location /mod-oauth2-dpop/>
  AuthType oauth2
  OAuth2AcceptTokenIn header type=DPoP
  OAuth2TokenVerify introspect ${introspection} introspect.auth=client_secret_basic&client_id=${clientId}&client_secret=${secret}&type=dpop
  Require valid-user
  RequestHeader set X-Remote-User "%{REMOTE_USER}s"
  ProxyPass ${api}/
</Location>

<Location /mod-auth-openidc/>
  AuthType oauth20
  Require claim token_type:Bearer
  RequestHeader set X-Remote-User "%{REMOTE_USER}s"
  ProxyPass ${api}/
</Location>
`;
}

for (const dialect of dialects()) {
  describe(`Apache resource servers introspecting tokens (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let api: Server;
    let apache: Apache;
    let certificate: string;
    let sub: string;
    let otherSub: string;
    let rp: { clientId: string; secret: string };
    let batch: { clientId: string; secret: string };
    let resourceServer: { clientId: string; secret: string };
    let rpConfig: oidc.Configuration;
    let batchConfig: oidc.Configuration;
    const seen: IncomingHttpHeaders[] = [];

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      await seedOrg(server, 2, 'other.example.org', 'Other University');
      sub = (await seedUser(server, 1, 'ada@example.org')).sub;
      otherSub = (await seedUser(server, 2, 'bob@other.example.org')).sub;
      rp = await seedClient(server, { name: 'Course portal', redirectUris: [REDIRECT] });
      batch = await seedClient(server, { name: 'Batch job', scopes: ['passkey.read'] });
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
      const registered = JSON.parse(added.out) as { client_id: string; client_secret: string };
      resourceServer = { clientId: registered.client_id, secret: registered.client_secret };
      const discover = (client: { clientId: string; secret: string }) =>
        oidc.discovery(
          new URL(server.url),
          client.clientId,
          undefined,
          oidc.ClientSecretBasic(client.secret),
          insecure,
        );
      rpConfig = await discover(rp);
      batchConfig = await discover(batch);
      api = createServer((req, res) => {
        seen.push(req.headers);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ user: req.headers['x-remote-user'] ?? null }));
      });
      await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
      const metadata = (await (await fetch(`${server.url}/.well-known/openid-configuration`)).json()) as {
        introspection_endpoint: string;
      };
      certificate = mkdtempSync(join(tmpdir(), 'idp-tls-'));
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:P-256',
          '-nodes',
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
          '-keyout',
          join(certificate, 'key.pem'),
          '-out',
          join(certificate, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
      apache = await startApache(
        await freePort(),
        site({
          tlsPort: await freePort(),
          certificate,
          introspection: metadata.introspection_endpoint,
          clientId: registered.client_id,
          secret: registered.client_secret,
          api: `http://127.0.0.1:${(api.address() as AddressInfo).port}`,
        }),
        {
          modules: [
            'mpm_event',
            'authn_core',
            'authz_core',
            'authz_user',
            'headers',
            'proxy',
            'proxy_http',
            'ssl',
          ].concat('oauth2', 'auth_openidc'),
          logLevel: 'warn oauth2:info auth_openidc:info',
        },
      );
    });

    after(async () => {
      await apache?.stop();
      if (certificate) rmSync(certificate, { recursive: true, force: true });
      await new Promise<void>((resolve) => (api ? api.close(() => resolve()) : resolve()));
      await server?.close();
    });

    /** A code for the relying party, as the authorization endpoint stores it after sign-in and consent. */
    async function mintCode(accountId: string): Promise<string> {
      const provider = server.provider.current();
      const grant = new provider.Grant({ accountId, clientId: rp.clientId });
      grant.addOIDCScope('openid');
      const grantId = await grant.save();
      return new provider.AuthorizationCode({
        accountId,
        client: (await provider.Client.find(rp.clientId))!,
        grantId,
        scope: 'openid',
        redirectUri: REDIRECT,
        authTime: Math.floor(Date.now() / 1000),
        gty: 'authorization_code',
      }).save();
    }

    /** A signed-in user's access token for the relying party, from the token endpoint. */
    async function userToken(accountId: string): Promise<string> {
      const code = await mintCode(accountId);
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(rp.clientId, rp.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT }),
      });
      const body = (await res.json()) as { access_token: string };
      assert.equal(res.status, 200, JSON.stringify(body));
      return body.access_token;
    }

    async function clientCredentialsToken(): Promise<string> {
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(batch.clientId, batch.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'passkey.read' }),
      });
      assert.equal(res.status, 200);
      return ((await res.json()) as { access_token: string }).access_token;
    }

    /** A user's access token bound to key: the relying party (openid-client) sends DPoP proofs to the token endpoint. */
    async function boundUserToken(accountId: string, key: Key): Promise<string> {
      const tokens = await oidc.genericGrantRequest(
        rpConfig,
        'authorization_code',
        { code: await mintCode(accountId), redirect_uri: REDIRECT },
        { DPoP: oidc.getDPoPHandle(rpConfig, key.pair) },
      );
      assert.equal(tokens.token_type, 'dpop');
      return tokens.access_token;
    }

    /** A client_credentials JWT access token bound to key. */
    async function boundClientToken(key: Key): Promise<string> {
      const DPoP = oidc.getDPoPHandle(batchConfig, key.pair);
      const tokens = await oidc.clientCredentialsGrant(batchConfig, { scope: 'passkey.read' }, { DPoP });
      assert.equal(tokens.token_type, 'dpop');
      return tokens.access_token;
    }

    const call = async (path: string, token: string, scheme = 'Bearer', dpop?: string) => {
      const res = await fetch(`${apache.url}${path}`, {
        headers: { authorization: `${scheme} ${token}`, ...(dpop === undefined ? {} : { dpop }) },
      });
      return { status: res.status, text: await res.text() };
    };

    for (const module of ['mod-oauth2', 'mod-auth-openidc']) {
      it(`${module}: a user's access token issued to a relying party is accepted; the API sees the user`, async () => {
        const answer = await call(`/${module}/courses`, await userToken(sub));
        assert.equal(answer.status, 200, `${answer.text}\n${apache.log()}`);
        assert.deepEqual(JSON.parse(answer.text), { user: sub });
      });

      it(`${module}: a client_credentials JWT access token is accepted through introspection`, async () => {
        const answer = await call(`/${module}/courses`, await clientCredentialsToken());
        assert.equal(answer.status, 200, `${answer.text}\n${apache.log()}`);
        assert.deepEqual(JSON.parse(answer.text), { user: batch.clientId });
      });

      it(`${module}: a bad token, and a user of an organization it is not granted, are refused`, async () => {
        const before = seen.length;
        for (const token of ['not-a-token-the-service-issued', await userToken(otherSub)]) {
          const answer = await call(`/${module}/courses`, token);
          assert.equal(answer.status, 401, answer.text);
        }
        assert.equal(seen.length, before, 'the API was not reached');
      });

      it(`${module}: a DPoP-bound token presented as a bearer token is refused`, async () => {
        const before = seen.length;
        for (const token of [await boundUserToken(sub, await newKey()), await boundClientToken(await newKey())]) {
          const answer = await call(`/${module}/courses`, token);
          assert.equal(answer.status, 401, answer.text);
        }
        assert.equal(seen.length, before, 'the API was not reached');
      });
    }

    it("introspection gives a resource server a bound token's key: cnf.jkt and token_type DPoP, opaque and JWT", async () => {
      const key = await newKey();
      const user = await boundUserToken(sub, key);
      const client = await boundClientToken(key);
      assert.throws(() => decodeJwt(user), 'a user access token is opaque');
      assert.deepEqual(decodeJwt(client).cnf, { jkt: key.jkt });
      for (const token of [user, client]) {
        const res = await fetch(`${server.url}/oauth/introspect`, {
          method: 'POST',
          headers: {
            authorization: basicAuth(resourceServer.clientId, resourceServer.secret),
            'content-type': 'application/x-www-form-urlencoded',
          },
          body: new URLSearchParams({ token }),
        });
        assert.equal(res.status, 200);
        const answer = (await res.json()) as Record<string, unknown>;
        assert.equal(answer.active, true, JSON.stringify(answer));
        assert.equal(answer.token_type, 'DPoP');
        assert.deepEqual(answer.cnf, { jkt: key.jkt });
      }
    });

    describe('mod-oauth2 with DPoP', () => {
      const path = '/mod-oauth2-dpop/courses';
      const url = () => `${apache.url}${path}`;

      it("a user's bound token with proofs from openid-client holding the key is accepted; the API sees the user", async () => {
        const key = await newKey();
        const token = await boundUserToken(sub, key);
        const DPoP = oidc.getDPoPHandle(rpConfig, key.pair);
        for (let i = 0; i < 2; i++) {
          const res = await oidc.fetchProtectedResource(rpConfig, token, new URL(url()), 'GET', undefined, undefined, {
            DPoP,
          });
          const text = await res.text();
          assert.equal(res.status, 200, `${text}\n${apache.log()}`);
          assert.deepEqual(JSON.parse(text), { user: sub });
        }
      });

      it('a bound client_credentials JWT access token with a proof is accepted', async () => {
        const key = await newKey();
        const token = await boundClientToken(key);
        const answer = await call(path, token, 'DPoP', await proof(key, url(), token));
        assert.equal(answer.status, 200, `${answer.text}\n${apache.log()}`);
        assert.deepEqual(JSON.parse(answer.text), { user: batch.clientId });
      });

      it('refused: the bearer scheme, no proof, a proof by another key, a proof for another URL', async () => {
        const key = await newKey();
        const token = await boundUserToken(sub, key);
        const before = seen.length;
        const attempts = {
          'the bearer scheme': await call(path, token, 'Bearer', await proof(key, url(), token)),
          'no proof': await call(path, token, 'DPoP'),
          "another key's proof": await call(path, token, 'DPoP', await proof(await newKey(), url(), token)),
          'a proof for another URL': await call(
            path,
            token,
            'DPoP',
            await proof(key, `${apache.url}/mod-oauth2-dpop/other`, token),
          ),
        };
        for (const [what, answer] of Object.entries(attempts))
          assert.equal(answer.status, 401, `${what}: ${answer.text}`);
        assert.equal(seen.length, before, 'the API was not reached');
        // the token itself is good: with a proof of its key it gets through
        const ok = await call(path, token, 'DPoP', await proof(key, url(), token));
        assert.equal(ok.status, 200, `${ok.text}\n${apache.log()}`);
      });

      it('a proof presented a second time is refused', async () => {
        const key = await newKey();
        const token = await boundUserToken(sub, key);
        const once = await proof(key, url(), token);
        const first = await call(path, token, 'DPoP', once);
        assert.equal(first.status, 200, `${first.text}\n${apache.log()}`);
        const again = await call(path, token, 'DPoP', once);
        assert.equal(again.status, 401, again.text);
      });

      it('an unbound token under the DPoP scheme is refused, even with a proof', async () => {
        const key = await newKey();
        const token = await userToken(sub);
        const answer = await call(path, token, 'DPoP', await proof(key, url(), token));
        assert.equal(answer.status, 401, answer.text);
      });
    });
  });
}
