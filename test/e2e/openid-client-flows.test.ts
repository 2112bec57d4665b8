// The openid-client (v6) calls docs/connecting-applications.md gives application developers, against
// the service listening on 127.0.0.1: client credentials for the passkey API, a public client with
// PKCE only, refresh tokens with offline_access, and introspection of the client's own token.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { dialects, seedClient, seedOrg, seedUser } from '../helpers.ts';
import {
  authorizationRequest,
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  submitPassword,
  type E2EServer,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const INSECURE = { execute: [oidc.allowInsecureRequests] };

for (const dialect of dialects()) {
  describe(`openid-client calls of the application guide (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let page: Page;
    let sub: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      sub = (await seedUser(server, 1, 'ada@example.org', { name: 'Ada Lovelace', password: PASSWORD })).sub;
      browser = await launchBrowser();
      page = await browser.newPage();
    });

    after(async () => {
      await browser?.close();
      await server?.close();
    });

    it('clientCredentialsGrant gives a token the passkey API accepts', async () => {
      const { clientId, secret } = await seedClient(server, {
        name: 'Helpdesk',
        scopes: ['passkey.read', 'passkey.delete'],
        orgs: [1],
      });
      const config = await oidc.discovery(
        new URL(server.url),
        clientId,
        undefined,
        oidc.ClientSecretBasic(secret),
        INSECURE,
      );
      const { access_token: accessToken } = await oidc.clientCredentialsGrant(config, { scope: 'passkey.read' });
      const res = await fetch(`${server.url}/2/passkey/1`, { headers: { authorization: `Bearer ${accessToken}` } });
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), []);
    });

    it('a sign-in with offline_access and prompt=consent: refreshTokenGrant rotates, tokenIntrospection sees it', async () => {
      const rp = await startRelyingParty(server, { groups: ['userinfo-name'], scopes: ['offline_access'] });
      try {
        const tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
          scope: 'openid profile offline_access',
          prompt: 'consent',
        });
        assert.ok(tokens.refresh_token);
        const seen = await oidc.tokenIntrospection(rp.config, tokens.access_token);
        assert.equal(seen.active, true);
        assert.equal(seen.sub, sub);
        const refreshed = await oidc.refreshTokenGrant(rp.config, tokens.refresh_token);
        assert.ok(refreshed.refresh_token && refreshed.refresh_token !== tokens.refresh_token);
        const info = await oidc.fetchUserInfo(rp.config, refreshed.access_token, sub);
        assert.equal(info.name, 'Ada Lovelace');
        await assert.rejects(oidc.refreshTokenGrant(rp.config, tokens.refresh_token), { error: 'invalid_grant' });
      } finally {
        await rp.close();
      }
    });

    it('a public client (None) signs in with PKCE and no secret', async () => {
      const redirectUri = 'http://127.0.0.1:9/timetable/callback';
      const { clientId } = await seedClient(server, {
        name: 'Timetable app',
        public: true,
        redirectUris: [redirectUri],
        groups: ['userinfo-name'],
      });
      const config = await oidc.discovery(new URL(server.url), clientId, undefined, oidc.None(), INSECURE);
      const begun = await authorizationRequest(config, redirectUri, { scope: 'openid profile' });
      await page.goto(begun.url);
      if (await page.locator('#password').count()) await submitPassword(page, 'ada@example.org', PASSWORD);
      // Nothing listens at the redirect URI: the browser's request for it is what the app would receive.
      const [callback] = await Promise.all([
        page.waitForRequest((r) => r.url().startsWith(redirectUri)),
        page.click('button[name=decision][value=allow]'),
      ]);
      const tokens = await oidc.authorizationCodeGrant(config, new URL(callback.url()), {
        pkceCodeVerifier: begun.codeVerifier,
        expectedState: begun.state,
        expectedNonce: begun.nonce,
      });
      assert.equal(tokens.claims()!.sub, sub);
      assert.deepEqual(await oidc.fetchUserInfo(config, tokens.access_token, sub), { sub, name: 'Ada Lovelace' });
    });
  });
}
