// Single sign-on to a service provider that is not ours: pysaml2's Saml2Client (xmlsec1 checks the
// signatures and decrypts), driven through a real sign-in in Chromium on the service's own pages.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { addServiceProvider } from '../../../src/service-providers/index.ts';
import { listAuditEvents } from '../../../src/store/audit.ts';
import { dialects } from '../../helpers.ts';
import {
  launchBrowser,
  passwordSignInThroughRelyingParty,
  startRelyingParty,
  startServer,
  type E2EServer,
  type RelyingParty,
} from '../helpers.ts';
import { pysaml2Missing, startPysaml2, type Pysaml2Sp } from './pysaml2.ts';
import { idpMetadataOf, PASSWORD, seedAda, signInAndAgree } from './fixtures.ts';

const OID = {
  eppn: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6',
  displayName: 'urn:oid:2.16.840.1.113730.3.1.241',
  givenName: 'urn:oid:2.5.4.42',
  sn: 'urn:oid:2.5.4.4',
  cn: 'urn:oid:2.5.4.3',
  mail: 'urn:oid:0.9.2342.19200300.100.1.3',
  affiliation: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.1',
  scopedAffiliation: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.9',
  homeOrganization: 'urn:oid:1.3.6.1.4.1.25178.1.2.9',
  subjectId: 'urn:oasis:names:tc:SAML:attribute:subject-id',
};

const skip = pysaml2Missing();

