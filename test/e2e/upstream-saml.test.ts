// Signing in through an upstream SAML identity provider, in Chromium: an openid-client relying party
// asks this service with `upstream=<id>`, the browser goes to a real SimpleSAMLphp (Debian package)
// with our signed AuthnRequest, signs in there, comes back to our ACS with a signed Response, and
// the account linked by eppn is signed in (amr "fed", the upstream's acr), offered a passkey. Then
// again from the organization's sign-in page (login_hint), through the provider's button, riding
// SimpleSAMLphp's own session. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { cli, dialects, seedOrg, seedUser } from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  startRelyingParty,
  startServer,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';
import { addUpstreamProvider } from '../../src/upstream/providers.ts';
import { readSamlProviderMetadata } from '../../src/upstream/saml-provider.ts';
import { listLinksOfUser } from '../../src/store/upstream.ts';
import type { User } from '../../src/store/directory.ts';
import { simpleSamlPhpMissing, startSimpleSamlPhp, type SimpleSamlPhp } from '../upstream/simplesamlphp.ts';

const skip = simpleSamlPhpMissing();

for (const dialect of dialects()) {
  describe(`signing in through an upstream SAML IdP, SimpleSAMLphp (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let ssp: SimpleSamlPhp;
    let rp: RelyingParty;
    let browser: Browser;
    let page: Page;
    let ada: User;
    let grace: User;
    let providerId: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server, 1, 'uni.example', 'Uni');
      // imported without a password: the upstream is the only way in until a passkey is made
      ada = await seedUser(server, 1, 'ada@uni.example', { name: 'Ada Lovelace' });
      grace = await seedUser(server, 1, 'grace@uni.example', { name: 'Grace Hopper' });
      const spMetadata = await (await fetch(`${server.url}/saml2/sp/metadata`)).text();
      ssp = await startSimpleSamlPhp({ spMetadata, encryptAssertions: true });
      const provider = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'saml',
        name: 'Uni IdP',
        linkBy: 'eppn',
        saml: await readSamlProviderMetadata(ssp.metadataUrl),
      });
      providerId = provider.id;
      rp = await startRelyingParty(server, { firstParty: true });
      browser = await launchBrowser();
      page = await (await browser.newContext()).newPage();
    });

    after(async () => {
      await browser?.close();
      await rp?.close();
      await ssp?.stop();
      await server?.close();
    });

    async function afterReturn(): Promise<void> {
      // back from the upstream: the passkey offer (no passkey yet), "Not now"
      await page.waitForURL((u) => u.href.startsWith(server.url) || u.href.startsWith(rp.redirectUri));
      if (!page.url().startsWith(rp.redirectUri)) {
        await page.locator('#offer-later').waitFor();
        await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.click('#offer-later')]);
      }
    }

    it('signs in with upstream=<id>: SimpleSAMLphp, our ACS, the account linked by eppn', async () => {
      const begun = await rp.begin({ upstream: providerId });
      await page.goto(begun.url);
      await page.waitForURL((u) => u.href.startsWith(ssp.url));
      await page.fill('#username', 'ada');
      await page.fill('#password', 'ada-pass-123');
      await Promise.all([page.waitForURL((u) => !u.href.startsWith(ssp.url)), page.click('#submit_button')]);
      await afterReturn();
      const tokens = await rp.finish(page.url(), begun);
      const claims = tokens.claims()!;
      assert.equal(claims.sub, ada.sub);
      assert.ok(Array.isArray(claims.amr) && claims.amr.includes('fed'), `amr ${JSON.stringify(claims.amr)}`);
      assert.ok(claims.amr.includes('pwd'), 'the upstream password sign-in, from its AuthnContextClassRef');
      const links = await listLinksOfUser(server.store.db, ada.id);
      assert.equal(links.length, 1);
      assert.equal(links[0]!.provider_id, providerId);
    });

    it('signs in again from the organization page, through the provider’s button, and prompt=login signs in again upstream', async () => {
      const begun = await rp.begin({ login_hint: 'ada@uni.example', prompt: 'login' });
      await page.goto(begun.url);
      const button = page.getByRole('link', { name: 'Uni IdP' }).or(page.getByRole('button', { name: 'Uni IdP' }));
      await button.first().click();
      // SimpleSAMLphp still has its session, but prompt=login went upstream as ForceAuthn: it asks again
      await page.waitForURL((u) => u.href.startsWith(ssp.url));
      await page.fill('#username', 'ada');
      await page.fill('#password', 'ada-pass-123');
      await Promise.all([page.waitForURL((u) => !u.href.startsWith(ssp.url)), page.click('#submit_button')]);
      await afterReturn();
      const tokens = await rp.finish(page.url(), begun);
      assert.equal(tokens.claims()!.sub, ada.sub);
    });

    it('the migration path: the old IdP once, the passkey offered and made, then the IdP disabled and the passkey works', async () => {
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      const own = await context.newPage();
      const authenticator = await addVirtualAuthenticator(own);
      try {
        const begun = await rp.begin({ upstream: providerId });
        await own.goto(begun.url);
        await own.waitForURL((u) => u.href.startsWith(ssp.url));
        await own.fill('#username', 'grace');
        await own.fill('#password', 'grace-pass-123');
        await Promise.all([own.waitForURL((u) => !u.href.startsWith(ssp.url)), own.click('#submit_button')]);
        // the offer: made conditionally where the browser can (the page goes on by itself), else the button
        await Promise.race([
          own.waitForURL((u) => u.href.startsWith(rp.redirectUri)),
          own.waitForSelector('#offer-button:not([hidden])'),
        ]);
        if (await own.locator('#offer-button:not([hidden])').count()) await own.click('#offer-button');
        await own.waitForURL((u) => u.href.startsWith(rp.redirectUri));
        assert.equal((await rp.finish(own.url(), begun)).claims()!.sub, grace.sub);
        assert.equal((await listUserCredentials(server.store.db, grace.id)).length, 1, 'a passkey was made');
        assert.equal((await authenticator.credentials()).length, 1);

        const disabled = await cli(server.config.databaseUrl, ['upstream', 'disable', providerId], '', {
          PUBLIC_URL: server.url,
        });
        assert.equal(disabled.code, 0, disabled.err);
        // through the upstream: refused at once, on a page that says so
        await own.goto((await rp.begin({ upstream: providerId, prompt: 'login' })).url);
        assert.ok(!own.url().startsWith(ssp.url), 'not sent to the disabled IdP');
        // with the passkey: signed in, no federation in the amr
        const again = await rp.begin({ prompt: 'login' });
        await own.goto(again.url);
        await own.waitForSelector('#passkey-button:not([hidden])');
        await Promise.all([own.waitForURL((u) => u.href.startsWith(rp.redirectUri)), own.click('#passkey-button')]);
        const claims = (await rp.finish(own.url(), again)).claims()!;
        assert.equal(claims.sub, grace.sub);
        assert.ok(Array.isArray(claims.amr) && !claims.amr.includes('fed'), `amr ${JSON.stringify(claims.amr)}`);
      } finally {
        await context.close();
      }
    });
  });
}
