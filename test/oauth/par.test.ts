// Pushed authorization requests (RFC 9126) over real HTTP, with openid-client as the relying party:
// every client may push; a client registered with --require-par must; a request_uri works once and
// only until it expires.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import { cli, dialects, seedClient, seedOrg } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';

const REDIRECT = 'https://rp.example.test/callback';
const PAR_URN = 'urn:ietf:params:oauth:request_uri:';

for (const dialect of dialects()) {
  describe(`pushed authorization requests (${dialect})`, () => {
    let server: E2EServer;
    let plain: oidc.Configuration;
    let strict: oidc.Configuration;

    const configFor = (clientId: string, secret: string) =>
      oidc.discovery(new URL(server.url), clientId, undefined, oidc.ClientSecretBasic(secret), {
        execute: [oidc.allowInsecureRequests],
      });

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      const a = await seedClient(server, { redirectUris: [REDIRECT] });
      const b = await seedClient(server, { redirectUris: [REDIRECT], requirePar: true });
      plain = await configFor(a.clientId, a.secret);
      strict = await configFor(b.clientId, b.secret);
    });
    after(() => server?.close());

    const params = async () => ({
      redirect_uri: REDIRECT,
      scope: 'openid',
      code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()),
      code_challenge_method: 'S256',
      state: oidc.randomState(),
    });

    /** The authorization endpoint's answer: where it sends the browser. */
    async function authorize(url: URL): Promise<{ status: number; location: URL }> {
      const res = await fetch(url, { redirect: 'manual' });
      await res.body?.cancel();
      return { status: res.status, location: new URL(res.headers.get('location') ?? '/', server.url) };
    }

    /** The authorization endpoint refused the request: back to the client with the error. */
    function assertRefused(answer: { status: number; location: URL }, error: string) {
      assert.equal(answer.status, 303);
      assert.equal(`${answer.location.origin}${answer.location.pathname}`, REDIRECT);
      assert.equal(answer.location.searchParams.get('error'), error);
    }

    const idOf = (url: URL) => url.searchParams.get('request_uri')!.slice(PAR_URN.length);

    it('client add --require-par stores the requirement; client show prints it', async () => {
      const url = server.config.databaseUrl;
      const added = await cli(url, [
        'client',
        'add',
        '--name',
        'Pushing RP',
        '--redirect-uri',
        REDIRECT,
        '--require-par',
        '--json',
      ]);
      assert.equal(added.code, 0, added.err);
      const { client_id: id, require_pushed_authorization_requests: required } = JSON.parse(added.out) as {
        client_id: string;
        require_pushed_authorization_requests: boolean;
      };
      assert.equal(required, true);
      const shown = await cli(url, ['client', 'show', id]);
      assert.match(shown.out, /require_pushed_authorization_requests +true/);
      const metadata = (await server.provider.current().Client.find(id))?.metadata();
      assert.equal(metadata?.require_pushed_authorization_requests, true);

      const other = await cli(url, ['client', 'add', '--name', 'Plain RP', '--redirect-uri', REDIRECT, '--json']);
      assert.equal((JSON.parse(other.out) as Record<string, unknown>).require_pushed_authorization_requests, false);
      const api = await cli(url, ['client', 'add', '--name', 'API', '--scopes', 'passkey.read', '--require-par']);
      assert.equal(api.code, 1);
      assert.match(api.err, /authorization_code/);
    });

    it('discovery names the PAR endpoint', () => {
      const metadata = plain.serverMetadata();
      assert.equal(metadata.pushed_authorization_request_endpoint, `${server.url}/oauth/par`);
    });

    it('a pushed request is accepted and starts the sign-in', async () => {
      const url = await oidc.buildAuthorizationUrlWithPAR(plain, await params());
      assert.equal(url.searchParams.get('client_id'), plain.clientMetadata().client_id);
      assert.ok(url.searchParams.get('request_uri')!.startsWith(PAR_URN));
      assert.equal(url.searchParams.get('redirect_uri'), null, 'the parameters travel in the pushed request only');
      const answer = await authorize(url);
      assert.equal(answer.status, 303);
      assert.match(answer.location.pathname, /^\/interaction\//);
    });

    it('a client not required to push may still send a plain authorization request', async () => {
      const answer = await authorize(oidc.buildAuthorizationUrl(plain, await params()));
      assert.equal(answer.status, 303);
      assert.match(answer.location.pathname, /^\/interaction\//);
    });

    it('a client registered with require_pushed_authorization_requests may not skip PAR', async () => {
      const provider = server.provider.current();
      const client = await provider.Client.find(strict.clientMetadata().client_id);
      assert.equal(client?.requirePushedAuthorizationRequests, true);

      const answer = await authorize(oidc.buildAuthorizationUrl(strict, await params()));
      assertRefused(answer, 'invalid_request');
      assert.match(answer.location.searchParams.get('error_description') ?? '', /Pushed Authorization Request/);

      const pushed = await authorize(await oidc.buildAuthorizationUrlWithPAR(strict, await params()));
      assert.equal(pushed.status, 303);
      assert.match(pushed.location.pathname, /^\/interaction\//);
    });

    it('a used request_uri is refused', async () => {
      const url = await oidc.buildAuthorizationUrlWithPAR(strict, await params());
      const provider = server.provider.current();
      // what the authorization endpoint does when it answers the pushed request with a code
      const par = await provider.PushedAuthorizationRequest.find(idOf(url));
      assert.ok(par);
      await par.consume();
      assertRefused(await authorize(url), 'invalid_request_uri');
      // a second consumption of the same request (two tabs finishing at once) fails as well
      await assert.rejects(par.consume(), (err: { error?: string }) => err.error === 'invalid_request_uri');
    });

    it('an expired request_uri is refused', async () => {
      const url = await oidc.buildAuthorizationUrlWithPAR(strict, await params());
      const provider = server.provider.current();
      const par = await provider.PushedAuthorizationRequest.find(idOf(url));
      assert.ok(par);
      await par.save(1);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      assertRefused(await authorize(url), 'invalid_request_uri');
    });

    it('an unknown request_uri is refused', async () => {
      const url = new URL(`${server.url}/oauth/authorization`);
      url.searchParams.set('client_id', strict.clientMetadata().client_id);
      url.searchParams.set('request_uri', `${PAR_URN}not-a-pushed-request`);
      assertRefused(await authorize(url), 'invalid_request_uri');
    });

    it('a pushed request must come from the authenticated client', async () => {
      const res = await fetch(`${server.url}/oauth/par`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          client_id: strict.clientMetadata().client_id,
          response_type: 'code',
          ...(await params()),
        }),
      });
      assert.equal(res.status, 401);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_client');
    });
  });
}
