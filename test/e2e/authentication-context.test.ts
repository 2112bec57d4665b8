// What a relying party learns about a sign-in and how it asks for a stronger one, in real Chromium
// with an openid-client relying party: amr (RFC 8176) and acr in the ID token, acr_values=phr and an
// essential acr forcing a passkey (step-up), max_age, unregistered standard scopes, offline_access.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { dialects, seedOrg, seedUser } from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import type { User } from '../../src/store/directory.ts';
import { ACR_BASELINE, ACR_MFA } from '../../src/oauth/authentication-context.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type Begun,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';

interface Device {
  context: BrowserContext;
  page: Page;
}

/** A context of its own (its own cookies) with a platform authenticator on its page. */
async function device(browser: Browser, options: { synced?: boolean } = {}): Promise<Device> {
  const context = await browser.newContext();
  await withoutPasskeyAutofill(context);
  const page = await context.newPage();
  await addVirtualAuthenticator(page, options);
  return { context, page };
}

/** Signs in with the password on /account and registers a passkey there. */
async function registerPasskey(server: E2EServer, page: Page, user: User): Promise<void> {
  await page.goto(`${server.url}/account`);
  if (!(await page.locator('#register-button').count())) await submitPassword(page, user.eppn, PASSWORD);
  await Promise.all([page.waitForURL(`${server.url}/account?done=added`), page.click('#register-button')]);
}

/** The relying party's request, answered by the passkey button on the sign-in page. */
async function passkeySignIn(page: Page, rp: RelyingParty, params: Record<string, string> = {}) {
  const begun = await rp.begin(params);
  await page.goto(begun.url);
  return passkeyOnCurrentPage(page, rp, begun);
}

async function passkeyOnCurrentPage(page: Page, rp: RelyingParty, begun: Begun) {
  await page.waitForSelector('#passkey-button:not([hidden])');
  await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.click('#passkey-button')]);
  return rp.finish(page.url(), begun);
}

/** The request goes straight back to the relying party (the session is enough) and is redeemed. */
async function silently(page: Page, rp: RelyingParty, params: Record<string, string> = {}) {
  const begun = await rp.begin(params);
  await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.goto(begun.url)]);
  return rp.finish(page.url(), begun);
}

const now = () => Math.floor(Date.now() / 1000);

