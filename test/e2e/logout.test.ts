// Logout reaching the relying parties, in real Chromium against a listening server: back-channel
// logout tokens (verified by the relying party against /openid/jwks) on RP-initiated logout, their
// recorded outcome and retry, and an administrator's delete-all of a user's passkeys ending the
// user's sessions everywhere.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { basicAuth, clientToken, dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import { passkeyRow } from '../passkey-admin/fixtures.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';
import { listLogoutDeliveries } from '../../src/store/logout-deliveries.ts';
import { retryLogoutDeliveries } from '../../src/oauth/backchannel-logout.ts';
import { disableUser, enableUser } from '../../src/oauth/account-lifecycle.ts';
import type { User } from '../../src/store/directory.ts';
import {
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  submitPassword,
  type E2EServer,
  type ReceivedLogout,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 100; i++) {
    const found = await probe();
    if (found !== undefined) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const received = (rp: RelyingParty, n: number) =>
  until(`${n} back-channel logout(s)`, () => (rp.logouts.length >= n ? rp.logouts.slice(0, n) : undefined));

function verified(logout: ReceivedLogout | undefined) {
  assert.ok(logout, 'a logout token arrived');
  assert.ok(logout.ok, `the logout token verifies: ${logout.ok ? '' : logout.error}`);
  return logout;
}

for (const dialect of dialects()) {
  describe(`logout reaches the relying parties (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let rp: RelyingParty;
    let frontOnly: RelyingParty;
    let consenting: RelyingParty;
    let ada: User;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      await seedUser(server, 1, 'bob@example.org', { name: 'Bob', password: PASSWORD });
      rp = await startRelyingParty(
        server,
        { firstParty: true, scopes: ['offline_access'] },
        { backchannel: true, frontchannel: true },
      );
      frontOnly = await startRelyingParty(server, { firstParty: true }, { frontchannel: true });
      // an application of another party: the user agrees on the consent page to offline access
      consenting = await startRelyingParty(server, { scopes: ['offline_access'] }, { backchannel: true });
      browser = await launchBrowser();
    });
    after(async () => {
      await browser?.close();
      await rp?.close();
      await frontOnly?.close();
      await consenting?.close();
      await server?.close();
    });

    async function freshBrowser() {
      await page?.context().close();
      page = await (await browser.newContext()).newPage();
    }

    /** RP-initiated logout with the ID token as hint, confirmed on the "Sign out?" page. */
    async function signOut(idToken: string, by: RelyingParty = rp) {
      const url = oidc.buildEndSessionUrl(by.config, {
        id_token_hint: idToken,
        post_logout_redirect_uri: by.postLogoutRedirectUri,
      });
      await page.goto(url.href);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(by.postLogoutRedirectUri)),
        page.click('#logout-yes'),
      ]);
    }

    /** The refresh token grant at the token endpoint, as the relying party makes it. */
    async function refresh(refreshToken: string, by: RelyingParty = rp) {
      const res = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(by.clientId, by.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken }),
      });
      return { status: res.status, body: (await res.json()) as { error?: string; refresh_token?: string } };
    }

    it('discovery advertises back- and front-channel logout with sessions', async () => {
      const metadata = (await (await fetch(`${server.url}/.well-known/openid-configuration`)).json()) as Record<
        string,
        unknown
      >;
      assert.equal(metadata.backchannel_logout_supported, true);
      assert.equal(metadata.backchannel_logout_session_supported, true);
      assert.equal(metadata.frontchannel_logout_supported, true);
      assert.equal(metadata.frontchannel_logout_session_supported, true);
      assert.deepEqual(metadata.claim_types_supported, ['normal']);
    });

    it('the ID token carries sid; RP-initiated logout sends a verified logout token for that sid', async () => {
      await freshBrowser();
      const before = rp.logouts.length;
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      const claims = tokens.claims()!;
      assert.equal(typeof claims.sid, 'string', 'a client with a back-channel logout URI gets sid in ID tokens');
      await signOut(tokens.id_token!);

      const logout = verified((await received(rp, before + 1))[before]);
      assert.equal(logout.claims.sub, ada.sub);
      assert.equal(logout.claims.sid, claims.sid);
      assert.equal(logout.claims.aud, rp.clientId);
      assert.equal(logout.answered, 200);

      const delivery = (await listLogoutDeliveries(server.store.db, rp.clientId)).at(-1)!;
      assert.equal(delivery.sid, claims.sid);
      assert.equal(delivery.sub, ada.sub);
      assert.equal(delivery.attempts, 1);
      assert.equal(delivery.status, 200);
      assert.equal(delivery.error, null);
      assert.ok(delivery.delivered_at);
      assert.equal(delivery.next_attempt_at, null);
    });

    it('a delivery the relying party answered with a 500 is recorded and retried until it succeeds', async () => {
      await freshBrowser();
      const before = rp.logouts.length;
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      rp.failBackchannel(1);
      await signOut(tokens.id_token!);
      assert.equal(verified((await received(rp, before + 1))[before]).answered, 500);

      const failed = (await listLogoutDeliveries(server.store.db, rp.clientId)).at(-1)!;
      assert.equal(failed.attempts, 1);
      assert.equal(failed.status, 500);
      assert.match(failed.error ?? '', /500/);
      assert.equal(failed.delivered_at, null);
      assert.ok(failed.next_attempt_at! > Date.now(), 'the retry waits (backoff)');

      // Not due yet: nothing is sent.
      assert.equal(await retryLogoutDeliveries(server.store, server.provider.current()), 0);
      // Once due, the job sends a new logout token for the same session.
      const later = () => Date.now() + 60 * 60_000;
      assert.equal(await retryLogoutDeliveries(server.store, server.provider.current(), undefined, later), 1);
      const retried = verified((await received(rp, before + 2))[before + 1]);
      assert.equal(retried.answered, 200);
      assert.equal(retried.claims.sid, tokens.claims()!.sid);

      const delivered = (await listLogoutDeliveries(server.store.db, rp.clientId)).find((d) => d.id === failed.id)!;
      assert.equal(delivered.attempts, 2);
      assert.equal(delivered.status, 200);
      assert.equal(delivered.error, null);
      assert.ok(delivered.delivered_at);
      assert.equal(delivered.next_attempt_at, null);
      // Delivered: later runs leave it alone.
      assert.equal(await retryLogoutDeliveries(server.store, server.provider.current(), undefined, later), 0);
    });

    it("another user signing in on the same browser ends the first user's session: a logout token for it", async () => {
      await freshBrowser();
      const first = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      const before = rp.logouts.length;
      await passwordSignInThroughRelyingParty(page, rp, 'bob@example.org', PASSWORD, { prompt: 'login' });
      const logout = verified((await received(rp, before + 1))[before]);
      assert.equal(logout.claims.sub, ada.sub);
      assert.equal(logout.claims.sid, first.claims()!.sid);
    });

    it('signing in as another user on /account sends a logout token for the session it ends', async () => {
      await freshBrowser();
      // The account page's sign-in form, opened before the application's sign-in in another tab.
      await page.goto(`${server.url}/account`);
      const tab = await page.context().newPage();
      const first = await passwordSignInThroughRelyingParty(tab, rp, 'ada@example.org', PASSWORD);
      const before = rp.logouts.length;
      await submitPassword(page, 'bob@example.org', PASSWORD);
      assert.match((await page.textContent('.subtitle')) ?? '', /bob@example\.org/);
      const logout = verified((await received(rp, before + 1))[before]);
      assert.equal(logout.claims.sub, ada.sub);
      assert.equal(logout.claims.sid, first.claims()!.sid);
    });

    it('the signed-out page loads the front-channel logout URI with iss and sid, framing only its origin', async () => {
      await freshBrowser();
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      const sid = tokens.claims()!.sid as string;
      const loadsBefore = rp.frontchannelLoads.length;
      const confirmed = page.waitForResponse(
        (r) => r.request().method() === 'POST' && r.url().includes('/openid/endsession'),
      );
      await signOut(tokens.id_token!);
      const response = await confirmed;
      assert.equal(response.status(), 200);
      const rpOrigin = new URL(rp.frontchannelLogoutUri).origin;
      const csp = (await response.allHeaders())['content-security-policy'] ?? '';
      assert.match(csp, new RegExp(`(^|; )frame-src ${rpOrigin.replace(/[.]/g, '\\.')}(;|$)`), csp);
      assert.match((await response.allHeaders())['refresh'] ?? '', /^\d+;url=http:\/\/127\.0\.0\.1:\d+\/signed-out/);

      const load = await until('the front-channel logout URI', () => rp.frontchannelLoads[loadsBefore]);
      assert.equal(load.pathname, '/frontchannel-logout');
      assert.equal(load.searchParams.get('iss'), server.url);
      assert.equal(load.searchParams.get('sid'), sid);
      // ... and the browser went on to the application's post-logout redirect URI.
      assert.ok(page.url().startsWith(rp.postLogoutRedirectUri));
    });

    it('without a post-logout redirect URI the signed-out page itself loads the front-channel logout URI', async () => {
      await freshBrowser();
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      const loadsBefore = rp.frontchannelLoads.length;
      await page.goto(oidc.buildEndSessionUrl(rp.config, { id_token_hint: tokens.id_token! }).href);
      await Promise.all([page.waitForEvent('load'), page.click('#logout-yes')]);
      const load = await until('the front-channel logout URI', () => rp.frontchannelLoads[loadsBefore]);
      assert.equal(load.searchParams.get('sid'), tokens.claims()!.sid);
      assert.equal(await page.locator('h1').textContent(), 'Signed out');
      assert.equal(await page.locator('iframe.frontchannel-logout').count(), 1);
    });

    it('a client with only a front-channel logout URI gets sid in the ID token, the sid its logout request names', async () => {
      await freshBrowser();
      const tokens = await passwordSignInThroughRelyingParty(page, frontOnly, 'ada@example.org', PASSWORD);
      const sid = tokens.claims()!.sid;
      assert.equal(typeof sid, 'string', 'OIDC Front-Channel Logout 1.0 section 3: sid in the ID token');
      const loadsBefore = frontOnly.frontchannelLoads.length;
      await signOut(tokens.id_token!, frontOnly);
      const load = await until('the front-channel logout URI', () => frontOnly.frontchannelLoads[loadsBefore]);
      assert.equal(load.searchParams.get('sid'), sid);
      // a refreshed ID token names the same session
      await freshBrowser();
      const again = await passwordSignInThroughRelyingParty(page, frontOnly, 'ada@example.org', PASSWORD);
      assert.notEqual(again.claims()!.sid, sid, 'a new session, a new sid');
    });

    for (const kind of ['first-party', 'consenting'] as const) {
      it(`an offline_access refresh token survives the user's sign-out; disabling the user ends it (${kind})`, async () => {
        const client = kind === 'first-party' ? rp : consenting;
        await freshBrowser();
        // as relying parties ask for it: without prompt=consent (docs/sign-in.md)
        const tokens = await passwordSignInThroughRelyingParty(page, client, 'ada@example.org', PASSWORD, {
          scope: 'openid offline_access',
        });
        assert.ok(tokens.refresh_token, 'offline_access gives a refresh token');
        // a later authorization in the same session that does not ask for offline access
        const silent = await client.begin({ prompt: 'none' });
        await page.goto(silent.url);
        await page.waitForURL((u) => u.href.startsWith(client.redirectUri));
        const again = await client.finish(page.url(), silent);
        await signOut(again.id_token!, client);

        // the session is over, but offline access is for when the user is not there (OIDC Core 11)
        const refreshed = await refresh(tokens.refresh_token, client);
        assert.equal(refreshed.status, 200, JSON.stringify(refreshed.body));
        assert.ok(refreshed.body.refresh_token);
        // ... and the browser is signed out all the same
        const begun = await client.begin();
        await page.goto(begun.url);
        assert.match(new URL(page.url()).pathname, /^\/interaction\//);

        // disabling the user ends it
        await disableUser(server.store, 'ada@example.org');
        try {
          const refused = await refresh(refreshed.body.refresh_token!, client);
          assert.equal(refused.status, 400);
          assert.equal(refused.body.error, 'invalid_grant');
        } finally {
          await enableUser(server.store, 'ada@example.org');
        }
      });
    }

    it("an administrator deleting all of a user's passkeys signs the user out everywhere", async () => {
      await freshBrowser();
      await insertPasskeys(server.store.db, [passkeyRow(ada.id, 1, { label: 'Laptop' })]);
      const admin = await seedClient(server, { scopes: ['passkey.delete'], orgs: [1] });
      const before = rp.logouts.length;
      const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
        scope: 'openid offline_access',
        prompt: 'consent',
      });
      assert.ok(tokens.refresh_token, 'offline_access gives a refresh token');
      const userinfo = () =>
        fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal((await userinfo()).status, 200);

      const bearer = await clientToken(server, admin.clientId, admin.secret, 'passkey.delete');
      const res = await fetch(`${server.url}/2/passkey/1?eppn=ada%40example.org`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${bearer}` },
      });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { deleted_count: 1, eppn: 'ada@example.org' });
      assert.equal((await listUserCredentials(server.store.db, ada.id)).length, 0);

      // The relying party heard about it.
      const logout = verified((await received(rp, before + 1))[before]);
      assert.equal(logout.claims.sub, ada.sub);
      assert.equal(logout.claims.sid, tokens.claims()!.sid);

      // The refresh token and the access token are dead.
      const refreshed = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(rp.clientId, rp.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }),
      });
      assert.equal(refreshed.status, 400);
      assert.equal(((await refreshed.json()) as { error: string }).error, 'invalid_grant');
      assert.equal((await userinfo()).status, 401);

      // The browser must sign in again.
      const begun = await rp.begin();
      await page.goto(begun.url);
      assert.match(new URL(page.url()).pathname, /^\/interaction\//);
      assert.equal(await page.locator('#password-form').count(), 1, 'the sign-in page, not the application');
    });
  });
}