for (const dialect of dialects()) {
  describe(`pysaml2 service provider signs in through the service (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let sp: Pysaml2Sp;
    let browser: Browser;
    let page: Page;
    let sub: string;

    before(async () => {
      server = await startServer(dialect);
      sub = (await seedAda(server)).sub;
      sp = await startPysaml2({ idpMetadata: await idpMetadataOf(server), signRequests: true, allowUnsolicited: true });
      const metadata = await (await fetch(sp.metadataUrl)).text();
      await addServiceProvider(server.store, {
        metadata,
        groups: ['userid-idp', 'userinfo-name', 'groups-org'],
        sign: 'both',
        allowUnsolicited: true,
      });
      browser = await launchBrowser();
      page = await browser.newPage();
    });

    after(async () => {
      await browser?.close();
      await sp?.stop();
      await server?.close();
    });

    it('signs in on the service’s pages and the SP receives exactly its groups’ attributes, signed and encrypted', async () => {
      await page.goto(`${sp.loginUrl}?relay=/course/42`);
      await signInAndAgree(page, server);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/acs`));
      const event = await sp.next('acs');
      assert.equal(event.error, undefined, `${event.error}\n${event.trace}\n${sp.output()}`);
      console.log('pysaml2 received:', JSON.stringify({ ...event, ava: undefined }));
      assert.equal(event.issuer, `${server.url}/saml2/idp/metadata`);
      assert.equal(event.encrypted, true);
      assert.deepEqual(event.encryption_methods, [
        'http://www.w3.org/2009/xmlenc11#aes256-gcm',
        'http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p',
      ]);
      assert.equal(event.response_signed, true);
      assert.equal(event.assertion_signed, true);
      assert.equal(event.relay_state, '/course/42');
      assert.equal(event.name_id.format, 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent');
      assert.deepEqual(event.audience, [sp.entityId]);
      assert.equal(event.authn[0].class_ref, 'https://refeds.org/profile/sfa');
      const a = event.attributes as Record<string, string[]>;
      assert.deepEqual(a[OID.eppn], ['ada@example.org']);
      assert.deepEqual(a[OID.subjectId], [`${sub}@example.org`]);
      assert.deepEqual(a[OID.displayName], ['Ada <b>&amp; "Byron" ]]> </b>']);
      assert.deepEqual(a[OID.givenName], ['Ada']);
      assert.deepEqual(a[OID.sn], ['Lovelace']);
      assert.deepEqual(a[OID.cn], ['Ada Lovelace']);
      assert.deepEqual(a[OID.affiliation]?.sort(), ['faculty', 'member']);
      assert.deepEqual(a[OID.scopedAffiliation]?.sort(), ['faculty@example.org', 'member@example.org']);
      assert.deepEqual(a[OID.homeOrganization], ['example.org']);
      assert.equal(a[OID.mail], undefined, 'mail is not among its groups');
      assert.equal(event.friendly_names[OID.eppn], 'eduPersonPrincipalName');
      const [audit] = await listAuditEvents(server.store.db, { action: 'saml.sso', limit: 1 });
      assert.equal(audit?.eppn, 'ada@example.org');
      assert.equal((JSON.parse(audit!.details) as { entity_id: string }).entity_id, sp.entityId);
    });

    it('signs in again from the session without a prompt, with the same persistent NameID', async () => {
      const first = sp.events.filter((e) => e.event === 'acs').at(-1)!;
      await page.goto(sp.loginUrl);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/acs`));
      const event = await sp.next('acs');
      assert.equal(event.error, undefined, event.error);
      assert.equal(event.name_id.text, first.name_id.text);
    });

    it('answers an IdP-initiated sign-in for an SP that allows it', async () => {
      await page.goto(
        `${server.url}/saml2/idp/unsolicited?providerId=${encodeURIComponent(sp.entityId)}&target=${encodeURIComponent('/start')}`,
      );
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/acs`));
      const event = await sp.next('acs');
      assert.equal(event.error, undefined, event.error);
      assert.equal(event.in_response_to, null);
      assert.equal(event.relay_state, '/start');
    });

    it('logs out from the SP: the session ends and the SP gets a signed LogoutResponse', async () => {
      const loaded: string[] = [];
      page.on('request', (r) => loaded.push(r.url()));
      await page.goto(`${sp.url}/logout`);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/slo`));
      const answer = new URL(loaded.find((u) => u.startsWith(`${sp.url}/slo?`))!);
      assert.equal(answer.searchParams.get('SigAlg'), 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256');
      assert.ok(answer.searchParams.get('Signature'));
      assert.ok(loaded.some((u) => u.startsWith(`${server.url}/saml2/idp/slo?`) && u.includes('Signature=')));
      const event = await sp.next('slo-response');
      assert.equal(event.error, undefined, `${event.error}\n${event.trace}`);
      assert.equal(event.status, 'urn:oasis:names:tc:SAML:2.0:status:Success');
      assert.equal(event.issuer, `${server.url}/saml2/idp/metadata`);
      // the service's session is gone: the next sign-in asks again
      await page.goto(sp.loginUrl);
      await page.waitForURL((u) => u.href.startsWith(`${server.url}/interaction/`));
    });
  });
}

for (const dialect of dialects()) {
  describe(`one sign-in for OpenID Connect and SAML (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let sp: Pysaml2Sp;
    let rp: RelyingParty;
    let browser: Browser;

    before(async () => {
      server = await startServer(dialect);
      await seedAda(server);
      sp = await startPysaml2({ idpMetadata: await idpMetadataOf(server) });
      await addServiceProvider(server.store, {
        metadata: await (await fetch(sp.metadataUrl)).text(),
        groups: ['userid-idp'],
        firstParty: true,
      });
      rp = await startRelyingParty(server, { firstParty: true, groups: ['userid-idp'] });
      browser = await launchBrowser();
    });

    after(async () => {
      await browser?.close();
      await rp?.close();
      await sp?.stop();
      await server?.close();
    });

    /** Every URL the page loads, to see whether the sign-in page was among them. */
    function watch(page: Page): string[] {
      const seen: string[] = [];
      page.on('request', (r) => seen.push(r.url()));
      return seen;
    }

    it('lets a user signed in at an OpenID Connect application into the SAML SP without a prompt', async () => {
      const page = await browser.newPage();
      await passwordSignInThroughRelyingParty(page, rp, 'ada@example.org', PASSWORD);
      const seen = watch(page);
      await page.goto(sp.loginUrl);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/acs`));
      const event = await sp.next('acs');
      assert.equal(event.error, undefined, event.error);
      assert.deepEqual(event.attributes['urn:oid:1.3.6.1.4.1.5923.1.1.1.6'], ['ada@example.org']);
      assert.ok(!seen.some((u) => u.startsWith(`${server.url}/interaction/`)), 'no sign-in page');
      await page.close();
    });

    it('lets a user signed in at the SAML SP into an OpenID Connect application without a prompt', async () => {
      const page = await browser.newPage();
      await page.goto(sp.loginUrl);
      await signInAndAgree(page, server);
      await page.waitForURL((u) => u.href.startsWith(`${sp.url}/acs`));
      assert.equal((await sp.next('acs')).error, undefined);
      const seen = watch(page);
      const begun = await rp.begin();
      await page.goto(begun.url);
      await page.waitForURL((u) => u.href.startsWith(rp.redirectUri));
      const tokens = await rp.finish(page.url(), begun);
      assert.ok(tokens.id_token);
      assert.ok(!seen.some((u) => u.startsWith(`${server.url}/interaction/`)), 'no sign-in page');
      await page.close();
    });
  });
}
