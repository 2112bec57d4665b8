// Single sign-on to a service provider that is not ours: pysaml2's Saml2Client (xmlsec1 checks the
// signatures and decrypts), driven through a real sign-in in Chromium on the service's own pages.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { addServiceProvider } from '../../../src/service-providers/index.ts';
import { dialects } from '../../helpers.ts';
import { launchBrowser, startServer, type E2EServer } from '../helpers.ts';
import { pysaml2Missing, startPysaml2, type Pysaml2Sp } from './pysaml2.ts';
import { idpMetadataOf, seedAda, signInAndAgree } from './fixtures.ts';

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
  });
}
