// Service provider metadata read into SpDescriptor: the shapes deployed SP software writes, and
// every document the identity provider refuses.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { MetadataError, parseSpMetadata, spDescriptorOf } from '../../src/saml/metadata/index.ts';
import { parseXml, readCertificate, XmlSecurityError } from '../../src/saml/xml/index.ts';
import {
  acsElement,
  BINDINGS,
  keyDescriptor,
  mellonSp,
  minimalSp,
  opensslCertificate,
  pysaml2Sp,
  shibbolethSp,
  simpleSamlPhpSp,
  spKeys,
  type SpKeys,
} from './sp-metadata-fixtures.ts';

let keys: SpKeys;
before(async () => {
  keys = await spKeys();
});

const fingerprint = (pem: string) => readCertificate(pem).sha256Fingerprint;

async function refused(xml: string, pattern: RegExp, now?: number): Promise<void> {
  await assert.rejects(parseSpMetadata(xml, now === undefined ? {} : { now }), (err: unknown) => {
    assert.ok(err instanceof MetadataError || err instanceof XmlSecurityError, String(err));
    assert.equal((err as MetadataError).status, 400);
    assert.match((err as Error).message, pattern);
    return true;
  });
}

describe('SP metadata of deployed software', () => {
  it('reads Shibboleth SP 3 metadata: its ACS, SLO, keys and encryption methods', async () => {
    const sp = await parseSpMetadata(shibbolethSp(keys));
    assert.equal(sp.entityId, 'https://sp.example.org/shibboleth');
    assert.equal(sp.assertionConsumerServices.length, 6);
    assert.deepEqual(sp.assertionConsumerServices[0], {
      binding: BINDINGS.POST,
      location: 'https://sp.example.org/Shibboleth.sso/SAML2/POST',
      index: 1,
    });
    assert.deepEqual(
      sp.singleLogoutServices.map((s) => s.binding),
      [BINDINGS.SOAP, BINDINGS.REDIRECT, BINDINGS.POST, BINDINGS.ARTIFACT],
    );
    assert.equal(sp.signingCertificates.length, 1);
    assert.equal(sp.encryptionCertificates.length, 1);
    assert.equal(
      fingerprint(sp.signingCertificates[0]!),
      fingerprint(`-----BEGIN CERTIFICATE-----\n${keys.signing}\n-----END CERTIFICATE-----`),
    );
    assert.notEqual(fingerprint(sp.encryptionCertificates[0]!), fingerprint(sp.signingCertificates[0]!));
    assert.ok(sp.encryptionMethods.includes('http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p'));
    assert.ok(sp.encryptionMethods.includes('http://www.w3.org/2009/xmlenc11#aes256-gcm'));
    assert.equal(sp.authnRequestsSigned, false);
    assert.equal(sp.wantAssertionsSigned, false);
    assert.equal(sp.displayName, undefined);
    assert.equal(sp.validUntil, undefined);
  });

  it('reads mod_auth_mellon metadata (default namespace, signed requests, transient NameID)', async () => {
    const sp = await parseSpMetadata(mellonSp(keys));
    assert.equal(sp.entityId, 'https://app.example.org/mellon/metadata');
    assert.equal(sp.authnRequestsSigned, true);
    assert.equal(sp.wantAssertionsSigned, true);
    assert.deepEqual(sp.nameIdFormats, ['urn:oasis:names:tc:SAML:2.0:nameid-format:transient']);
    assert.deepEqual(sp.assertionConsumerServices[0], {
      binding: BINDINGS.POST,
      location: 'https://app.example.org/mellon/postResponse',
      index: 0,
      isDefault: true,
    });
    assert.deepEqual(sp.encryptionMethods, []);
    assert.equal(sp.signingCertificates.length, 1);
  });

  it('reads pysaml2 metadata: entity category, subject-id:req, requested attributes, mdui name, http on localhost', async () => {
    const sp = await parseSpMetadata(pysaml2Sp(keys));
    assert.equal(sp.entityId, 'http://localhost:8087/sp.xml');
    assert.deepEqual(sp.entityCategories, ['http://refeds.org/category/research-and-scholarship']);
    assert.equal(sp.subjectIdRequirement, 'pairwise-id');
    assert.deepEqual(sp.requestedAttributes, [
      { name: 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6', isRequired: true },
      { name: 'urn:oid:0.9.2342.19200300.100.1.3', isRequired: false },
    ]);
    assert.equal(sp.displayName, 'Research Wiki');
    assert.equal(sp.validUntil, Date.parse('2099-01-01T00:00:00Z'));
    assert.equal(sp.assertionConsumerServices[0]!.location, 'http://localhost:8087/acs/post');
  });

  it('reads SimpleSAMLphp metadata: English display name, registration authority, a key without use', async () => {
    const sp = await parseSpMetadata(simpleSamlPhpSp(keys));
    assert.equal(sp.displayName, 'Student Portal');
    assert.equal(sp.registrationAuthority, 'https://federation.example.org');
    assert.equal(sp.subjectIdRequirement, 'any');
    // a KeyDescriptor without use serves both
    assert.equal(sp.signingCertificates.length, 1);
    assert.deepEqual(sp.encryptionCertificates, sp.signingCertificates);
    assert.equal(sp.assertionConsumerServices.length, 4);
  });

  it('falls back to the OrganizationDisplayName when there is no mdui:DisplayName', async () => {
    const xml = pysaml2Sp(keys).replace(/<ns0:Extensions><ns4:UIInfo>.*?<\/ns0:Extensions>/, '');
    const sp = await parseSpMetadata(xml);
    assert.equal(sp.displayName, 'Example Research Lab');
  });

  it('reads one entity of an aggregate with spDescriptorOf, taking the aggregate validUntil and authority', () => {
    const entity = minimalSp({ keys: keyDescriptor(keys.signing, 'signing') });
    const aggregate =
      `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:mdrpi="urn:oasis:names:tc:SAML:metadata:rpi" validUntil="2099-06-01T00:00:00Z">` +
      `<md:Extensions><mdrpi:RegistrationInfo registrationAuthority="https://fed.example.org"/></md:Extensions>${entity}</md:EntitiesDescriptor>`;
    const parsed = parseXml(aggregate);
    const element = parsed.root.getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:metadata', 'EntityDescriptor')[0]!;
    const sp = spDescriptorOf(element);
    assert.equal(sp.entityId, 'https://minimal.example.org/sp');
    assert.equal(sp.validUntil, Date.parse('2099-06-01T00:00:00Z'));
    assert.equal(sp.registrationAuthority, 'https://fed.example.org');
    assert.throws(() => spDescriptorOf(element, { now: Date.parse('2100-01-01T00:00:00Z') }), /expired/);
  });
});

describe('SP metadata refused', () => {
  it('refuses a document with no SPSSODescriptor (an IdP)', async () => {
    const idp =
      `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://idp.example.org/idp">` +
      `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
      `<md:SingleSignOnService Binding="${BINDINGS.REDIRECT}" Location="https://idp.example.org/sso"/></md:IDPSSODescriptor></md:EntityDescriptor>`;
    await refused(idp, /has no SPSSODescriptor for SAML 2\.0/);
  });

  it('refuses an SPSSODescriptor for SAML 1.1 only', async () => {
    await refused(minimalSp({ protocol: 'urn:oasis:names:tc:SAML:1.1:protocol' }), /no SPSSODescriptor for SAML 2\.0/);
  });

  it('refuses an SPSSODescriptor without an AssertionConsumerService', async () => {
    await refused(minimalSp({ acs: '' }), /publishes no AssertionConsumerService/);
  });

  it('refuses ACS locations that are not https, http on a loopback host aside', async () => {
    for (const location of [
      'http://sp.example.org/acs',
      'http://10.0.0.1/acs',
      'javascript:alert(1)',
      'ftp://sp.example.org/acs',
    ]) {
      await refused(minimalSp({ acs: acsElement(location, 0) }), /must use https/);
    }
    await refused(minimalSp({ acs: acsElement('/relative/acs', 0) }), /is not an absolute URL/);
    await refused(minimalSp({ acs: acsElement('https://user:pw@sp.example.org/acs', 0) }), /user name or password/);
    for (const location of ['http://localhost:8080/acs', 'http://127.0.0.1:9000/acs', 'http://[::1]:9000/acs']) {
      const sp = await parseSpMetadata(minimalSp({ acs: acsElement(location, 0) }));
      assert.equal(sp.assertionConsumerServices[0]!.location, location);
    }
  });

  it('refuses an http single logout location as well', async () => {
    const slo = `<md:SingleLogoutService Binding="${BINDINGS.REDIRECT}" Location="http://sp.example.org/slo"/>`;
    await refused(minimalSp({ keys: slo }), /SingleLogoutService location .* must use https/);
  });

  it('refuses two ACS with one index', async () => {
    const acs = acsElement('https://sp.example.org/acs1', 1) + acsElement('https://sp.example.org/acs2', 1);
    await refused(minimalSp({ acs }), /two AssertionConsumerServices have index 1/);
  });

  it('refuses metadata without an HTTP-POST ACS', async () => {
    await refused(
      minimalSp({ acs: acsElement('https://sp.example.org/acs', 0, BINDINGS.ARTIFACT) }),
      /no AssertionConsumerService with the HTTP-POST binding/,
    );
  });

  it('refuses expired metadata (validUntil in the past), and accepts it before then', async () => {
    const xml = minimalSp({ validUntil: '2026-01-01T00:00:00Z' });
    await refused(xml, /expired at 2026-01-01T00:00:00\.000Z/, Date.parse('2026-01-01T00:00:01Z'));
    const sp = await parseSpMetadata(xml, { now: Date.parse('2025-12-31T00:00:00Z') });
    assert.equal(sp.validUntil, Date.parse('2026-01-01T00:00:00Z'));
    await refused(minimalSp({ validUntil: '2001-01-01T00:00:00Z' }), /expired/);
  });

  it('refuses a certificate that cannot be read', async () => {
    await refused(
      minimalSp({ keys: keyDescriptor('bm90IGEgY2VydGlmaWNhdGU=', 'signing') }),
      /not a readable certificate/,
    );
  });

  it('refuses a certificate with an RSA key under 2048 bits or a non-RSA key', async () => {
    await refused(minimalSp({ keys: keyDescriptor(opensslCertificate(), 'signing') }), /RSA key of 2048 bits or more/);
    await refused(
      minimalSp({
        keys: keyDescriptor(opensslCertificate(['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']), 'encryption'),
      }),
      /RSA key of 2048 bits or more/,
    );
  });

  it('refuses a KeyDescriptor with no certificate (a key is never taken from anything else)', async () => {
    const bare = `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:KeyName>sp</ds:KeyName></ds:KeyInfo></md:KeyDescriptor>`;
    await refused(minimalSp({ keys: bare }), /holds no X509Certificate/);
  });

  it('refuses an aggregate, another root, a DTD and schema-invalid metadata', async () => {
    await refused(
      `<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${minimalSp()}</md:EntitiesDescriptor>`,
      /aggregate/,
    );
    await refused('<html><body/></html>', /not SAML metadata/);
    await refused(`<!DOCTYPE x [<!ENTITY a "b">]>${minimalSp()}`, /DTD/);
    // schema: an ACS without Binding
    await refused(
      minimalSp({
        acs:
          '<md:AssertionConsumerService Location="https://sp.example.org/acs" index="0" Binding="' +
          BINDINGS.POST +
          '" bogus="1"/>',
      }),
      /not valid against the SAML metadata schema/,
    );
  });

  it('refuses an SP that says it signs its requests but publishes no signing key', async () => {
    const signs = minimalSp().replace('<md:SPSSODescriptor ', '<md:SPSSODescriptor AuthnRequestsSigned="true" ');
    await refused(signs, /says AuthnRequestsSigned but publishes no signing certificate/);
    const encryptionOnly = minimalSp({ keys: keyDescriptor(keys.encryption, 'encryption') }).replace(
      '<md:SPSSODescriptor ',
      '<md:SPSSODescriptor AuthnRequestsSigned="true" ',
    );
    await refused(encryptionOnly, /publishes no signing certificate/);
    const withKey = minimalSp({ keys: keyDescriptor(keys.signing, 'signing') }).replace(
      '<md:SPSSODescriptor ',
      '<md:SPSSODescriptor AuthnRequestsSigned="true" ',
    );
    assert.equal((await parseSpMetadata(withKey)).authnRequestsSigned, true);
  });

  it('refuses a document over 1 MiB before parsing it', async () => {
    const huge = minimalSp().replace('<md:SPSSODescriptor', `${' '.repeat(1024 * 1024)}<md:SPSSODescriptor`);
    await refused(huge, /too large/);
  });

  it('refuses an entityID that is empty or too long', async () => {
    await refused(minimalSp({ entityId: '' }), /entityID must be/);
    await refused(minimalSp({ entityId: `https://sp.example.org/${'a'.repeat(1010)}` }), /entityID must be/);
  });
});
