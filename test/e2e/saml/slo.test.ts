// Single logout across service providers that are not ours, in Chromium: one session signed in to
// Apache with mod_auth_mellon (lasso verifies our LogoutRequest) and to pysaml2 (which verifies the
// Redirect binding's signature against our metadata), and to an OpenID Connect relying party. A
// logout at one SP reaches the other, and the one that asked hears Success, or PartialLogout when
// the other answered otherwise or could not be reached; an OpenID Connect logout reaches the SAML SP.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { addServiceProvider } from '../../../src/service-providers/index.ts';
import { childElements, decodeRedirectMessage, NS } from '../../../src/saml/xml/index.ts';
import { listAuditEvents } from '../../../src/store/audit.ts';
import { dialects } from '../../helpers.ts';
import { launchBrowser, startRelyingParty, startServer, type E2EServer, type RelyingParty } from '../helpers.ts';
import { mellonMissing, startMellon, type Mellon } from './mellon.ts';
import { pysaml2Missing, startPysaml2, type Pysaml2Sp } from './pysaml2.ts';
import { idpMetadataOf, seedAda, signInAndAgree } from './fixtures.ts';

const SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const PARTIAL = 'urn:oasis:names:tc:SAML:2.0:status:PartialLogout';
const skip = mellonMissing() || pysaml2Missing();

