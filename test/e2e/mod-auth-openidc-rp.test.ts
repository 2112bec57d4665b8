// A relying party that is not ours: Debian's Apache with mod_auth_openidc, in a throwaway
// ServerRoot (no system configuration touched) listening on 127.0.0.1. Its site configuration is
// the one docs/connecting-applications.md gives application developers, with the example hosts
// replaced: it protects /app/, discovers the provider from its metadata URL, and passes the
// signed-in user's claims as OIDC_CLAIM_* headers to the application it proxies to. Chromium
// visits the protected page and signs in with a password.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { freePort, launchBrowser, startServer, submitPassword, type E2EServer } from './helpers.ts';
import { apacheMissing, startApache, type Apache } from './apache.ts';

const PASSWORD = 'correct horse battery staple';
const GUIDE = join(import.meta.dirname, '..', '..', 'docs', 'connecting-applications.md');

const skip = apacheMissing(['mod_auth_openidc.so', 'mod_proxy_http.so'], 'apache2 and libapache2-mod-auth-openidc');

/** The guide's mod_auth_openidc configuration (its one `apache` block), with the values a deployment fills in. */
function guideSite(values: { idp: string; site: string; app: string; clientId: string; secret: string }): string {
  const block = /```apache\n([\s\S]*?)```/.exec(readFileSync(GUIDE, 'utf8'))?.[1];
  assert.ok(block, 'docs/connecting-applications.md has an apache block');
  return block
    .replaceAll('https://idp.example.org', values.idp)
    .replaceAll('https://portal.example.org', values.site)
    .replaceAll('http://127.0.0.1:3000', values.app)
    .replace('<client_id>', values.clientId)
    .replace('<client_secret>', values.secret)
    .replace(/^OIDCCryptoPassphrase <[^>]*>$/m, 'OIDCCryptoPassphrase a-throwaway-passphrase-for-this-test-only');
}

