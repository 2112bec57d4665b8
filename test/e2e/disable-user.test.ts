// Disabling a signed-in user, as an operator does it (the admin CLI, another process's work on the
// same database), seen from Chromium and a relying party: the session ends, the access and refresh
// tokens stop working at userinfo, the legacy userinfo and the token endpoint, the relying party
// gets a logout token, sign-in is refused with a clear message for password and passkey alike,
// and enabling restores sign-in. Both databases, and two instances sharing PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { basicAuth, cli, dialects, seedOrg, seedUser, testConfig, TEST_SECRET } from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';
import { buildApp } from '../../src/app.ts';
import { keyring } from '../../src/crypto.ts';
import { listLogoutDeliveries } from '../../src/store/logout-deliveries.ts';
import { retryLogoutDeliveries } from '../../src/oauth/backchannel-logout.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import type { User } from '../../src/store/directory.ts';
import {
  addVirtualAuthenticator,
  freePort,
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  submitPassword,
  type E2EServer,
  withoutPasskeyAutofill,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const DISABLED = /This account is disabled/;

type Tokens = Awaited<ReturnType<typeof passwordSignInThroughRelyingParty>>;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Another instance of the same service: the same database and PUBLIC_URL, its own port, caches and provider. */
async function secondInstance(first: E2EServer) {
  const port = await freePort();
  const config = testConfig(first.config.databaseUrl, { PUBLIC_URL: first.url, PORT: String(port) });
  const store = await openStore(config.databaseUrl);
  const built = await buildApp({ config, store, keys: keyring(TEST_SECRET) });
  await built.app.listen({ port, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      await built.app.close();
      await store.close();
    },
  };
}

async function tokenChecks(server: E2EServer, rp: RelyingParty, tokens: Tokens) {
  const userinfo = await fetch(`${server.url}/openid/userinfo`, { headers: bearer(tokens.access_token) });
  const legacy = await fetch(`${server.url}/userinfo`, { headers: bearer(tokens.access_token) });
  const refreshed = await fetch(`${server.url}/oauth/token`, {
    method: 'POST',
    headers: { authorization: basicAuth(rp.clientId, rp.secret), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }),
  });
  const error = refreshed.status === 200 ? undefined : ((await refreshed.json()) as { error: string }).error;
  return { userinfo: userinfo.status, legacy: legacy.status, refresh: refreshed.status, error };
}

