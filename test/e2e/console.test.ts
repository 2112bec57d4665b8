// The console in real Chromium with the virtual authenticator: a helpdesk member signs in with a
// passkey, finds a user, deletes one passkey with a reason, creates a recovery link; a fresh
// browser opens the link and registers a new passkey; the link then fails; the audit trail shows
// the actions with actor and reason, and the passkey API agrees. The keyboard alone does the
// deletion. axe-core checks every console page (the applications and sign-in providers too) in
// English and Bokmål at 390 and 1280 px wide.
// With CONSOLE_SCREENSHOTS=<dir> the pages are also saved there (docs/console/ holds them).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { cli, clientToken, dialects, p256Credential, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { addServiceProvider, serviceProviderClientId } from '../../src/service-providers/index.ts';
import { shibboleth } from '../saml-idp/sso-fixtures.ts';
import { addUpstreamProvider } from '../../src/upstream/providers.ts';
import { linkAccount } from '../../src/upstream/linking.ts';
import type { User } from '../../src/store/directory.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  seriousViolations,
  startServer,
  withoutPasskeyAutofill,
  type E2EServer,
} from './helpers.ts';

const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const GOOGLE_PASSWORD_MANAGER = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';

async function seedPasskey(server: E2EServer, user: User, label: string, aaguid: string, synced: boolean) {
  const key = p256Credential();
  await insertPasskeys(server.store.db, [
    {
      user_id: user.id,
      org_id: user.org_id,
      credential_id: key.id,
      public_key: key.cose,
      sign_count: 0,
      transports: '["internal"]',
      label,
      aaguid,
      backup_eligible: synced ? 1 : 0,
      backup_state: synced ? 1 : 0,
      mfa_verified: 1,
      created_at: Date.now() - 40 * 86_400_000,
      last_used_at: Date.now() - 3 * 86_400_000,
    },
  ]);
}

