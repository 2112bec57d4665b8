// The sign-in page works from the keyboard alone, in a logical order, on a phone-sized screen.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { seedOrg, seedUser } from '../helpers.ts';
import {
  addVirtualAuthenticator,
  launchBrowser,
  startRelyingParty,
  startServer,
  withoutPasskeyAutofill,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';

describe('keyboard and small screens', () => {
  let server: E2EServer;
  let browser: Browser;
  let rp: RelyingParty;

  before(async () => {
    server = await startServer('sqlite');
    await seedOrg(server);
    await seedUser(server, 1, 'ada@example.org', { password: PASSWORD });
    rp = await startRelyingParty(server, { firstParty: true });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await rp?.close();
    await server?.close();
  });

  it('tabs through passkey button, username, password, sign-in and cancel, and signs in with Enter', async () => {
    const context = await browser.newContext({ viewport: { width: 360, height: 740 } });
    await withoutPasskeyAutofill(context);
    const page = await context.newPage();
    await addVirtualAuthenticator(page);
    const begun = await rp.begin();
    await page.goto(begun.url);
    await page.waitForSelector('#passkey-button:not([hidden])');
    const order: string[] = [];
    for (let i = 0; i < 5; i++) {
      await page.keyboard.press('Tab');
      order.push(
        await page.evaluate(() => {
          const el = document.activeElement as HTMLElement;
          return el.id || el.textContent?.trim() || el.tagName;
        }),
      );
    }
    assert.deepEqual(order, ['passkey-button', 'username', 'password', 'Sign in', 'Cancel']);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
    assert.equal(overflow, false, 'no horizontal scrolling on a phone-sized screen');
    await page.focus('#username');
    await page.keyboard.type('ada@example.org');
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await Promise.all([page.waitForEvent('load'), page.keyboard.press('Enter')]);
    // Ada has no passkey: one is offered. "Not now" is reached with the keyboard alone.
    await page.waitForSelector('#offer-button:not([hidden])');
    const offered: string[] = [];
    for (let i = 0; i < 3; i++) {
      await page.keyboard.press('Tab');
      offered.push(await page.evaluate(() => document.activeElement?.id ?? ''));
    }
    assert.deepEqual(offered.slice(0, 2), ['offer-button', 'offer-later']);
    await page.focus('#offer-later');
    await Promise.all([page.waitForURL((u) => u.href.startsWith(rp.redirectUri)), page.keyboard.press('Enter')]);
    const tokens = await rp.finish(page.url(), begun);
    assert.ok(tokens.claims()?.sub);
    await context.close();
  });
});
