// Signing in with an LDAP directory's password in real Chromium: a user synced from a real OpenLDAP
// (Debian slapd) with no password of their own signs in on the password form with the directory's
// password, is offered a passkey and makes one with the virtual authenticator, and arrives at the
// relying party with `amr` pwd; the directory's password is not stored.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { dialects, seedOrg } from '../helpers.ts';
import { addLdapDirectory } from '../../src/directory/ldap-directories.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from '../ldap/slapd.ts';

for (const dialect of dialects()) {
  describe(`signing in with an LDAP directory's password in Chromium (${dialect})`, () => {
    let server: E2EServer;
    let slapd: Slapd;
    let browser: Browser;
    let rp: RelyingParty;

    before(async () => {
      slapd = await startSlapd({ users: testUsers(5) });
      server = await startServer(dialect);
      await seedOrg(server);
      const d = await addLdapDirectory(server.store, server.keys, {
        orgId: 1,
        url: slapd.url,
        bindDn: SERVICE_DN,
        bindPassword: SERVICE_PASSWORD,
        baseDn: PEOPLE,
        filter: '(objectClass=inetOrgPerson)',
        passwordCheck: true,
      });
      await syncLdapDirectory(server.store, server.keys, d.id);
      rp = await startRelyingParty(server, { groups: ['userinfo-name'] });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
      await slapd?.stop();
    });

    const atRelyingParty = (u: URL) => u.href.startsWith(rp.redirectUri);

    async function reachRelyingParty(page: Page) {
      const consent = page.locator('button[name=decision][value=allow]');
      for (let i = 0; i < 100 && !atRelyingParty(new URL(page.url())); i++) {
        if (await consent.count()) await Promise.all([page.waitForEvent('load'), consent.click()]);
        else await new Promise((r) => setTimeout(r, 100));
      }
      await page.waitForURL(atRelyingParty);
    }

    it("signs in with the directory's password, then makes the passkey it is offered", async () => {
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      const page = await context.newPage();
      const authenticator = await addVirtualAuthenticator(page);
      try {
        const begun = await rp.begin();
        await page.goto(begun.url);
        await submitPassword(page, 'user00001@example.org', 'pw-user00001', { keepOffer: true });
        assert.equal(await page.locator('#password-form').count(), 0, 'signed in: not the form again');
        // The offer: made conditionally where the browser can (the page goes on by itself), else the button.
        await Promise.race([
          page.waitForURL((u) => !u.pathname.endsWith('/login')),
          page.waitForSelector('#offer-button:not([hidden])'),
        ]);
        if (await page.locator('#offer-button:not([hidden])').count()) await page.click('#offer-button');
        await reachRelyingParty(page);
        const tokens = await rp.finish(page.url(), begun);
        assert.deepEqual(tokens.claims()!.amr, ['pwd']);
        const user = (await findUserByEppn(server.store.db, 'user00001@example.org'))!;
        assert.equal(user.password_hash, null, "the directory's password is not stored");
        assert.equal((await listUserCredentials(server.store.db, user.id)).length, 1, 'a passkey was made');
        assert.equal((await authenticator.credentials()).length, 1);
      } finally {
        await context.close();
      }
    });

    it("a wrong directory password is the sign-in form's usual error", async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      try {
        await page.goto((await rp.begin()).url);
        await submitPassword(page, 'user00002@example.org', 'wrong');
        assert.ok(page.url().includes('/interaction/'));
        assert.equal(await page.locator('#password').count(), 1, 'the form again, with its error');
      } finally {
        await context.close();
      }
    });
  });
}
