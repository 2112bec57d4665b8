// Signing in as another user in real Chromium with an openid-client relying party: prompt=login
// while someone is signed in, switching back, signing out first; and prompt=login asking for the
// password once, also when a consent page follows.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { dialects, seedOrg, seedUser } from '../helpers.ts';
import type { User } from '../../src/store/directory.ts';
import {
  launchBrowser,
  startRelyingParty,
  startServer,
  submitPassword,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';

for (const dialect of dialects()) {
  describe(`switching user in a browser (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let rp: RelyingParty;
    let other: RelyingParty;
    let ada: User;
    let bob: User;
    /** the last sign-in's tokens: each test starts where the one before left the browser */
    let last: Awaited<ReturnType<typeof signInOnce>>;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      bob = await seedUser(server, 1, 'bob@example.org', { name: 'Bob', password: PASSWORD });
      // Not first-party: each user is asked for consent once, so a consent page follows the sign-in.
      rp = await startRelyingParty(server, { groups: ['userinfo-name'] });
      other = await startRelyingParty(server, { name: 'Another application', groups: ['email'] });
      browser = await launchBrowser();
      page = await (await browser.newContext()).newPage();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await other?.close();
      await server?.close();
    });

    const isPage = (via: RelyingParty) => (u: URL) =>
      u.href.startsWith(via.redirectUri) || /^\/interaction\/[^/]+$/.test(u.pathname);
    /** the next sign-in, consent or relying-party page; a provider error page fails the test at once */
    async function settle(via: RelyingParty, from?: string) {
      await page
        .waitForURL((u) => u.href !== from && isPage(via)(u), { timeout: 10_000 })
        .catch(async () => assert.fail(`stuck on ${page.url()}: ${await page.textContent('body')}`));
    }

    /**
     * The relying party's request, exactly one password submission, consent when asked, and the
     * code exchange. Fails at once when a sign-in page shows up again after the password.
     */
    async function signInOnce(user: User, params: Record<string, string> = {}, via = rp) {
      const begun = await via.begin(params);
      await page.goto(begun.url);
      assert.equal(await page.locator('#password-form').count(), 1, 'the sign-in page is shown');
      await submitPassword(page, user.eppn, PASSWORD);
      await settle(via);
      for (let step = 0; !page.url().startsWith(via.redirectUri); step++) {
        assert.equal(
          await page.locator('#password-form').count(),
          0,
          `asked to sign in again: ${await page.textContent('main')}`,
        );
        assert.ok(
          step < 2 && (await page.locator('button[name=decision][value=allow]').count()),
          `unexpected page: ${await page.textContent('main')}`,
        );
        await Promise.all([settle(via, page.url()), page.click('button[name=decision][value=allow]')]);
      }
      const tokens = await via.finish(page.url(), begun);
      assert.equal(tokens.claims()!.sub, user.sub);
      return tokens;
    }

    const userinfoStatus = async (accessToken: string) =>
      (await fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } })).status;

    it('prompt=login while signed in asks for the password once, also when a consent page follows', async () => {
      last = await signInOnce(ada);
      // Signed in; the other application was never allowed, so consent follows the password.
      await signInOnce(ada, { prompt: 'login' }, other);
      last = await signInOnce(ada, { prompt: 'login' });
    });

    it('prompt=login lets another user sign in: the old session ends, the new user gets the code', async () => {
      const adas = last;
      assert.equal(await userinfoStatus(adas.access_token), 200);
      await signInOnce(bob, { prompt: 'login' });
      await page.goto(`${server.url}/account`);
      assert.match((await page.textContent('.subtitle')) ?? '', /bob@example\.org/);
      // Ending Ada's session revoked what was issued in it.
      assert.equal(await userinfoStatus(adas.access_token), 401);
    });

    it('and back again: the first user signs in over the second', async () => {
      last = await signInOnce(ada, { prompt: 'login' });
      await page.goto(`${server.url}/account`);
      assert.match((await page.textContent('.subtitle')) ?? '', /ada@example\.org/);
    });

    it('after signing out, another user signs in without prompt=login', async () => {
      await page.goto(
        oidc.buildEndSessionUrl(rp.config, {
          id_token_hint: last.id_token!,
          post_logout_redirect_uri: rp.postLogoutRedirectUri,
        }).href,
      );
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(rp.postLogoutRedirectUri)),
        page.click('#logout-yes'),
      ]);
      await signInOnce(bob);
      await signInOnce(bob, { prompt: 'login' });
    });
  });
}
