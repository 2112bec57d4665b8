// Device sign-in (RFC 8628) over real HTTP: openid-client is the device (initiate, poll), headless
// Chromium is the person entering the code, signing in and consenting. Then what goes wrong:
// polling too fast or too early, a cancelled sign-in, an expired device code, wrong user codes
// (rate-limited per address), a client without the grant, a device code used twice.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, BrowserContext, Page, Response } from 'playwright-core';
import { clearOfWindowEnd, dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import type { User } from '../../src/store/directory.ts';
import { launchBrowser, startServer, submitPassword, type E2EServer } from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const USER_CODE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

/** The device: a public client that only has the device grant (and refresh tokens). */
async function deviceClient(server: E2EServer, name = 'Living-room TV') {
  const { clientId } = await seedClient(server, {
    name,
    public: true,
    grantTypes: ['device_code', 'refresh_token'],
    scopes: ['offline_access'],
    groups: ['userinfo-name'],
  });
  const config = await oidc.discovery(new URL(server.url), clientId, undefined, oidc.None(), {
    execute: [oidc.allowInsecureRequests],
  });
  return { clientId, config };
}

/** One raw poll of the token endpoint, as a device sends it. */
async function poll(server: E2EServer, clientId: string, deviceCode: string) {
  const res = await fetch(`${server.url}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: DEVICE_GRANT, device_code: deviceCode, client_id: clientId }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** Types the code on /device and submits it; resolves with the answer to the form. */
async function enterCode(page: Page, server: E2EServer, code: string): Promise<Response> {
  await page.goto(`${server.url}/device`);
  await page.fill('#user_code', code);
  const [response] = await Promise.all([page.waitForNavigation(), page.click('#device-code-form button[type=submit]')]);
  assert.ok(response);
  return response;
}

for (const dialect of dialects()) {
  describe(`device sign-in (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let ada: User;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await server?.close();
    });

    async function newPage(locale = 'en-GB'): Promise<{ context: BrowserContext; page: Page }> {
      const context = await browser.newContext({ locale });
      return { context, page: await context.newPage() };
    }

    it('a device signs in: code typed in the browser, confirmed, password, consent; tokens once only', async () => {
      const device = await deviceClient(server);
      const started = await oidc.initiateDeviceAuthorization(device.config, {
        scope: 'openid offline_access userinfo-name',
      });
      assert.match(started.user_code, USER_CODE);
      assert.equal(started.verification_uri, `${server.url}/device`);
      assert.equal(started.interval, 5);
      const polling = oidc.pollDeviceAuthorizationGrant(device.config, started);

      const { context, page } = await newPage();
      // Lower case and without the dash: normalised like the device shows it.
      const typed = started.user_code.toLowerCase().replace('-', '');
      const confirm = await enterCode(page, server, typed);
      assert.equal(confirm.status(), 200);
      assert.equal(await page.getAttribute('html', 'lang'), 'en');
      assert.equal(await page.textContent('h1'), 'Sign in on your device?');
      assert.match((await page.textContent('main'))!, /Sign in to Living-room TV on your device\?/);
      assert.equal(await page.textContent('.user-code'), started.user_code);

      await Promise.all([page.waitForURL(/\/interaction\//), page.click('#device-confirm')]);
      await submitPassword(page, 'ada@example.org', PASSWORD);
      assert.equal(await page.locator('button[name=decision][value=allow]').count(), 1);
      await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=allow]')]);
      assert.equal(await page.textContent('h1'), 'Device signed in');
      assert.match((await page.textContent('main'))!, /signed in to Living-room TV on your device/);
      await context.close();

      const tokens = await polling;
      assert.equal(tokens.claims()?.sub, ada.sub);
      assert.ok(tokens.access_token);
      assert.ok(tokens.refresh_token, 'offline_access with the refresh_token grant gives a refresh token');
      const info = await oidc.fetchUserInfo(device.config, tokens.access_token, ada.sub);
      assert.equal(info.name, 'Ada Lovelace');

      // The device code was used: presented again it is a replay, refused, and the grant revoked.
      const again = await poll(server, device.clientId, started.device_code);
      assert.equal(again.status, 400);
      assert.equal(again.body.error, 'invalid_grant');
      assert.equal(again.body.access_token, undefined);
      await assert.rejects(oidc.fetchUserInfo(device.config, tokens.access_token, ada.sub));
    });

    // The polls race for the one-time code: one consumes it, the others are replays and revoke the
    // grant (src/oauth/adapter.ts, consumeOnce). Whether the winner still gets its answer depends on
    // whether it loaded the grant before a replay revoked it, so at most one answer carries tokens,
    // and those are dead once the replays are done.
    it('of 10 polls at once after approval at most one gets tokens, revoked by the replays; the others invalid_grant', async () => {
      const device = await deviceClient(server, 'Kiosk');
      const started = await oidc.initiateDeviceAuthorization(device.config, { scope: 'openid' });
      const { context, page } = await newPage();
      await enterCode(page, server, started.user_code);
      await Promise.all([page.waitForURL(/\/interaction\//), page.click('#device-confirm')]);
      await submitPassword(page, 'ada@example.org', PASSWORD);
      await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=allow]')]);
      assert.equal(await page.textContent('h1'), 'Device signed in');
      await context.close();
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => poll(server, device.clientId, started.device_code)),
      );
      const issued = answers.filter((a) => a.status === 200);
      assert.ok(issued.length <= 1, JSON.stringify(answers.map((a) => a.body.error ?? 'tokens')));
      for (const a of answers.filter((x) => x.status !== 200)) assert.equal(a.body.error, 'invalid_grant');
      for (const a of issued) {
        const userinfo = await fetch(`${server.url}/openid/userinfo`, {
          headers: { authorization: `Bearer ${String(a.body.access_token)}` },
        });
        assert.equal(userinfo.status, 401, 'the replays revoked the grant the tokens came from');
      }
    });

    it('polling before approval is authorization_pending, too fast slow_down; cancelling is access_denied', async () => {
      const device = await deviceClient(server, 'Game console');
      const started = await oidc.initiateDeviceAuthorization(device.config, { scope: 'openid' });
      const first = await poll(server, device.clientId, started.device_code);
      assert.deepEqual([first.status, first.body.error], [400, 'authorization_pending']);
      const second = await poll(server, device.clientId, started.device_code);
      assert.deepEqual([second.status, second.body.error], [400, 'slow_down']);
      assert.equal(second.body.access_token, undefined);

      const { context, page } = await newPage();
      await enterCode(page, server, started.user_code);
      assert.match((await page.textContent('main'))!, /Game console/);
      const cancelled = await Promise.all([page.waitForNavigation(), page.click('#device-abort')]);
      assert.equal(cancelled[0]?.status(), 200);
      assert.match((await page.textContent('.alert'))!, /cancelled/);
      await context.close();

      const denied = await poll(server, device.clientId, started.device_code);
      assert.deepEqual([denied.status, denied.body.error], [400, 'access_denied']);
      assert.equal(denied.body.access_token, undefined);
    });

    it('denying on the consent page is access_denied for the device', async () => {
      const device = await deviceClient(server, 'Smart speaker');
      const started = await oidc.initiateDeviceAuthorization(device.config, { scope: 'openid' });
      const { context, page } = await newPage('nb-NO');
      // verification_uri_complete (a QR code on the device) carries the code: straight to the confirmation.
      assert.ok(started.verification_uri_complete);
      await page.goto(started.verification_uri_complete);
      await page.waitForSelector('#device-confirm');
      assert.equal(await page.textContent('.user-code'), started.user_code);
      assert.equal(await page.getAttribute('html', 'lang'), 'nb');
      assert.equal(await page.textContent('h1'), 'Logge inn på enheten?');
      await Promise.all([page.waitForURL(/\/interaction\//), page.click('#device-confirm')]);
      await submitPassword(page, 'ada@example.org', PASSWORD);
      await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=deny]')]);
      assert.match((await page.textContent('.alert'))!, /avbrutt/);
      await context.close();
      const denied = await poll(server, device.clientId, started.device_code);
      assert.deepEqual([denied.status, denied.body.error], [400, 'access_denied']);
    });

    it('a wrong user code gets a clear page in the browser language, with the form to try again', async () => {
      const { context, page } = await newPage('nb-NO');
      const answer = await enterCode(page, server, 'BBBB-BBBB');
      assert.equal(answer.status(), 400);
      assert.equal(await page.getAttribute('html', 'lang'), 'nb');
      assert.equal(await page.textContent('h1'), 'Logg inn på en enhet');
      assert.match((await page.textContent('.alert'))!, /Koden er ikke gyldig/);
      assert.equal(await page.inputValue('#user_code'), 'BBBB-BBBB');
      assert.equal(await page.getAttribute('label[for=user_code]', 'for'), 'user_code');
      await context.close();
    });

    it('a client without the device grant is refused at the device authorization endpoint', async () => {
      const { clientId, secret } = await seedClient(server, {
        name: 'Web portal',
        redirectUris: ['https://portal.example.org/callback'],
      });
      const res = await fetch(`${server.url}/oauth/device_authorization`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ scope: 'openid' }),
      });
      assert.equal(res.status, 400);
      const body = (await res.json()) as Record<string, unknown>;
      assert.equal(body.error, 'unauthorized_client', JSON.stringify(body));
      assert.equal(body.device_code, undefined);
      // Nor may it poll the token endpoint with a device code (another client's, here).
      const device = await deviceClient(server, 'Printer');
      const started = await oidc.initiateDeviceAuthorization(device.config, { scope: 'openid' });
      const stolen = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: DEVICE_GRANT, device_code: started.device_code }),
      });
      assert.equal(stolen.status, 400);
      const refusal = (await stolen.json()) as Record<string, unknown>;
      assert.equal(refusal.error, 'unauthorized_client', JSON.stringify(refusal));
    });
  });

  describe(`device sign-in limits (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;

    before(async () => {
      // the attempts of the two tests below are counted in one 15-minute window
      await clearOfWindowEnd(15 * 60 * 1000, 60_000);
      server = await startServer(dialect, { DEVICE_CODE_TTL: '1', LOGIN_RATE_LIMIT_IP: '3' });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await server?.close();
    });

    it('an expired device code is expired_token for the device and an expired code on the page', async () => {
      const device = await deviceClient(server);
      const started = await oidc.initiateDeviceAuthorization(device.config, { scope: 'openid' });
      assert.equal(started.expires_in, 1);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const late = await poll(server, device.clientId, started.device_code);
      assert.deepEqual([late.status, late.body.error], [400, 'expired_token']);
      assert.equal(late.body.access_token, undefined);

      const page = await (await browser.newContext()).newPage();
      const answer = await enterCode(page, server, started.user_code);
      assert.equal(answer.status(), 400);
      assert.match((await page.textContent('.alert'))!, /expired/);
    });

    it('wrong user codes are limited per client address: 429 with Retry-After', async () => {
      // The expired code above was the first mistake of this address in the window.
      const page = await (await browser.newContext()).newPage();
      for (const code of ['BBBB-CCCC', 'CCCC-DDDD']) assert.equal((await enterCode(page, server, code)).status(), 400);
      const refused = await enterCode(page, server, 'DDDD-FFFF');
      assert.equal(refused.status(), 429);
      const retryAfter = Number(await refused.headerValue('retry-after'));
      assert.ok(retryAfter > 0 && retryAfter <= 900, `Retry-After ${retryAfter}`);
      assert.match((await page.textContent('main'))!, /Too many wrong codes/);
      assert.match((await page.textContent('.reference'))!, /Reference/);
    });
  });
}
