// Single sign-on to a service provider that is not ours: Apache with mod_auth_mellon (lasso and
// xmlsec1 check the signature and decrypt), driven through a real sign-in in Chromium. The page it
// protects prints what mod_auth_mellon put in its environment.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Page } from 'playwright-core';
import { addServiceProvider } from '../../../src/service-providers/index.ts';
import { childElements, decryptElement, NS, parseXml, serialize } from '../../../src/saml/xml/index.ts';
import { dialects } from '../../helpers.ts';
import { launchBrowser, startServer, type E2EServer } from '../helpers.ts';
import { mellonMissing, startMellon, type Mellon } from './mellon.ts';
import { idpMetadataOf, seedAda, signInAndAgree } from './fixtures.ts';

const ENV = {
  eppn: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6',
  mail: 'urn:oid:0.9.2342.19200300.100.1.3',
  displayName: 'urn:oid:2.16.840.1.113730.3.1.241',
  givenName: 'urn:oid:2.5.4.42',
  sn: 'urn:oid:2.5.4.4',
  affiliation: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.1',
  entitlement: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.7',
  subjectId: 'urn:oasis:names:tc:SAML:attribute:subject-id',
};

const skip = mellonMissing();

for (const dialect of dialects()) {
  describe(`mod_auth_mellon service provider signs in through the service (${dialect})`, { skip }, () => {
    let server: E2EServer;
    let mellon: Mellon;
    let browser: Browser;
    let page: Page;
    let sub: string;

    before(async () => {
      server = await startServer(dialect);
      sub = (await seedAda(server)).sub;
      mellon = await startMellon({
        idpMetadata: await idpMetadataOf(server),

        env: Object.fromEntries(Object.entries(ENV).map(([k, v]) => [`SAML_${k}`, v])),
      });
      const metadata = await (await fetch(mellon.metadataUrl)).text();
      await addServiceProvider(server.store, {
        metadata,
        groups: ['userid-idp', 'email', 'userinfo-entitlement'],
        nameId: 'transient',
      });
      browser = await launchBrowser();
      page = await browser.newPage();
    });

    after(async () => {
      await browser?.close();
      await mellon?.stop();
      await server?.close();
    });

    it('signs in on the service’s pages and mod_auth_mellon accepts the signed, encrypted assertion', async () => {
      const posted: string[] = [];
      page.on('request', (r) => {
        if (r.url().endsWith('/mellon/postResponse')) posted.push(r.postData() ?? '');
      });
      await page.goto(mellon.protectedUrl);
      await signInAndAgree(page, server);
      await page.waitForURL((u) => u.href.startsWith(mellon.protectedUrl));
      const shown = JSON.parse((await page.textContent('#attributes')) ?? '{}') as Record<string, string>;
      console.log('mod_auth_mellon environment:', JSON.stringify(shown));
      assert.equal(shown.SAML_eppn, 'ada@example.org', mellon.log());
      assert.equal(shown.SAML_mail, 'ada@mail.example.org');
      assert.equal(shown.SAML_subjectId, `${sub}@example.org`);
      assert.equal(shown.SAML_entitlement, 'urn:mace:example.org:entitlement:library');
      assert.equal(shown.SAML_displayName, undefined, 'userinfo-name is not among its groups');
      assert.equal(shown.SAML_givenName, undefined);
      assert.equal(shown.SAML_affiliation, undefined);
      // what it accepted: the assertion encrypted with AES-256-GCM, the key with rsa-oaep-mgf1p
      const response = parseXml(Buffer.from(new URLSearchParams(posted[0]).get('SAMLResponse')!, 'base64'));
      const encrypted = childElements(response.root, NS.assertion, 'EncryptedAssertion');
      assert.equal(encrypted.length, 1);
      assert.equal(childElements(response.root, NS.assertion, 'Assertion').length, 0);
      assert.match(serialize(encrypted[0]!), /xmlenc11#aes256-gcm[\s\S]*xmlenc#rsa-oaep-mgf1p/);
      const assertion = (await decryptElement(encrypted[0]!, { privateKey: mellon.encryption.privateKey })).root;
      assert.equal(childElements(assertion, NS.dsig, 'Signature').length, 1, 'the assertion is signed');
    });

    it('gets a user signed in at the service in without a prompt', async () => {
      // mod_auth_mellon's session forgotten, the service's kept
      await page.context().clearCookies({ name: 'mellon-cookie' });
      const seen: string[] = [];
      page.on('request', (r) => seen.push(r.url()));
      await page.goto(mellon.protectedUrl);
      await page.waitForURL((u) => u.href.startsWith(mellon.protectedUrl));
      const shown = JSON.parse((await page.textContent('#attributes')) ?? '{}') as Record<string, string>;
      assert.equal(shown.SAML_eppn, 'ada@example.org');
      assert.ok(
        seen.some((u) => u.startsWith(`${server.url}/saml2/idp/sso?`)),
        'it went through the IdP',
      );
      assert.ok(!seen.some((u) => u.startsWith(`${server.url}/interaction/`)), 'without the sign-in page');
    });
  });
}
