// A user signed in to a relying party is deactivated by the organization's directory over SCIM
// (PATCH active=false, as Entra ID sends it): the session is dead, the refresh token stops
// working, sign-in shows the disabled page; active=true restores sign-in. The provisioning token
// comes from the admin CLI (scim token create --json). Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { basicAuth, cli, dialects, seedOrg, seedUser } from '../helpers.ts';
import {
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const DISABLED = /This account is disabled/;
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

for (const dialect of dialects()) {
  describe(`SCIM deactivation of a signed-in user (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let rp: RelyingParty;
    let token: string;
    let id: string;

    const scim = (method: string, path: string, body?: unknown) =>
      fetch(`${server.url}/scim/v2${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/scim+json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const setActive = (value: string) =>
      scim('PATCH', `/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'active', value }] });
    const refresh = (refreshToken: string) =>
      fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(rp.clientId, rp.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken }),
      });
    const signIn = () =>
      passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
        scope: 'openid offline_access',
        prompt: 'login consent',
      });

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      await seedUser(server, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      const made = await cli(server.config.databaseUrl, [
        'scim',
        'token',
        'create',
        '--org',
        '1',
        '--name',
        'Entra ID',
        '--json',
      ]);
      assert.equal(made.code, 0, made.err);
      token = (JSON.parse(made.out) as { token: string }).token;
      const found = await scim('GET', `/Users?filter=${encodeURIComponent('userName eq "ada@example.org"')}`);
      id = ((await found.json()) as { Resources: { id: string }[] }).Resources[0]!.id;
      rp = await startRelyingParty(server, { firstParty: true, scopes: ['offline_access'] });
      browser = await launchBrowser();
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      page = await context.newPage();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    it('active=false ends the session and the refresh token at once; sign-in shows the disabled page', async () => {
      const tokens = await signIn();
      const userinfo = () =>
        fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal((await userinfo()).status, 200);

      const r = await setActive('False');
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { active: boolean }).active, false);

      assert.equal((await userinfo()).status, 401);
      const refreshed = await refresh(tokens.refresh_token!);
      assert.equal(refreshed.status, 400);
      assert.equal(((await refreshed.json()) as { error: string }).error, 'invalid_grant');
      await page.goto(`${server.url}/account`);
      assert.equal(await page.locator('#password-form').count(), 1, 'the browser session ended');

      await page.goto((await rp.begin()).url);
      const refused = page.waitForResponse((res) => res.request().method() === 'POST' && /\/login$/.test(res.url()));
      await submitPassword(page, 'ada@example.org', PASSWORD);
      assert.equal((await refused).status(), 403);
      assert.match((await page.textContent('body')) ?? '', DISABLED);
    });

    it('active=true restores sign-in', async () => {
      const r = await setActive('True');
      assert.equal(((await r.json()) as { active: boolean }).active, true);
      const tokens = await signIn();
      assert.equal((await refresh(tokens.refresh_token!)).status, 200);
    });
  });
}
