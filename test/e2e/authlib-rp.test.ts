// A relying party that is not ours: Debian's python3-authlib (with python3-requests), driven by
// test/e2e/rp/authlib_rp.py. It discovers the provider, builds the authorization URL (code flow,
// PKCE S256), serves its own redirect URI, exchanges the code with client_secret_basic, validates
// the ID token against the JWKS, fetches userinfo and introspects the access token, after a password
// sign-in in Chromium; with offline_access it refreshes and sees the refresh token rotate. It also
// fetches a client_credentials token with OAuth2Session and calls the passkey API with it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Browser, Page } from 'playwright-core';
import { dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { freePort, launchBrowser, startServer, submitPassword, type E2EServer } from './helpers.ts';

/** Debian's interpreter, where python3-authlib is installed (not whichever python3 is first on PATH). */
const PYTHON = process.env.RP_PYTHON || '/usr/bin/python3';
const SCRIPT = join(import.meta.dirname, 'rp', 'authlib_rp.py');
const PASSWORD = 'correct horse battery staple';

const probe = spawnSync(PYTHON, ['-c', 'import authlib, requests'], { encoding: 'utf8' });
const missing =
  probe.status === 0
    ? false
    : `python3-authlib and python3-requests are needed (.ci/run installs them): ${probe.stderr}`;
if (missing && process.env.CI === 'true') throw new Error(missing);

interface RpRun {
  /** the next JSON line the relying party prints */
  next(): Promise<Record<string, any>>;
  /** resolves when the script exits 0; rejects with its stderr otherwise */
  done: Promise<void>;
}

function runRp(mode: 'login' | 'api', config: Record<string, unknown>): RpRun {
  const child = spawn(PYTHON, [SCRIPT, mode, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const done = new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`authlib relying party exited ${code}:\n${stderr}`)),
    );
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  return {
    async next() {
      const line = await Promise.race([lines.next(), done.then(() => ({ done: true, value: undefined }))]);
      if (line.done || line.value === undefined) {
        await done;
        assert.fail(`the authlib relying party printed nothing more:\n${stderr}`);
      }
      return JSON.parse(line.value) as Record<string, any>;
    },
    done,
  };
}

/** In the browser: the password when the sign-in page asks for it, then Allow on the consent page. */
async function signInAndAllow(page: Page, authorizationUrl: string, redirectUri: string): Promise<void> {
  await page.goto(authorizationUrl);
  if (await page.locator('#password').count()) await submitPassword(page, 'ada@example.org', PASSWORD);
  // Not a first-party client: Ada allows it on the consent page, then the browser reaches the script.
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(redirectUri)),
    page.click('button[name=decision][value=allow]'),
  ]);
}