for (const dialect of dialects()) {
  describe(`authentication context: amr, acr, step-up, max_age and scopes (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let rp: RelyingParty;
    let user: User;
    let main: Device;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      user = await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD });
      rp = await startRelyingParty(server, { groups: ['userinfo-name', 'email'], firstParty: true });
      browser = await launchBrowser();
      main = await device(browser);
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    it('discovery advertises the acr values and the claims parameter', async () => {
      const meta = rp.config.serverMetadata();
      assert.ok(meta.acr_values_supported?.includes('phr'), 'phr');
      assert.ok(meta.acr_values_supported?.includes(ACR_BASELINE), 'the baseline');
      assert.equal(meta.claims_parameter_supported, true);
      for (const claim of ['acr', 'amr', 'auth_time']) assert.ok(meta.claims_supported?.includes(claim), claim);
    });

    it('a password sign-in gives amr ["pwd"], the baseline acr and auth_time', async () => {
      const started = now();
      const tokens = await passwordSignInThroughRelyingParty(main.page, rp, user.eppn, PASSWORD);
      const claims = tokens.claims()!;
      assert.deepEqual(claims.amr, ['pwd']);
      assert.equal(claims.acr, ACR_BASELINE);
      assert.equal(typeof claims.auth_time, 'number');
      assert.ok(claims.auth_time! >= started - 1 && claims.auth_time! <= now() + 1);
    });

    it('acr_values=phr after a password sign-in asks for a passkey: no password form, and a password is refused', async () => {
      // The user has no passkey yet: the page explains how to get one.
      const begun = await rp.begin({ acr_values: 'phr' });
      await main.page.goto(begun.url);
      assert.match(main.page.url(), /\/interaction\//, 'a sign-in page, not straight back');
      assert.equal(await main.page.locator('#password-form').count(), 0, 'no password form');
      assert.equal(await main.page.locator('#password').count(), 0);
      assert.match((await main.page.textContent('.notice')) ?? '', /phishing-resistant sign-in.*passkey/);
      assert.equal(await main.page.locator('#passkey-form').count(), 1);
      // A password posted to this sign-in anyway (an old form, a script) is refused.
      const csrf = await main.page.locator('input[name=_csrf]').first().inputValue();
      const refused = await main.page.request.post(`${main.page.url()}/login`, {
        form: { username: user.eppn, password: PASSWORD, _csrf: csrf },
        maxRedirects: 0,
      });
      assert.equal(refused.status(), 403);
      assert.match(await refused.text(), /A password is not enough for this application/);
      assert.doesNotMatch(await refused.text(), /id="password-form"/);
    });

    it('the same step-up page in Norwegian', async () => {
      const begun = await rp.begin({ acr_values: 'phr', ui_locales: 'nb' });
      await main.page.goto(begun.url);
      assert.match((await main.page.textContent('.notice')) ?? '', /phishing-sikker innlogging/);
      assert.equal(await main.page.locator('#password-form').count(), 0);
    });

    it('a device-bound passkey with user verification gives hwk, user, mfa and acr phr', async () => {
      await registerPasskey(server, main.page, user);
      const [row] = await listUserCredentials(server.store.db, user.id);
      assert.equal(row!.backup_eligible, 0);
      const tokens = await passkeySignIn(main.page, rp, { acr_values: 'phr' });
      const claims = tokens.claims()!;
      assert.deepEqual(claims.amr, ['hwk', 'user', 'mfa']);
      assert.equal(claims.acr, 'phr');
      assert.ok(Math.abs(claims.auth_time! - now()) <= 5);
      // The session reached phr: a further phr request needs no sign-in.
      const again = await silently(main.page, rp, { acr_values: 'phr' });
      assert.equal(again.claims()!.acr, 'phr');
    });

    it('a request for MFA steps up to a user-verified passkey and records it; AAL3 needs an attested authenticator', async () => {
      const mfa = await passkeySignIn(main.page, rp, { acr_values: ACR_MFA });
      assert.equal(mfa.claims()!.acr, ACR_MFA);
      // Recorded MFA satisfies a weaker request without a sign-in.
      assert.equal((await silently(main.page, rp, { acr_values: 'phr' })).claims()!.acr, ACR_MFA);
      // Chromium's virtual authenticator has no attestation the imported metadata vouches for: asked
      // for AAL3 or MFA, the session's MFA is the answer.
      const aal3 = await silently(main.page, rp, { acr_values: `phrh ${ACR_MFA}` });
      assert.equal(aal3.claims()!.acr, ACR_MFA);
    });

    it('an essential acr in the claims parameter after a password sign-in also asks for the passkey', async () => {
      await passwordSignInThroughRelyingParty(main.page, rp, user.eppn, PASSWORD, { prompt: 'login' });
      const claims = JSON.stringify({ id_token: { acr: { essential: true, values: ['phr'] } } });
      const begun = await rp.begin({ claims });
      await main.page.goto(begun.url);
      assert.equal(await main.page.locator('#password-form').count(), 0, 'no password form');
      const tokens = await passkeyOnCurrentPage(main.page, rp, begun);
      assert.equal(tokens.claims()!.acr, 'phr');
    });

    it('acr_values naming the baseline too lets a password session through', async () => {
      await passwordSignInThroughRelyingParty(main.page, rp, user.eppn, PASSWORD, { prompt: 'login' });
      const tokens = await silently(main.page, rp, { acr_values: `phr ${ACR_BASELINE}` });
      assert.equal(tokens.claims()!.acr, ACR_BASELINE);
    });

    it('max_age asks for a new sign-in once the last one is older', async () => {
      const first = (await silently(main.page, rp)).claims()!;
      await new Promise((r) => setTimeout(r, 2100));
      // Within the age: no sign-in; the ID token carries the same auth_time.
      const within = await silently(main.page, rp, { max_age: '600' });
      assert.equal(within.claims()!.auth_time, first.auth_time);
      const begun = await rp.begin({ max_age: '1' });
      await main.page.goto(begun.url);
      assert.match(main.page.url(), /\/interaction\//, 'the sign-in page');
      await submitPassword(main.page, user.eppn, PASSWORD);
      await main.page.waitForURL((u) => u.href.startsWith(rp.redirectUri));
      const tokens = await rp.finish(main.page.url(), begun);
      assert.ok(tokens.claims()!.auth_time! > first.auth_time!, 'a new auth_time');
    });

    it('a synced (backup-eligible) passkey gives swk', async () => {
      const synced = await device(browser, { synced: true });
      try {
        await registerPasskey(server, synced.page, user);
        const rows = await listUserCredentials(server.store.db, user.id);
        assert.equal(rows.length, 2);
        assert.equal(rows.filter((r) => r.backup_eligible === 1 && r.backup_state === 1).length, 1);
        const tokens = await passkeySignIn(synced.page, rp, { prompt: 'login' });
        assert.deepEqual(tokens.claims()!.amr, ['swk', 'user', 'mfa']);
        assert.equal(tokens.claims()!.acr, 'phr');
      } finally {
        await synced.context.close();
      }
    });

    it('standard scopes the client is not registered for are dropped; the token response says what was granted', async () => {
      const tokens = await silently(main.page, rp, { scope: 'openid profile email address phone' });
      assert.deepEqual(tokens.scope?.split(' ').sort(), ['email', 'openid', 'profile']);
      const info = await oidc.fetchUserInfo(rp.config, tokens.access_token, tokens.claims()!.sub);
      assert.equal(info.name, 'Ada Lovelace');
      assert.equal(info.address, undefined);
      assert.equal(info.phone_number, undefined);
    });

    it('offline_access without prompt=consent gives a refresh token to a client registered for it', async () => {
      const tokens = await silently(main.page, rp, { scope: 'openid offline_access' });
      assert.ok(tokens.refresh_token, 'a refresh token');
      assert.ok(tokens.scope?.split(' ').includes('offline_access'));
      const refreshed = await oidc.refreshTokenGrant(rp.config, tokens.refresh_token);
      assert.ok(refreshed.access_token);
    });

    it('offline_access with prompt=consent, then without: the consent page asks once, both give refresh tokens', async () => {
      const thirdParty = await startRelyingParty(server, { name: 'Course portal', groups: ['userinfo-name'] });
      try {
        const begun = await thirdParty.begin({ scope: 'openid offline_access', prompt: 'consent' });
        await main.page.goto(begun.url);
        assert.match((await main.page.textContent('body')) ?? '', /while you are not signed in/);
        await Promise.all([
          main.page.waitForURL((u) => u.href.startsWith(thirdParty.redirectUri)),
          main.page.click('button[name=decision][value=allow]'),
        ]);
        const consented = await thirdParty.finish(main.page.url(), begun);
        assert.ok(consented.refresh_token, 'a refresh token with prompt=consent');
        const remembered = await silently(main.page, thirdParty, { scope: 'openid offline_access' });
        assert.ok(remembered.refresh_token, 'a refresh token without prompt=consent, consent remembered');
      } finally {
        await thirdParty.close();
      }
    });

    it('a client not registered for refresh tokens asking for offline_access signs in without one', async () => {
      const noRefresh = await startRelyingParty(server, {
        name: 'No refresh',
        firstParty: true,
        grantTypes: ['authorization_code'],
      });
      try {
        const tokens = await silently(main.page, noRefresh, { scope: 'openid offline_access' });
        assert.equal(tokens.refresh_token, undefined);
        assert.equal(tokens.scope, 'openid');
      } finally {
        await noRefresh.close();
      }
    });
  });
}
