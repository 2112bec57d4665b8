// A real relying party (openid-client) after a password sign-in in Chromium: userinfo, signed
// userinfo, the photo behind `picture`, and the legacy endpoint's audience.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import sharp from 'sharp';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { dialects, seedOrg, seedUser } from '../helpers.ts';
import { insertUserId } from '../../src/store/directory.ts';
import { setPhoto } from '../../src/directory/photos.ts';
import {
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  type E2EServer,
  type RelyingParty,
} from './helpers.ts';

const PASSWORD = 'correct horse battery staple';
const GROUPS = ['userinfo-name', 'userinfo-photo', 'email', 'userid-idp', 'userid-social'];

for (const dialect of dialects()) {
  describe(`relying party fetching userinfo after a browser sign-in (${dialect})`, () => {
    let server: E2EServer;
    let browser: Browser;
    let context: BrowserContext;
    let page: Page;
    let rp: RelyingParty;
    let signedRp: RelyingParty;
    let narrowRp: RelyingParty;
    let sub: string;
    let photo: string;
    let tokens: oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server);
      const user = await seedUser(server, 1, 'ada@example.org', {
        name: 'Ada Lovelace',
        email: 'ada@mail.example.org',
        password: PASSWORD,
      });
      sub = user.sub;
      await insertUserId(server.store.db, user.id, 'github', 'ada');
      photo = (
        await setPhoto(
          server.store,
          user,
          await sharp({ create: { width: 256, height: 256, channels: 3, background: '#aa3355' } })
            .png()
            .toBuffer(),
        )
      ).handle;
      rp = await startRelyingParty(server, { groups: GROUPS, scopes: ['profile'], firstParty: true });
      signedRp = await startRelyingParty(server, {
        groups: ['userinfo-name'],
        scopes: ['profile'],
        firstParty: true,
        userinfoSignedResponseAlg: 'RS256',
      });
      narrowRp = await startRelyingParty(server, { groups: ['userinfo-name'], scopes: ['profile'], firstParty: true });
      browser = await launchBrowser();
      context = await browser.newContext();
      page = await context.newPage();
      tokens = await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD, {
        scope: 'openid profile email userid-idp',
      });
    });
    /** Another relying party in the same browser session: no sign-in form, straight back with a code. */
    const signInAgain = async (other: RelyingParty, params: Record<string, string>) => {
      const begun = await other.begin(params);
      await page.goto(begun.url);
      await page.waitForURL((u) => u.href.startsWith(other.redirectUri));
      return other.finish(page.url(), begun);
    };

    after(async () => {
      await browser?.close();
      for (const r of [rp, signedRp, narrowRp]) await r?.close();
      await server?.close();
    });

    it('the ID token names the signed-in user by the opaque sub', () => {
      const claims = tokens.claims()!;
      assert.equal(claims.sub, sub);
      assert.equal(claims.aud, rp.clientId);
    });

    it('fetchUserInfo releases what the groups and the granted scopes allow, and nothing else', async () => {
      const info = await oidc.fetchUserInfo(rp.config, tokens.access_token, sub, {
        execute: [oidc.allowInsecureRequests],
      } as any);
      const ns = `${server.url}/claims`;
      assert.deepEqual(info, {
        sub,
        name: 'Ada Lovelace',
        picture: `${server.url}/userinfo/v1/user/media/${photo}`,
        email: 'ada@mail.example.org',
        email_verified: false,
        // userid-social is authorized but its scope was not requested: no github id
        [`${ns}/userid_sec`]: ['idp:ada@example.org'],
        'idp-userid_sec': ['idp:ada@example.org'],
        'connect-userid_sec': ['idp:ada@example.org'],
        [`${ns}/eduPersonPrincipalName`]: 'ada@example.org',
      });
    });

    it('the picture URL serves the photo to the same token', async () => {
      const info = await oidc.fetchUserInfo(rp.config, tokens.access_token, sub, {
        execute: [oidc.allowInsecureRequests],
      } as any);
      const res = await fetch(String(info.picture), { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
      assert.deepEqual([meta.width, meta.height], [128, 128]);
      const again = await fetch(String(info.picture), {
        headers: { authorization: `Bearer ${tokens.access_token}`, 'if-none-match': res.headers.get('etag')! },
      });
      assert.equal(again.status, 304);
    });

    it('legacy /userinfo answers the same user with audience equal to the client id', async () => {
      const res = await fetch(`${server.url}/userinfo`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('deprecation') ?? '', /^@\d+$/);
      const body = await res.json();
      assert.equal(body.audience, rp.clientId);
      assert.deepEqual(body.user, {
        userid: sub,
        userid_sec: ['idp:ada@example.org'],
        name: 'Ada Lovelace',
        email: 'ada@mail.example.org',
        profilephoto: photo,
      });
    });

    it('a client with fewer groups gets less from the same session', async () => {
      const narrow = await signInAgain(narrowRp, { scope: 'openid profile' });
      const info = await oidc.fetchUserInfo(narrowRp.config, narrow.access_token, sub, {
        execute: [oidc.allowInsecureRequests],
      } as any);
      assert.deepEqual(info, { sub, name: 'Ada Lovelace' });
    });

    it('a client registered for signed userinfo gets a JWT that openid-client verifies', async () => {
      const signed = await signInAgain(signedRp, { scope: 'openid profile' });
      const res = await fetch(`${server.url}/openid/userinfo`, {
        headers: { authorization: `Bearer ${signed.access_token}` },
      });
      assert.match(res.headers.get('content-type') ?? '', /^application\/jwt/);
      const info = await oidc.fetchUserInfo(signedRp.config, signed.access_token, sub, {
        execute: [oidc.allowInsecureRequests],
      } as any);
      assert.equal(info.sub, sub);
      assert.equal(info.name, 'Ada Lovelace');
      assert.equal(info.email, undefined);
    });

    it('a token presented to the wrong client is visible through audience', async () => {
      // An application authenticating users through legacy /userinfo must compare audience with its own id.
      const res = await fetch(`${server.url}/userinfo`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.notEqual((await res.json()).audience, narrowRp.clientId);
    });
  });
}