for (const dialect of dialects()) {
  describe(`single logout across mod_auth_mellon, pysaml2 and OpenID Connect (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let mellon: Mellon;
    let sp: Pysaml2Sp;
    let rp: RelyingParty;
    let browser: Browser;
    let page: Page;
    let mellonStopped = false;
    /** every URL the browser requested */
    const loaded: string[] = [];

    before(async () => {
      server = await startServer(dialect);
      await seedAda(server);
      const idpMetadata = await idpMetadataOf(server);
      mellon = await startMellon({ idpMetadata });
      sp = await startPysaml2({ idpMetadata });
      await addServiceProvider(server.store, {
        metadata: await (await fetch(mellon.metadataUrl)).text(),
        groups: ['userid-idp'],
        nameId: 'transient',
      });
      await addServiceProvider(server.store, {
        metadata: await (await fetch(sp.metadataUrl)).text(),
        groups: ['userid-idp'],
      });
      rp = await startRelyingParty(server, { firstParty: true }, { frontchannel: true });
      browser = await launchBrowser();
      page = await (await browser.newContext()).newPage();
      page.on('request', (r) => loaded.push(r.url()));
    });

    after(async () => {
      await browser?.close();
      await rp?.close();
      await sp?.stop();
      if (!mellonStopped) await mellon?.stop();
      await server?.close();
    });

    /** Opens `url`, signing in (or agreeing) on the service's pages when asked, until `arrived`. */
    async function visit(url: string, arrived: (u: URL) => boolean) {
      const atIdp = (u: URL) => u.href.startsWith(`${server.url}/interaction/`);
      await page.goto(url);
      await page.waitForURL((u) => arrived(u) || atIdp(u));
      if (arrived(new URL(page.url()))) return;
      if (await page.locator('#password').count()) await signInAndAgree(page, server);
      else await Promise.all([page.waitForEvent('load'), page.click('button[name=decision][value=allow]')]);
      await page.waitForURL(arrived);
    }

    /** One session, signed in to both SPs: mod_auth_mellon first, then pysaml2 (without a prompt). */
    async function signInToBoth() {
      await visit(mellon.protectedUrl, (u) => u.href.startsWith(mellon.protectedUrl));
      assert.match((await page.textContent('#attributes')) ?? '', /MELLON_NAME_ID/, mellon.log());
      await visit(sp.loginUrl, (u) => u.href.startsWith(`${sp.url}/acs`));
      const acs = await sp.next('acs');
      assert.equal(acs.error, undefined, `${acs.error}\n${acs.trace}`);
    }

    /** mod_auth_mellon has no session (nor has the service): its page starts a new sign-in. */
    async function mellonSignedOut() {
      const from = loaded.length;
      await page.goto(mellon.protectedUrl);
      await page.waitForURL((u) => u.href.startsWith(`${server.url}/interaction/`));
      assert.ok(
        loaded.slice(from).some((u) => u.startsWith(`${server.url}/saml2/idp/sso?SAMLRequest=`)),
        'mod_auth_mellon sent a new AuthnRequest',
      );
    }

    /** The status codes of the LogoutResponse the browser carried to `url`. */
    function statusSentTo(url: string, from: number): string[] {
      const answer = loaded.slice(from).find((u) => u.startsWith(url) && u.includes('SAMLResponse='));
      assert.ok(answer, `a LogoutResponse went to ${url}`);
      const root = decodeRedirectMessage(new URL(answer).searchParams.get('SAMLResponse')!).root;
      const top = childElements(childElements(root, NS.protocol, 'Status')[0]!, NS.protocol, 'StatusCode')[0]!;
      const second = childElements(top, NS.protocol, 'StatusCode')[0];
      return [top.getAttribute('Value')!, ...(second ? [second.getAttribute('Value')!] : [])];
    }

    it('a logout at pysaml2 reaches mod_auth_mellon, and pysaml2 hears Success', async () => {
      await signInToBoth();
      const from = loaded.length;
      await page.goto(`${sp.url}/logout`);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/slo?`));
      const event = await sp.next('slo-response');
      assert.equal(event.error, undefined, `${event.error}\n${event.trace}\n${mellon.log()}`);
      assert.equal(event.status, SUCCESS);
      assert.equal(event.detail, null, 'not a partial logout');
      const toMellon = loaded.slice(from).findIndex((u) => u.startsWith(`${mellon.url}/mellon/logout?SAMLRequest=`));
      assert.ok(toMellon !== -1, 'mod_auth_mellon was sent a LogoutRequest');
      assert.ok(
        loaded.slice(from + toMellon).some((u) => u.startsWith(`${server.url}/saml2/idp/slo?SAMLResponse=`)),
        'and its LogoutResponse came back',
      );
      await mellonSignedOut();
      const audit = await listAuditEvents(server.store.db, { action: 'saml.logout', limit: 10 });
      const entities = audit.map((e) => (JSON.parse(String(e.details)) as { entity_id: string }).entity_id);
      assert.deepEqual(entities.sort(), [mellon.entityId, sp.entityId].sort());
    });

    it('a logout at mod_auth_mellon reaches pysaml2, which verifies the signed LogoutRequest', async () => {
      await signInToBoth();
      const from = loaded.length;
      const returnTo = `${mellon.url}/signed-out`;
      await page.goto(`${mellon.url}/mellon/logout?ReturnTo=${encodeURIComponent(returnTo)}`);
      await page.waitForURL((u) => u.href.startsWith(returnTo));
      const event = await sp.next('slo-request');
      assert.equal(event.error, undefined, `${event.error}\n${event.trace}`);
      assert.equal(event.verified, true);
      assert.equal(event.known, true);
      assert.equal(event.matches, true, 'the NameID it was given at sign-in');
      assert.deepEqual(statusSentTo(`${mellon.url}/mellon/logout?`, from), [SUCCESS]);
      // pysaml2's session is gone
      await page.goto(`${sp.url}/logout`);
      assert.match((await sp.next('logout')).error ?? '', /not signed in/);
    });

    it('an SP that answers other than Success makes the logout partial', async () => {
      await signInToBoth();
      await fetch(`${sp.url}/fail-next-logout`);
      const from = loaded.length;
      const returnTo = `${mellon.url}/signed-out`;
      await page.goto(`${mellon.url}/mellon/logout?ReturnTo=${encodeURIComponent(returnTo)}`);
      await page.waitForURL((u) => u.href.startsWith(returnTo));
      assert.equal((await sp.next('slo-request')).failed, true);
      assert.deepEqual(statusSentTo(`${mellon.url}/mellon/logout?`, from), [SUCCESS, PARTIAL]);
    });

    it('an OpenID Connect logout reaches the SAML SP, with the front-channel logout of the client', async () => {
      await page.context().clearCookies();
      const begun = await rp.begin();
      await visit(begun.url, (u) => u.href.startsWith(rp.redirectUri));
      const tokens = await rp.finish(page.url(), begun);
      await visit(sp.loginUrl, (u) => u.href.startsWith(`${sp.url}/acs`));
      await sp.next('acs');
      const frames = rp.frontchannelLoads.length;
      const url = oidc.buildEndSessionUrl(rp.config, {
        id_token_hint: tokens.id_token!,
        post_logout_redirect_uri: rp.postLogoutRedirectUri,
      });
      await page.goto(url.href);
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(rp.postLogoutRedirectUri), { timeout: 20_000 }),
        page.click('#logout-yes'),
      ]);
      const event = await sp.next('slo-request');
      assert.equal(event.error, undefined, `${event.error}\n${event.trace}`);
      assert.equal(event.verified, true);
      assert.equal(event.matches, true);
      assert.ok(rp.frontchannelLoads.length > frames, 'the client’s front-channel logout URI was loaded');
    });

    it('a logout at pysaml2 loads the front-channel logout of the session’s OpenID Connect client', async () => {
      await page.context().clearCookies();
      const begun = await rp.begin();
      await visit(begun.url, (u) => u.href.startsWith(rp.redirectUri));
      await rp.finish(page.url(), begun);
      await visit(sp.loginUrl, (u) => u.href.startsWith(`${sp.url}/acs`));
      await sp.next('acs');
      const frames = rp.frontchannelLoads.length;
      const from = loaded.length;
      await page.goto(`${sp.url}/logout`);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/slo?`), { timeout: 20_000 });
      const event = await sp.next('slo-response');
      assert.equal(event.status, SUCCESS);
      assert.equal(event.detail, null);
      assert.ok(rp.frontchannelLoads.length > frames, 'the client’s front-channel logout URI was loaded');
      assert.ok(loaded.slice(from).some((u) => u === `${server.url}/saml2/idp/slo/continue`));
    });

    it('an SP that cannot be reached: the browser comes back, and the one that asked hears PartialLogout', async () => {
      await signInToBoth();
      await mellon.stop();
      mellonStopped = true;
      await page.goto(`${sp.url}/logout`).catch(() => undefined); // stops at mod_auth_mellon, which is gone
      assert.ok(loaded.some((u) => u.startsWith(`${mellon.url}/mellon/logout?SAMLRequest=`)));
      // the user comes back (a new tab of the same browser: the one at the error page may still be settling)
      const back = await page.context().newPage();
      await back.goto(`${server.url}/saml2/idp/slo/continue`);
      await back.waitForURL((u) => u.href.startsWith(`${sp.url}/slo?`));
      const event = await sp.next('slo-response');
      assert.equal(event.status, SUCCESS);
      assert.equal(event.detail, PARTIAL);
    });
  });
}
