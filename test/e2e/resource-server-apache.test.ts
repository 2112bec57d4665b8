// Resource servers that are not ours: Debian's Apache with mod_oauth2 and with mod_auth_openidc in
// its resource-server mode (AuthType oauth20), each protecting an API path by introspecting the
// presented access token at the discovery document's introspection_endpoint, authenticated as a
// client registered with `client add ... --introspection` through the admin CLI. A user's access
// token issued to a relying party is accepted (the user reaches the API as REMOTE_USER), and so is
// a client_credentials JWT access token; a bad token, and a user of an organization the resource
// server is not granted, are refused. mod_auth_openidc takes only an https introspection endpoint:
// Apache itself, on a second port with a throwaway certificate, passes that path on to the service,
// as a TLS-terminating proxy in front of it would.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { basicAuth, cli, dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { apacheMissing, startApache, type Apache } from './apache.ts';
import { freePort, startServer, type E2EServer } from './helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
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
  Require valid-user
  RequestHeader set X-Remote-User "%{REMOTE_USER}s"
  ProxyPass ${api}/
</Location>

<Location /mod-auth-openidc/>
  AuthType oauth20
  Require valid-user
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

    /** A signed-in user's access token for the relying party, from the token endpoint. */
    async function userToken(accountId: string): Promise<string> {
      const provider = server.provider.current();
      const grant = new provider.Grant({ accountId, clientId: rp.clientId });
      grant.addOIDCScope('openid');
      const grantId = await grant.save();
      const code = await new provider.AuthorizationCode({
        accountId,
        client: (await provider.Client.find(rp.clientId))!,
        grantId,
        scope: 'openid',
        redirectUri: REDIRECT,
        authTime: Math.floor(Date.now() / 1000),
        gty: 'authorization_code',
      }).save();
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

    const call = async (path: string, token: string) => {
      const res = await fetch(`${apache.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
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
    }
  });
}
