// The branded pages in Chromium, checked with axe-core in English and Norwegian Bokmål, on the
// light and the dark scheme: no violation of serious or critical impact. The deployment has a
// full brand (name, logo, colours, links, footer) and the user's organization its own.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { cli, dialects, seedOrg, seedUser } from '../helpers.ts';
import {
  launchBrowser,
  seriousViolations,
  startRelyingParty,
  startServer,
  submitPassword,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const LOGO = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);

const [dialect] = dialects();

describe(`accessibility of the branded pages (axe-core, Chromium, ${dialect})`, () => {
  let server: E2EServer;
  let browser: Browser;
  let rp: RelyingParty;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-a11y-'));
    const logo = join(dir, 'logo.png');
    writeFileSync(logo, LOGO);
    server = await startServer(dialect!, {
      BRAND_NAME: 'Campus Login',
      BRAND_COLOR: '#0b6e4f',
      BRAND_COLOR_DARK: '#7fdcb8',
      BRAND_LOGO_FILE: logo,
      BRAND_SUPPORT_URL: 'https://help.example.org/',
      BRAND_PRIVACY_URL: 'https://example.org/privacy',
      BRAND_FOOTER: 'Run by Example University IT',
    });
    await seedOrg(server, 1, 'example.org', 'Example University');
    await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD });
    const branded = await cli(server.config.databaseUrl, [
      'org',
      'brand',
      '1',
      '--name',
      'Example University',
      '--color',
      '#7a1f5c',
      '--color-dark',
      '#f0a8d8',
      '--footer',
      'Example University IT services',
    ]);
    assert.equal(branded.code, 0, branded.err);
    // Not first-party: the sign-in asks for consent.
    rp = await startRelyingParty(server, { groups: ['userinfo-name', 'email'] });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await rp?.close();
    await server?.close();
  });

  for (const locale of ['en', 'nb'] as const) {
    for (const colorScheme of ['light', 'dark'] as const) {
      describe(`${locale}, ${colorScheme} scheme`, () => {
        let context: BrowserContext;
        let page: Page;
        const checked: string[] = [];

        before(async () => {
          context = await browser.newContext({ locale, colorScheme, extraHTTPHeaders: { 'accept-language': locale } });
          await withoutPasskeyAutofill(context);
          page = await context.newPage();
        });
        after(async () => {
          await context?.close();
        });

        async function check(name: string) {
          assert.equal(await page.getAttribute('html', 'lang'), locale, `${name}: the page's language`);
          assert.ok(await page.locator('header.site').count(), `${name}: the brand header`);
          assert.deepEqual(await seriousViolations(page), [], `${name} (${page.url()})`);
          checked.push(name);
        }

        it('sign-in page of an application', async () => {
          await page.goto((await rp.begin({ scope: 'openid profile email', prompt: 'login consent' })).url);
          await page.waitForSelector('#passkey-button:not([hidden])');
          await check('sign-in');
        });

        it('sign-in page after a wrong password (the alert)', async () => {
          await submitPassword(page, 'ada@example.org', 'wrong password, surely');
          assert.equal(await page.locator('[role=alert]').count(), 1);
          await check('sign-in refused');
        });

        it("consent page, in the organization's brand", async () => {
          await submitPassword(page, 'ada@example.org', PASSWORD);
          await page.waitForSelector('button[name=decision][value=allow]');
          assert.equal(await page.textContent('.site-name'), 'Example University');
          await check('consent');
        });

        it("account page, in the organization's brand", async () => {
          await page.goto(`${server.url}/account`);
          await page.waitForSelector('#register-button:not([hidden])');
          assert.equal(await page.textContent('.site-name'), 'Example University');
          await check('account');
        });

        it('device sign-in page', async () => {
          await page.goto(`${server.url}/device`);
          await check('device');
        });

        it('error page of the authorization server', async () => {
          await page.goto(`${server.url}/oauth/authorization?client_id=nobody&response_type=code&scope=openid`);
          await check('authorization error');
        });

        it('not-found page', async () => {
          await page.goto(`${server.url}/no/such/page`);
          await check('not found');
        });

        it('sign-out confirmation', async () => {
          await page.goto(`${server.url}/openid/endsession`);
          await check('sign-out');
          assert.equal(checked.length, 8);
        });
      });
    }
  }
});