for (const dialect of dialects()) {
  describe(`the console in a browser (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let helen: User;
    let olga: User;
    let ada: User;
    let spClientId: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server, 1, 'example.org', 'Example University');
      await seedOrg(server, 2, 'other.org', 'Other College');
      helen = await seedUser(server, 1, 'helen@example.org', { name: 'Helen Hansen' });
      olga = await seedUser(server, 1, 'olga@example.org', { name: 'Olga Olsen' });
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', email: 'ada@mail.example.org' });
      await seedUser(server, 1, 'adam@example.org', { name: 'Adam Smith' });
      await seedUser(server, 2, 'bob@other.org', { name: 'Bob Berg' });
      await grantRole(server.store, { eppn: helen.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(server.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      await grantRole(server.store, { eppn: olga.eppn, role: 'operator' });
      await seedPasskey(server, ada, 'Work phone', GOOGLE_PASSWORD_MANAGER, true);
      await seedPasskey(server, ada, 'Security key', '00000000-0000-0000-0000-000000000000', false);
      // applications: a SAML service provider and an OpenID Connect client
      const sp = await shibboleth();
      spClientId = serviceProviderClientId(sp.entityId);
      await addServiceProvider(server.store, {
        metadata: sp.metadata,
        name: 'Library',
        groups: ['userid-idp', 'userinfo-name', 'groups-org'],
      });
      await seedClient(server, {
        name: 'Learning platform',
        redirectUris: ['https://lms.example.org/callback'],
        groups: ['userid-idp', 'email'],
      });
      // a sign-in provider, and ada linked to it
      const upstream = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Campus IdP',
        issuer: 'https://campus-idp.example.test',
        clientId: 'campus',
        clientSecret: 'campus-secret',
        linkBy: 'none',
      });
      await linkAccount(server.store, upstream.id, ada.eppn, 'ada-at-campus');
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await server?.close();
    });

    /** A browser whose authenticator holds a passkey of the staff member, made through a recovery link. */
    async function staffBrowser(user: User, viewport = { width: 1280, height: 900 }) {
      const context = await browser.newContext({ viewport });
      await withoutPasskeyAutofill(context);
      const page = await context.newPage();
      await addVirtualAuthenticator(page);
      const made = await cli(server.config.databaseUrl, ['recovery', 'create', user.eppn, '--json'], '', {
        PUBLIC_URL: server.url,
      });
      await page.goto(JSON.parse(made.out).url as string);
      await page.waitForSelector('#recovery-button:not([hidden])');
      await Promise.all([page.waitForEvent('load'), page.click('#recovery-button')]);
      return { context, page };
    }

    async function consoleSignIn(page: Page) {
      await page.goto(`${server.url}/console`);
      await page.waitForSelector('#passkey-button:not([hidden])');
      await Promise.all([page.waitForURL((u) => u.pathname.startsWith('/console')), page.click('#passkey-button')]);
    }

    it('a helpdesk finds a user, deletes a passkey with a reason, and hands over a recovery link that works once', async () => {
      const { context, page } = await staffBrowser(helen);
      try {
        await consoleSignIn(page);
        assert.equal(new URL(page.url()).pathname, '/console/org/1');
        await page.getByLabel('Search users').fill('ada');
        await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Search' }).click()]);
        assert.equal(await page.locator('tbody tr').count(), 2, 'ada and adam');
        await Promise.all([page.waitForEvent('load'), page.getByRole('link', { name: 'ada@example.org' }).click()]);
        assert.match((await page.textContent('h1')) ?? '', /User ada@example.org/);
        assert.match((await page.textContent('table')) ?? '', /Google Password Manager/);
        await Promise.all([
          page.waitForEvent('load'),
          page.getByRole('button', { name: 'Delete: Security key' }).click(),
        ]);
        await page.getByLabel('Reason').fill('Key lost on the bus');
        await Promise.all([page.waitForEvent('load'), page.getByRole('button', { name: 'Confirm' }).click()]);
        assert.match((await page.textContent('.notice')) ?? '', /The passkey was deleted/);
        assert.deepEqual(
          (await listUserCredentials(server.store.db, ada.id)).map((p) => p.label),
          ['Work phone'],
        );

        await page.getByLabel('Valid for').selectOption('3600');
        await Promise.all([
          page.waitForEvent('load'),
          page.getByRole('button', { name: 'Create recovery link' }).click(),
        ]);
        const link = (await page.textContent('#recovery-link')) ?? '';
        assert.ok(link.startsWith(`${server.url}/recover/`), link);
        const qr = page.getByRole('img', { name: 'QR code of the recovery link' });
        assert.equal(await qr.count(), 1);
        assert.ok(
          ((await qr.evaluate((img: HTMLImageElement) => img.naturalWidth)) as number) > 0,
          'the QR code renders',
        );

        // The user, on their own new device.
        const userContext = await browser.newContext();
        try {
          const userPage = await userContext.newPage();
          await addVirtualAuthenticator(userPage);
          await userPage.goto(link);
          await userPage.waitForSelector('#recovery-button:not([hidden])');
          await Promise.all([userPage.waitForEvent('load'), userPage.click('#recovery-button')]);
          assert.match((await userPage.textContent('.message')) ?? '', /new passkey is registered/);
          await userPage.goto(link);
          assert.match((await userPage.textContent('.message')) ?? '', /cannot be used/);
        } finally {
          await userContext.close();
        }
        assert.equal((await listUserCredentials(server.store.db, ada.id)).length, 2);

        await page.goto(`${server.url}/console/org/1/audit?eppn=ada%40example.org`);
        const trail = (await page.textContent('table')) ?? '';
        for (const action of ['passkey.delete', 'recovery_link.create', 'recovery_link.use'])
          assert.match(trail, new RegExp(action.replace('.', '\\.')), action);
        assert.match(trail, /user: helen@example.org/);
        assert.match(trail, /reason: Key lost on the bus/);

        const api = await seedClient(server, { name: 'Audit', scopes: ['passkey.read'], orgs: [1] });
        const token = await clientToken(server, api.clientId, api.secret, 'passkey.read');
        const listed = await fetch(`${server.url}/2/passkey/1?eppn=ada@example.org`, {
          headers: { authorization: `Bearer ${token}` },
        });
        const labels = ((await listed.json()) as { label: string }[]).map((p) => p.label);
        assert.equal(labels.length, 2);
        assert.ok(labels.includes('Work phone') && !labels.includes('Security key'), labels.join(', '));
        const [deletion] = await listAuditEvents(server.store.db, { action: 'passkey.delete', limit: 1 });
        assert.equal(deletion?.actor, 'helen@example.org');
      } finally {
        await context.close();
      }
    });

    it('the keyboard alone deletes a passkey; a phone-sized screen shows the whole table', async () => {
      await seedPasskey(server, ada, 'Old tablet', '00000000-0000-0000-0000-000000000000', false);
      const { context, page } = await staffBrowser(helen, { width: 390, height: 844 });
      try {
        await consoleSignIn(page);
        await page.goto(`${server.url}/console/org/1/users/ada%40example.org`);
        const target = page.getByRole('button', { name: 'Delete: Old tablet' });
        for (let i = 0; i < 40 && !(await target.evaluate((el) => el === document.activeElement)); i++)
          await page.keyboard.press('Tab');
        assert.ok(await target.evaluate((el) => el === document.activeElement), 'Tab reaches the Delete button');
        await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
        // The confirmation page puts the focus in its Reason field (autofocus: the browser applies it when it next
        // renders, which on a busy machine can come after the load event).
        await page
          .waitForFunction(() => document.activeElement?.id === 'reason', null, { timeout: 5000 })
          .catch(() => {});
        assert.equal(await page.evaluate(() => document.activeElement?.id), 'reason');
        await page.keyboard.type('Tablet retired');
        await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
        assert.match((await page.textContent('.notice')) ?? '', /The passkey was deleted/);
        assert.ok(!(await listUserCredentials(server.store.db, ada.id)).some((p) => p.label === 'Old tablet'));
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
        assert.equal(overflow, false, 'no sideways scrolling of the page itself');
      } finally {
        await context.close();
      }
    });

    // The pages are the same whichever database is under them: checked once.
    const once = dialect === dialects()[0] ? {} : { skip: 'checked on the first database' };
    it(
      'every console page has no serious or critical axe-core violation, in en and nb, at 390 and 1280 px',
      once,
      async () => {
        for (const width of [1280, 390]) {
          const staff = await staffBrowser(olga, { width, height: 900 });
          const { page } = staff;
          try {
            await consoleSignIn(page);
            for (const locale of ['en', 'nb']) {
              await page.goto(`${server.url}/language/${locale}?return=/console`);
              const visited: string[] = [];
              const check = async (name: string) => {
                assert.equal(await page.getAttribute('html', 'lang'), locale, name);
                assert.deepEqual(await seriousViolations(page), [], `${name} (${locale}, ${width} px)`);
                visited.push(name);
                if (SHOTS && locale === 'en') {
                  mkdirSync(SHOTS, { recursive: true });
                  await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
                }
              };
              const go = async (path: string, name: string) => {
                await page.goto(`${server.url}${path}`);
                await check(name);
              };
              await go('/console', 'organizations');
              await go('/console/org/1?q=ad', 'search');
              await go('/console/org/1/users/ada%40example.org', 'user');
              await page.locator('form[action$="/delete-all"] button').click();
              await page.waitForURL((u) => u.pathname.endsWith('/delete-all'));
              await check('confirm');
              await page.goto(`${server.url}/console/org/1/users/ada%40example.org`);
              await Promise.all([
                page.waitForEvent('load'),
                page.locator('form[action$="/recovery-links"] button').click(),
              ]);
              await check('recovery-link');
              await go('/console/org/1/audit', 'audit');
              await go('/console/org/1/report', 'report');
              await go('/console/org/1/staff', 'staff');
              await go('/console/org/1/applications', 'applications');
              await go('/console/org/1/upstream', 'upstream');
              await go(`/console/org/1/applications/${spClientId}`, 'application');
              await go('/console/org/1/offboard', 'offboard');
              await page.fill('#eppns', 'adam@example.org\nghost@example.org');
              await Promise.all([
                page.waitForEvent('load'),
                page.locator('form[action$="/offboard/preview"] button').click(),
              ]);
              await check('offboard-preview');
              await page.fill('#reason', 'Left the university');
              await Promise.all([
                page.waitForEvent('load'),
                page.locator('form[action$="/offboard"] button.danger').click(),
              ]);
              await check('offboard-done');
              await seedPasskey(
                server,
                await seedUser(server, 1, `adam-${width}-${locale}@example.org`),
                'Key',
                GOOGLE_PASSWORD_MANAGER,
                true,
              );
              assert.equal(visited.length, 14);
            }
          } finally {
            await staff.context.close();
          }
        }
        const nora = await seedUser(server, 1, 'nora@example.org', { name: 'Nora Nilsen' });
        const { context, page } = await staffBrowser(nora);
        try {
          await consoleSignIn(page);
          assert.match((await page.textContent('h1')) ?? '', /No access to the console/);
          assert.deepEqual(await seriousViolations(page), [], 'no-access page');
          if (SHOTS) await page.screenshot({ path: join(SHOTS, 'no-access-1280.png'), fullPage: true });
        } finally {
          await context.close();
        }
      },
    );
  });
}