for (const dialect of dialects()) {
  describe(`disabling a signed-in user (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let rp: RelyingParty;
    let ada: User;
    const run = (...args: string[]) => cli(server.config.databaseUrl, args);

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      rp = await startRelyingParty(server, { firstParty: true, scopes: ['offline_access'] }, { backchannel: true });
      browser = await launchBrowser();
      const context = await browser.newContext();
      await withoutPasskeyAutofill(context);
      page = await context.newPage();
      await addVirtualAuthenticator(page);
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await server?.close();
    });

    const signIn = () =>
      passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
        scope: 'openid offline_access',
        // The browser may hold a session (the account page's): sign in again each time.
        prompt: 'login consent',
      });

    it('ends the session, revokes the tokens at once and tells the relying party', async () => {
      // A passkey first, for the refusal below.
      await page.goto(`${server.url}/account`);
      await submitPassword(page, 'ada@example.org', PASSWORD);
      await Promise.all([page.waitForURL(`${server.url}/account?done=added`), page.click('#register-button')]);

      const tokens = await signIn();
      assert.deepEqual(await tokenChecks(server, rp, tokens), {
        userinfo: 200,
        legacy: 200,
        refresh: 200,
        error: undefined,
      });
      const fresh = await signIn();
      const sid = fresh.claims()!.sid;

      // Counted before the change: the service's delivery job may send the logout token at any moment after it.
      const before = rp.logouts.length;
      const r = await run('user', 'disable', 'ada@example.org', '--json');
      assert.equal(r.code, 0, r.err);
      assert.equal(JSON.parse(r.out).sessions_ended, 1);
      const after = await tokenChecks(server, rp, fresh);
      assert.deepEqual(after, { userinfo: 401, legacy: 401, refresh: 400, error: 'invalid_grant' });

      // The browser is no longer signed in: the account page asks for a sign-in, the application too.
      await page.goto(`${server.url}/account`);
      assert.equal(await page.locator('#password-form').count(), 1);
      await page.goto((await rp.begin()).url);
      assert.match(page.url(), /\/interaction\//);

      // The logout token waits as a delivery due now; the service's delivery job sends it. The job
      // may have sent it already (no next attempt) or be sending it at this moment: a claimed
      // delivery's next attempt is its lease, at most a minute ahead (CLAIM_MS of
      // src/oauth/backchannel-logout.ts). Not a retry scheduled for later, at any rate.
      const [due] = (await listLogoutDeliveries(server.store.db, rp.clientId)).filter((d) => d.sid === sid);
      assert.ok(due, 'a logout delivery for the ended session');
      assert.ok((due.next_attempt_at ?? 0) <= Date.now() + 60_000, 'sent, due now, or being sent');
      // The service's own delivery job may have sent it a moment ago; else this sends it now.
      const sent = await retryLogoutDeliveries(server.store, server.provider.current());
      for (let i = 0; i < 100 && rp.logouts.length === before; i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(sent <= 1 && rp.logouts.length === before + 1, `one logout token (sent now: ${sent})`);
      const logout = rp.logouts[before];
      assert.ok(logout?.ok, 'a verified logout token');
      assert.equal(logout.claims.sub, ada.sub);
      assert.equal(logout.claims.sid, sid);
    });

    it('refuses password and passkey sign-in with the disabled message', async () => {
      await page.goto((await rp.begin()).url);
      const refused = page.waitForResponse((res) => res.request().method() === 'POST' && /\/login$/.test(res.url()));
      await submitPassword(page, 'ada@example.org', PASSWORD);
      assert.equal((await refused).status(), 403);
      assert.match((await page.textContent('body')) ?? '', DISABLED);

      await page.goto((await rp.begin()).url);
      await page.waitForSelector('#passkey-button:not([hidden])');
      await Promise.all([page.waitForEvent('load'), page.click('#passkey-button')]);
      assert.match((await page.textContent('body')) ?? '', DISABLED);
      assert.match(page.url(), /\/interaction\//, 'no code reached the application');

      const failures = await listAuditEvents(server.store.db, { action: 'signin.failed', subject: 'ada@example.org' });
      const reasons = failures.map((e) => JSON.parse(e.details) as { method: string; reason: string });
      assert.ok(reasons.some((d) => d.method === 'password' && d.reason === 'disabled'));
      assert.ok(reasons.some((d) => d.method === 'passkey' && d.reason === 'disabled'));
    });

    it('a wrong password still gets the ordinary answer: nothing tells others the account is disabled', async () => {
      await page.goto((await rp.begin()).url);
      await submitPassword(page, 'ada@example.org', 'not the password at all');
      const text = (await page.textContent('body')) ?? '';
      assert.doesNotMatch(text, DISABLED);
      assert.match(text, /username or password is wrong/);
    });

    it('enabling restores sign-in', async () => {
      assert.equal((await run('user', 'enable', 'ada@example.org')).code, 0);
      const tokens = await signIn();
      assert.deepEqual(await tokenChecks(server, rp, tokens), {
        userinfo: 200,
        legacy: 200,
        refresh: 200,
        error: undefined,
      });
    });
  });
}

if (dialects().includes('postgres')) {
  describe('disabling a user with two instances on one PostgreSQL', () => {
    let a: E2EServer;
    let b: { url: string; close(): Promise<void> };
    let browser: Browser;
    let rp: RelyingParty;

    before(async () => {
      a = await startServer('postgres');
      await seedOrg(a);
      await seedUser(a, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      rp = await startRelyingParty(a, { firstParty: true, scopes: ['offline_access'] });
      b = await secondInstance(a);
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await b?.close();
      await a?.close();
    });

    it('tokens issued through one instance are refused by the other within a second', async () => {
      const page = await (await browser.newContext()).newPage();
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
        scope: 'openid offline_access',
        prompt: 'consent',
      });
      const atB = () => fetch(`${b.url}/openid/userinfo`, { headers: bearer(tokens.access_token) });
      assert.equal((await atB()).status, 200);
      assert.equal((await cli(a.config.databaseUrl, ['user', 'disable', 'ada@example.org'])).code, 0);
      // The other instance learns of the change after the CLI's commit (LISTEN/NOTIFY): within a second.
      const deadline = Date.now() + 1000;
      let status = (await atB()).status;
      while (status === 200 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        status = (await atB()).status;
      }
      assert.equal(status, 401);
      const refreshAtB = await fetch(`${b.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(rp.clientId, rp.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }),
      });
      assert.equal(refreshAtB.status, 400);
    });
  });
}
