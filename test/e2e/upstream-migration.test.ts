// The migration path in real Chromium: users imported without passwords, the old identity provider
// (a real OpenID Connect provider on a loopback port) as an upstream with --link-by eppn. The user
// picks it on the organization's sign-in page (reached by login_hint), signs in there, accepts the
// passkey offer (WebAuthn virtual authenticator), and arrives at the openid-client relying party with
// amr fed. Then the upstream is disabled: the page no longer offers it, and the passkey signs in.
// The provider's button carries its logo (an SVG the service serves itself), which loads under the
// page's Content-Security-Policy while the button's accessible name stays the provider's name.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { dialects, pickFreePort, seedOrg, seedUser } from '../helpers.ts';
import { addUpstreamProvider, setUpstreamEnabled } from '../../src/upstream/providers.ts';
import { brandLogo } from '../../src/brand.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
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
import { startTestUpstream, type TestUpstream } from '../upstream/oidc-upstream.ts';

const CLIENT = { clientId: 'idp-migration', secret: 'migration-client-secret-0123456789' };
const LOGO =
  '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="#0b6e4f"/></svg>';

for (const dialect of dialects()) {
  describe(`moving from an old identity provider to passkeys in Chromium (${dialect})`, () => {
    let server: E2EServer;
    let upstream: TestUpstream;
    let rp: RelyingParty;
    let browser: Browser;
    let providerId: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      // imported without passwords
      await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace' });
      const port = await pickFreePort();
      providerId = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 1,
          type: 'oidc',
          name: 'Example University (old IdP)',
          issuer: `http://127.0.0.1:${port}`,
          clientId: CLIENT.clientId,
          clientSecret: CLIENT.secret,
          scopes: 'openid profile eppn',
          linkBy: 'eppn',
          logo: brandLogo(Buffer.from(LOGO)),
        })
      ).id;
      upstream = await startTestUpstream(port, {
        ...CLIENT,
        redirectUri: `${server.url}/upstream/${providerId}/callback`,
      });
      rp = await startRelyingParty(server, { firstParty: true });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await upstream?.close();
      await server?.close();
    });

    const atRp = (u: URL) => u.href.startsWith(rp.redirectUri);

    it('signs in once through the old IdP, takes the passkey offered, then signs in with the passkey alone', async () => {
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      const page = await context.newPage();
      const authenticator = await addVirtualAuthenticator(page);
      try {
        upstream.next = { sub: 'old-0001', claims: { eduperson_principal_name: 'ada@example.org' } };
        const first = await rp.begin({ login_hint: 'ada@example.org' });
        await page.goto(first.url);
        const button = page.getByRole('link', { name: 'Example University (old IdP)', exact: true });
        const logo = button.locator('img.upstream-logo');
        await logo.evaluate((img: HTMLImageElement) => img.decode());
        assert.equal(await logo.evaluate((img: HTMLImageElement) => img.naturalWidth), 40, 'the logo loaded');
        assert.equal(await logo.getAttribute('alt'), '');
        await button.click();
        await Promise.race([page.waitForURL(atRp), page.waitForSelector('#offer-button:not([hidden])')]);
        if (!atRp(new URL(page.url()))) await page.click('#offer-button');
        await page.waitForURL(atRp);
        const tokens = await rp.finish(page.url(), first);
        assert.deepEqual(tokens.claims()!.amr, ['fed']);
        const user = (await findUserByEppn(server.store.db, 'ada@example.org'))!;
        assert.equal(tokens.claims()!.sub, user.sub);
        assert.equal((await listUserCredentials(server.store.db, user.id)).length, 1, 'a passkey was made');
        assert.equal((await authenticator.credentials()).length, 1);

        await setUpstreamEnabled(server.store, providerId, false);
        await context.clearCookies();
        const second = await rp.begin({ login_hint: 'ada@example.org', prompt: 'login' });
        await page.goto(second.url);
        assert.equal(await button.count(), 0, 'a disabled upstream is not offered');
        await page.waitForSelector('#passkey-button:not([hidden])');
        await Promise.all([page.waitForURL(atRp), page.click('#passkey-button')]);
        const again = (await rp.finish(page.url(), second)).claims()!;
        assert.equal(again.sub, user.sub);
        assert.ok(!(again.amr as string[]).includes('fed'), 'a passkey sign-in');
        assert.equal(again.acr, 'phr');
      } finally {
        await context.close();
      }
    });
  });
}
