// E-mail in Chromium: an invitation's link, as it arrives at a real SMTP server, registers a
// passkey with the browser's virtual authenticator, once; the "Lost your passkey?" pages have no
// serious or critical axe-core violation in English and Norwegian Bokmål.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { cli, dialects, seedOrg, seedUser } from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import { addVirtualAuthenticator, launchBrowser, seriousViolations, startServer, type E2EServer } from './helpers.ts';
import { linkIn, startSmtp, type TestSmtp } from '../mail/smtp.ts';

const [dialect] = dialects();

describe(`e-mail links in Chromium (${dialect})`, () => {
  let server: E2EServer;
  let browser: Browser;
  let smtp: TestSmtp;
  let env: Record<string, string>;

  before(async () => {
    smtp = await startSmtp();
    server = await startServer(dialect!, { SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' });
    env = { PUBLIC_URL: server.url, SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' };
    await seedOrg(server, 1, 'example.org', 'Example University');
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    await smtp?.stop();
  });

  it("an invitation's link registers a passkey in the browser, once", async () => {
    const ada = await seedUser(server, 1, 'ada@example.org', { email: 'ada@mail.example' });
    const invited = await cli(server.config.databaseUrl, ['invite', '--org', '1', '--json'], '', env);
    assert.equal(invited.code, 0, invited.err);
    const [message] = await smtp.waitFor(1);
    const url = linkIn(message!.text);
    assert.ok(url.startsWith(`${server.url}/recover/`));
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await addVirtualAuthenticator(page);
      await page.goto(url);
      assert.match((await page.textContent('h1')) ?? '', /Register a new passkey/);
      await page.waitForSelector('#recovery-button:not([hidden])');
      await Promise.all([page.waitForEvent('load'), page.click('#recovery-button')]);
      assert.match((await page.textContent('.message')) ?? '', /new passkey is registered/);
      assert.equal((await listUserCredentials(server.store.db, ada.id)).length, 1);
      await page.goto(url);
      assert.match((await page.textContent('.message')) ?? '', /cannot be used/);
    } finally {
      await context.close();
    }
  });

  it('the lost-passkey pages have no serious or critical axe-core violation, in English and Bokmål', async () => {
    const on = await cli(server.config.databaseUrl, ['org', 'policy', '1', '--self-recovery', 'email'], '', env);
    assert.equal(on.code, 0, on.err);
    for (const locale of ['en', 'nb']) {
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        await page.goto(`${server.url}/language/${locale}?return=/lost-passkey`);
        assert.equal(await page.getAttribute('html', 'lang'), locale);
        assert.deepEqual(await seriousViolations(page), [], `lost-passkey form (${locale})`);
        await page.fill('#identifier', 'nobody@example.org');
        await Promise.all([page.waitForEvent('load'), page.click('button[type=submit].primary')]);
        assert.ok(await page.locator('p[role=status]').count());
        assert.deepEqual(await seriousViolations(page), [], `lost-passkey answer (${locale})`);
      } finally {
        await context.close();
      }
    }
  });
});