for (const dialect of dialects()) {
  describe(`python3-authlib as the relying party (${dialect})`, { skip: missing }, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let sub: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      sub = (
        await seedUser(server, 1, 'ada@example.org', {
          name: 'Ada Lovelace',
          email: 'ada@mail.example.org',
          password: PASSWORD,
        })
      ).sub;
      browser = await launchBrowser();
      page = await browser.newPage();
    });

    after(async () => {
      await browser?.close();
      await server?.close();
    });

    it('signs Ada in with the code flow and PKCE, validates the ID token and reads userinfo', async () => {
      const redirectUri = `http://127.0.0.1:${await freePort()}/oidc/callback`;
      const { clientId, secret } = await seedClient(server, {
        name: 'Python portal',
        redirectUris: [redirectUri],
        groups: ['userinfo-name', 'email', 'userid-idp'],
      });
      const rp = runRp('login', {
        issuer: server.url,
        client_id: clientId,
        client_secret: secret,
        redirect_uri: redirectUri,
        scope: 'openid profile email userid-idp',
      });
      const { authorization_url: authorizationUrl } = await rp.next();
      const url = new URL(authorizationUrl);
      assert.equal(url.origin + url.pathname, `${server.url}/oauth/authorization`);
      assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
      assert.match(url.searchParams.get('code_challenge') ?? '', /^[\w-]{43}$/);
      assert.ok(url.searchParams.get('nonce'));

      await signInAndAllow(page, authorizationUrl, redirectUri);
      const result = await rp.next();
      await rp.done;
      assert.equal(await page.textContent('#rp'), `signed in as ${sub}`);

      const ns = `${server.url}/claims`;
      assert.equal(result.token_type, 'Bearer');
      assert.deepEqual(result.scope.split(' ').sort(), ['email', 'openid', 'profile', 'userid-idp']);
      assert.equal(result.id_token_alg, 'RS256');
      assert.equal(result.id_token.iss, server.url);
      assert.equal(result.id_token.aud, clientId);
      assert.equal(result.id_token.sub, sub);
      // how Ada signed in (RFC 8176 amr; the REFEDS single-factor class for a password)
      assert.deepEqual(result.id_token.amr, ['pwd']);
      assert.equal(result.id_token.acr, 'https://refeds.org/profile/sfa');
      assert.equal(typeof result.id_token.auth_time, 'number');
      assert.deepEqual(result.userinfo, {
        sub,
        name: 'Ada Lovelace',
        email: 'ada@mail.example.org',
        email_verified: false,
        [`${ns}/userid_sec`]: ['idp:ada@example.org'],
        'idp-userid_sec': ['idp:ada@example.org'],
        'connect-userid_sec': ['idp:ada@example.org'],
        [`${ns}/eduPersonPrincipalName`]: 'ada@example.org',
      });
      // The client introspects its own access token (RFC 7662).
      assert.equal(result.introspection.active, true);
      assert.equal(result.introspection.client_id, clientId);
      assert.equal(result.introspection.sub, sub);
      assert.equal(result.refreshed, undefined, 'no refresh token without offline_access');
    });

    it('with offline_access and prompt=consent gets a refresh token that rotates on refresh', async () => {
      const redirectUri = `http://127.0.0.1:${await freePort()}/oidc/callback`;
      const { clientId, secret } = await seedClient(server, {
        name: 'Python portal, offline',
        redirectUris: [redirectUri],
        groups: ['userinfo-name'],
        scopes: ['offline_access'],
      });
      const rp = runRp('login', {
        issuer: server.url,
        client_id: clientId,
        client_secret: secret,
        redirect_uri: redirectUri,
        scope: 'openid profile offline_access',
        prompt: 'consent',
      });
      await signInAndAllow(page, (await rp.next()).authorization_url, redirectUri);
      const result = await rp.next();
      await rp.done;
      assert.deepEqual(result.scope.split(' ').sort(), ['offline_access', 'openid', 'profile']);
      assert.deepEqual(result.userinfo, { sub, name: 'Ada Lovelace' });
      assert.equal(result.refreshed.rotated, true);
      assert.equal(result.refreshed.access_token_works, true);
      // The replaced refresh token is refused.
      assert.deepEqual(result.reused_refresh_token, { status: 400, error: 'invalid_grant' });
    });

    it('signs Ada in as a public client: no secret, PKCE binds the code', async () => {
      const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
      const { clientId } = await seedClient(server, {
        name: 'Python timetable app',
        public: true,
        redirectUris: [redirectUri],
        groups: ['userinfo-name'],
      });
      const rp = runRp('login', {
        issuer: server.url,
        client_id: clientId,
        redirect_uri: redirectUri,
        scope: 'openid profile',
      });
      await signInAndAllow(page, (await rp.next()).authorization_url, redirectUri);
      const result = await rp.next();
      await rp.done;
      assert.equal(result.id_token.aud, clientId);
      assert.deepEqual(result.userinfo, { sub, name: 'Ada Lovelace' });
    });

    it('gets a client_credentials token with OAuth2Session and lists passkeys with it', async () => {
      const { clientId, secret } = await seedClient(server, {
        name: 'Python helpdesk',
        scopes: ['passkey.read'],
        orgs: [1],
      });
      const rp = runRp('api', {
        issuer: server.url,
        client_id: clientId,
        client_secret: secret,
        scope: 'passkey.read',
        org: 1,
      });
      const result = await rp.next();
      await rp.done;
      assert.equal(result.token_type, 'Bearer');
      assert.equal(result.scope, 'passkey.read');
      assert.equal(result.status, 200);
      assert.deepEqual(result.body, []);
    });
  });
}