for (const dialect of dialects()) {
  describe(`Apache mod_auth_openidc as the relying party (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let app: Server;
    let apache: Apache;
    let browser: Browser;
    let page: Page;
    let sub: string;
    let seen: IncomingHttpHeaders | undefined;
    let redirectUri: string;
    let site: string;
    const requested: string[] = [];

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
      // The protected application: it shows the claim headers Apache passes it.
      app = createServer((req, res) => {
        seen = req.headers;
        const claims = Object.fromEntries(Object.entries(req.headers).filter(([name]) => name.startsWith('oidc_')));
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><title>Protected</title><pre id="claims">${JSON.stringify(claims)}</pre>`);
      });
      await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
      const appPort = (app.address() as AddressInfo).port;
      const port = await freePort();
      // The redirect URI must be registered before Apache starts, so its port is chosen first.
      site = `http://127.0.0.1:${port}`;
      redirectUri = `${site}/oidc/callback`;
      const { clientId, secret } = await seedClient(server, {
        name: 'Course portal',
        redirectUris: [redirectUri],
        postLogoutRedirectUris: [`${site}/`],
        // mod_auth_openidc's back-channel logout endpoint is its redirect URI with logout=backchannel
        backchannelLogoutUri: `${redirectUri}?logout=backchannel`,
        groups: ['userid-idp', 'userinfo-name', 'email'],
      });
      apache = await startApache(
        port,
        guideSite({ idp: server.url, site, app: `http://127.0.0.1:${appPort}`, clientId, secret }),
        {
          modules: ['mpm_event', 'authn_core', 'authz_core', 'authz_user', 'proxy', 'proxy_http', 'auth_openidc'],
          logLevel: 'warn auth_openidc:info',
        },
      );
      browser = await launchBrowser();
      page = await browser.newPage();
      page.on('request', (request) => requested.push(request.url()));
    });

    after(async () => {
      await browser?.close();
      await apache?.stop();
      await new Promise<void>((resolve) => (app ? app.close(() => resolve()) : resolve()));
      await server?.close();
    });

    it('sends the browser to sign in, then shows the protected page with the claim headers', async () => {
      await page.goto(`${site}/app/`);
      assert.ok(page.url().startsWith(`${server.url}/interaction/`), `at the sign-in page, not ${page.url()}`);
      const authorization = new URL(requested.find((u) => u.startsWith(`${server.url}/oauth/authorization`))!);
      assert.equal(authorization.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(authorization.searchParams.get('response_type'), 'code');
      await submitPassword(page, 'ada@example.org', PASSWORD);
      if (await page.locator('button[name=decision][value=allow]').count()) {
        await Promise.all([
          page.waitForURL((u) => u.href.startsWith(`${site}/app/`)),
          page.click('button[name=decision][value=allow]'),
        ]);
      }
      await page.waitForURL((u) => u.href.startsWith(`${site}/app/`));
      const shown = JSON.parse((await page.textContent('#claims')) ?? '{}') as Record<string, string>;
      assert.equal(shown.oidc_claim_sub, sub, apache.log());
      assert.equal(shown.oidc_claim_name, 'Ada Lovelace');
      assert.equal(shown.oidc_claim_email, 'ada@mail.example.org');
      assert.equal(shown.oidc_claim_iss, server.url);
      assert.equal(shown.oidc_claim_acr, 'https://refeds.org/profile/sfa');
      assert.equal(shown.oidc_claim_amr, 'pwd');
      const eppn = Object.entries(shown).find(([name]) => name.endsWith('edupersonprincipalname'));
      assert.equal(eppn?.[1], 'ada@example.org', JSON.stringify(shown));
      assert.ok(seen?.oidc_access_token, 'the access token is passed on as well');
    });

    it('the access token Apache passes on is accepted by userinfo', async () => {
      const res = await fetch(`${server.url}/openid/userinfo`, {
        headers: { authorization: `Bearer ${String(seen?.oidc_access_token)}` },
      });
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { sub: string }).sub, sub);
    });

    it('a second visit is served from the Apache session without the provider', async () => {
      seen = undefined as IncomingHttpHeaders | undefined; // set again by the application
      requested.length = 0;
      const res = await page.goto(`${site}/app/`);
      assert.equal(res?.status(), 200);
      assert.equal(page.url(), `${site}/app/`);
      assert.equal(seen?.oidc_claim_sub, sub);
      assert.deepEqual(
        requested.filter((u) => u.startsWith(server.url)),
        [],
      );
    });

    it('claim headers sent by the browser are replaced, not passed on', async () => {
      await page.setExtraHTTPHeaders({
        OIDC_CLAIM_email: 'mallory@example.net',
        OIDC_CLAIM_nickname: 'mallory',
        'X-Sent-By-Browser': 'yes',
      });
      try {
        await page.goto(`${site}/app/`);
      } finally {
        await page.setExtraHTTPHeaders({});
      }
      assert.equal(seen?.oidc_claim_email, 'ada@mail.example.org');
      assert.equal(seen?.oidc_claim_nickname, undefined);
      assert.equal(seen?.['x-sent-by-browser'], 'yes', 'the browser did send its extra headers');
    });

    it('logout through mod_auth_openidc ends the provider session too', async () => {
      const back = `${site}/`;
      await page.goto(`${redirectUri}?logout=${encodeURIComponent(back)}`);
      assert.ok(
        page.url().startsWith(`${server.url}/openid/endsession`),
        `at the provider's logout, not ${page.url()}`,
      );
      await Promise.all([page.waitForURL((u) => u.href.startsWith(back)), page.click('#logout-yes')]);
      // Signed out on both sides: the protected page asks for the password again.
      await page.goto(`${site}/app/`);
      assert.ok(page.url().startsWith(`${server.url}/interaction/`), `at the sign-in page, not ${page.url()}`);
      assert.equal(await page.locator('#password').count(), 1);
    });

    it('signing out at the provider ends the Apache session through back-channel logout', async () => {
      await page.goto(`${site}/app/`);
      await submitPassword(page, 'ada@example.org', PASSWORD);
      await page.waitForURL((u) => u.href.startsWith(`${site}/app/`));
      assert.equal(seen?.oidc_claim_sub, sub);
      // Ada signs out on the provider's side, not through Apache.
      await page.goto(`${server.url}/openid/endsession`);
      await Promise.all([page.waitForEvent('load'), page.click('#logout-yes')]);
      // The logout token reaches Apache's redirect URI from the provider: the next visit asks for a sign-in.
      let at = '';
      for (let i = 0; i < 50; i++) {
        await page.goto(`${site}/app/`);
        at = page.url();
        if (at.startsWith(`${server.url}/interaction/`)) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.ok(at.startsWith(`${server.url}/interaction/`), `still signed in to Apache at ${at}:\n${apache.log()}`);
    });
  });
}
