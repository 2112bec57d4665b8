// The whole journey in real Chromium against a listening server, with an openid-client relying
// party: password sign-in, passkey registration on /account, logout, passkey sign-in, rename,
// delete, and the password still working; the passkey API sees each step.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { dialects, seedOrg, seedUser, seedClient, clientToken } from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import { findUserByEppn, type User } from '../../src/store/directory.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import {
  addVirtualAuthenticator,
  copyCredential,
  withoutPasskeyAutofill,
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  type E2EServer,
  type RelyingParty,
  type VirtualAuthenticator,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const CHROMIUM_VIRTUAL_AAGUID = '01020304-0506-0708-0102-030405060708';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

for (const dialect of dialects()) {
  describe(`sign-in with password and passkey in a browser (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    let authenticator: VirtualAuthenticator;
    let rp: RelyingParty;
    let user: User;
    let apiToken: string;
    let idToken: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      user = await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD });
      rp = await startRelyingParty(server, { groups: ['userinfo-name', 'userid-idp'] });
      const admin = await seedClient(server, { name: 'Helpdesk', scopes: ['passkey.read'], orgs: [1] });
      apiToken = await clientToken(server, admin.clientId, admin.secret, 'passkey.read');
      browser = await launchBrowser();
      context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      page = await context.newPage();
      authenticator = await addVirtualAuthenticator(page);
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    const apiList = async () => {
      const res = await fetch(`${server.url}/2/passkey/1?eppn=${encodeURIComponent(user.eppn)}`, {
        headers: { authorization: `Bearer ${apiToken}` },
      });
      assert.equal(res.status, 200);
      return (await res.json()) as Record<string, unknown>[];
    };

    it('signs in with a password through the relying party, which validates the ID token', async () => {
      const tokens = await passwordSignInThroughRelyingParty(page, rp, user.eppn, PASSWORD);
      const claims = tokens.claims()!;
      assert.equal(claims.sub, user.sub);
      assert.equal(claims.iss, server.url);
      assert.equal(claims.aud, rp.clientId);
      idToken = tokens.id_token!;
    });

    it('shows the account page to the signed-in user, with no passkeys yet and the password working', async () => {
      await page.goto(`${server.url}/account`);
      assert.match((await page.textContent('h1')) ?? '', /Your account/);
      assert.match((await page.textContent('.subtitle')) ?? '', /ada@example\.org/);
      assert.equal(await page.locator('#no-passkeys').count(), 1);
      assert.match((await page.textContent('#password-status')) ?? '', /password works/);
    });

    it('registers a passkey on /account and stores every field', async () => {
      await Promise.all([page.waitForURL(`${server.url}/account?done=added`), page.click('#register-button')]);
      assert.match((await page.textContent('.notice')) ?? '', /passkey was added/);
      assert.equal(await page.locator('li.passkey').count(), 1);
      const rows = await listUserCredentials(server.store.db, user.id);
      assert.equal(rows.length, 1);
      const row = rows[0]!;
      const [credential] = await authenticator.credentials();
      assert.equal(
        Buffer.from(row.credential_id).toString('base64url'),
        Buffer.from(credential!.credentialId, 'base64').toString('base64url'),
      );
      assert.equal(credential!.isResidentCredential, true, 'the passkey is discoverable');
      assert.equal(credential!.rpId, 'localhost');
      assert.equal(row.mfa_verified, 1);
      assert.equal(row.last_used_at, null);
      assert.ok(Math.abs(row.created_at - Date.now()) < 60_000);
      assert.match(row.aaguid, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.ok(Array.isArray(JSON.parse(row.transports)));
      assert.ok(row.public_key.length > 60, 'COSE public key stored');
      assert.ok([0, 1].includes(row.backup_eligible) && [0, 1].includes(row.backup_state));
      // Chromium's virtual authenticator has no known model: the passkey is named after the browser.
      assert.equal(row.label, 'Chrome on Linux');
      assert.equal(await page.textContent('li.passkey h3'), row.label);
      assert.equal(await page.textContent('li.passkey .last-used'), 'Never');
    });

    it('the passkey API lists the new passkey with the right fields', async () => {
      const [rows, list] = [await listUserCredentials(server.store.db, user.id), await apiList()];
      assert.equal(list.length, 1);
      const p = list[0]!;
      assert.equal(p.id, rows[0]!.id);
      assert.equal(p.eppn, 'ada@example.org');
      assert.equal(p.label, rows[0]!.label);
      assert.match(String(p.created_at), ISO);
      assert.equal(p.last_used_at, null);
      assert.equal(p.mfa_verified, true);
      // Chromium's virtual CTAP2 authenticator reports this AAGUID in its attested credential data.
      assert.equal(p.aaguid, CHROMIUM_VIRTUAL_AAGUID);
      assert.equal(rows[0]!.aaguid, CHROMIUM_VIRTUAL_AAGUID);
      assert.notEqual(p.aaguid, ZERO_AAGUID);
    });

    it('signs out through the relying party (RP-initiated logout) and the account page is signed out too', async () => {
      const url = oidc.buildEndSessionUrl(rp.config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: rp.postLogoutRedirectUri,
      });
      await page.goto(url.href);
      assert.match((await page.textContent('h1')) ?? '', /Sign out/);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(rp.postLogoutRedirectUri)),
        page.click('#logout-yes'),
      ]);
      const account = await page.request.get(`${server.url}/account`);
      assert.match(await account.text(), /<h1>Sign in<\/h1>/);
    });

    it('signs in with the passkey (one button, no username) and the relying party gets a valid ID token', async () => {
      const begun = await rp.begin();
      // Every interaction page the browser is shown: the sign-in page, and a consent page if one were asked.
      const shown: Promise<string>[] = [];
      const onResponse = (r: import('playwright-core').Response) => {
        if (
          r.request().method() === 'GET' &&
          r.request().isNavigationRequest() &&
          /\/interaction\/[^/]+$/.test(new URL(r.url()).pathname)
        )
          shown.push(r.text());
      };
      page.on('response', onResponse);
      await page.goto(begun.url);
      assert.equal(await page.getAttribute('#username', 'autocomplete'), 'username webauthn');
      assert.equal(await page.getAttribute('#password', 'autocomplete'), 'current-password');
      await page.waitForSelector('#passkey-button:not([hidden])');
      await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.click('#passkey-button')]);
      const tokens = await rp.finish(page.url(), begun);
      const claims = tokens.claims()!;
      assert.equal(claims.sub, user.sub);
      page.off('response', onResponse);
      const pages = await Promise.all(shown);
      assert.equal(pages.length, 1, 'one interaction page: the sign-in page');
      assert.match(pages[0]!, /id="passkey-button"/);
      assert.ok(
        !pages.some((html) => /\/consent"/.test(html) || /wants to use your account/.test(html)),
        'no consent page: consent is remembered',
      );
      idToken = tokens.id_token!;
      const [row] = await listUserCredentials(server.store.db, user.id);
      assert.ok(row!.last_used_at !== null && Math.abs(row!.last_used_at - Date.now()) < 60_000, 'last_used_at set');
      const [credential] = await authenticator.credentials();
      assert.equal(Number(row!.sign_count), credential!.signCount);
      const [listed] = await apiList();
      assert.match(String(listed!.last_used_at), ISO);
    });

    it('passkey autofill on the username field (conditional mediation) signs in on another device', async () => {
      const other = await browser.newContext();
      try {
        const otherPage = await other.newPage();
        await copyCredential(authenticator, await addVirtualAuthenticator(otherPage));
        const before = (await listUserCredentials(server.store.db, user.id))[0]!;
        const begun = await rp.begin();
        // No click: the virtual authenticator answers the autofill request as a person picking the suggestion would.
        await Promise.all([otherPage.waitForURL((u) => u.href.startsWith(rp.redirectUri)), otherPage.goto(begun.url)]);
        const tokens = await rp.finish(otherPage.url(), begun);
        assert.equal(tokens.claims()!.sub, user.sub);
        const after = (await listUserCredentials(server.store.db, user.id))[0]!;
        assert.ok(Number(after.sign_count) > Number(before.sign_count));
      } finally {
        await other.close();
      }
    });

    it('signs in on the account page itself with the passkey', async () => {
      const other = await browser.newContext();
      try {
        await withoutPasskeyAutofill(other);
        const otherPage = await other.newPage();
        // The autofill test's device has moved the counter past this authenticator's own.
        const stored = Number((await listUserCredentials(server.store.db, user.id))[0]!.sign_count);
        await copyCredential(authenticator, await addVirtualAuthenticator(otherPage), stored + 100);
        await otherPage.goto(`${server.url}/account`);
        await otherPage.waitForSelector('#passkey-button:not([hidden])');
        await Promise.all([otherPage.waitForEvent('load'), otherPage.click('#passkey-button')]);
        assert.equal(otherPage.url(), `${server.url}/account`);
        assert.match((await otherPage.textContent('h1')) ?? '', /Your account/);
        assert.equal(await otherPage.locator('li.passkey').count(), 1);
      } finally {
        await other.close();
      }
    });

    it('renames the passkey on /account', async () => {
      await page.goto(`${server.url}/account`);
      // A name that would display as something else (a right-to-left override) is refused.
      await page.fill('li.passkey input[name=label]', 'Work \u202Epotpal');
      await Promise.all([page.waitForEvent('load'), page.click('li.passkey form.rename button')]);
      assert.match((await page.textContent('.alert')) ?? '', /without control or invisible formatting characters/);
      assert.equal((await apiList())[0]!.label, 'Chrome on Linux', 'nothing renamed');
      await page.fill('li.passkey input[name=label]', 'Work laptop');
      await Promise.all([
        page.waitForURL(`${server.url}/account?done=renamed`),
        page.click('li.passkey form.rename button'),
      ]);
      assert.equal(await page.textContent('li.passkey h3'), 'Work laptop');
      assert.equal((await apiList())[0]!.label, 'Work laptop');
    });

    it('deleting the last passkey asks for confirmation first, then deletes it', async () => {
      await Promise.all([page.waitForEvent('load'), page.click('li.passkey form.delete button')]);
      assert.match((await page.textContent('h1')) ?? '', /Delete your last passkey/);
      assert.equal(
        (await listUserCredentials(server.store.db, user.id)).length,
        1,
        'nothing deleted before confirming',
      );
      await Promise.all([page.waitForURL(`${server.url}/account?done=deleted`), page.click('form button.danger')]);
      assert.equal(await page.locator('li.passkey').count(), 0);
      assert.match((await page.textContent('#password-status')) ?? '', /password works/);
      assert.equal((await listUserCredentials(server.store.db, user.id)).length, 0);
      assert.deepEqual(await apiList(), []);
    });

    it('the password still signs in after every passkey is gone', async () => {
      const url = oidc.buildEndSessionUrl(rp.config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: rp.postLogoutRedirectUri,
      });
      await page.goto(url.href);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(rp.postLogoutRedirectUri)),
        page.click('#logout-yes'),
      ]);
      const tokens = await passwordSignInThroughRelyingParty(page, rp, user.eppn, PASSWORD);
      assert.equal(tokens.claims()!.sub, user.sub);
      assert.ok(await findUserByEppn(server.store.db, user.eppn));
    });
  });
}
