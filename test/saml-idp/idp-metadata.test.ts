// The identity provider's metadata over real HTTP: schema-valid, signed with the metadata key (as
// xmlsec1 verifies it), carrying the endpoints, keys, scopes, branding and contacts, and showing
// two signing keys during a rollover.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { spawnSync } from 'node:child_process';
import sharp from 'sharp';
import { dialects, seedOrg, startTestApp, PUBLIC_URL, type TestContext } from '../helpers.ts';
import { childElements, parseXml, textOf, validateSchema, verifyEnvelopedSignature } from '../../src/saml/xml/index.ts';
import { MD } from '../../src/saml/metadata/index.ts';
import { rotateSamlKeys, samlKeys } from '../../src/service-providers/index.ts';
import { addFederation } from '../../src/service-providers/federations.ts';
import { party, withFiles, xmllintAvailable, xmlsec1 } from '../saml/saml-fixtures.ts';
import { metadataServer, PSEUDONYMOUS, RS, signedAggregate, spEntity } from '../saml/federation-fixtures.ts';

const ENTITY_ID = `${PUBLIC_URL}/saml2/idp/metadata`;
const PYSAML2_SCRIPT = join(import.meta.dirname, 'pysaml2-load-metadata.py');
const pysaml2 = spawnSync('/usr/bin/python3', ['-c', 'import saml2']).status === 0;

/** What pysaml2 read from the metadata after checking its signature with the certificate, or its error. */
function loadWithPysaml2(xml: string, certificate: string): { status: number; out: string; err: string } {
  return withFiles({ 'idp.xml': xml, 'cert.pem': certificate }, (d) => {
    const run = spawnSync('/usr/bin/python3', [PYSAML2_SCRIPT, join(d, 'idp.xml'), join(d, 'cert.pem')], {
      encoding: 'utf8',
    });
    return { status: run.status ?? -1, out: run.stdout, err: run.stderr };
  });
}
const POST = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST';
const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';

let dir: string;
let logoFile: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'idp-md-'));
  logoFile = join(dir, 'logo.png');
  await sharp({ create: { width: 120, height: 40, channels: 3, background: '#205080' } })
    .png()
    .toFile(logoFile);
});
after(() => rmSync(dir, { recursive: true, force: true }));

const all = (root: Element, ns: string, name: string): Element[] =>
  Array.from(root.getElementsByTagNameNS(ns, name) as unknown as ArrayLike<Element>);
type Element = import('../../src/saml/xml/index.ts').Element;

for (const dialect of dialects()) {
  describe(`IdP metadata (${dialect})`, () => {
    let ctx: TestContext;
    let url: string;
    const fetchMetadata = async () => {
      const res = await fetch(url);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/samlmetadata+xml');
      return res.text();
    };

    before(async () => {
      ctx = await startTestApp(
        dialect,
        {
          BRAND_NAME: 'Example <University> & Co',
          BRAND_LOGO_FILE: logoFile,
          BRAND_PRIVACY_URL: 'https://example.org/privacy',
          SAML_ORGANIZATION_NAME: 'Example University',
          SAML_ORGANIZATION_URL: 'https://example.org/',
          SAML_CONTACT_TECHNICAL: 'idp-admin@example.org',
        },
        { listen: 0 },
      );
      url = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}/saml2/idp/metadata`;
      await seedOrg(ctx, 1, 'uni.example', 'Example University');
      await seedOrg(ctx, 2, 'college.example', 'Example College');
    });
    after(async () => ctx.close());

    it('is schema-valid SAML metadata whose signature xmlsec1 verifies with the metadata certificate', async () => {
      const xml = await fetchMetadata();
      const parsed = parseXml(xml);
      await validateSchema(parsed, 'metadata');
      const set = await samlKeys(ctx.store, ctx.keys);
      const verified = verifyEnvelopedSignature(parsed, parsed.root, { keys: [set.metadata.certificate] });
      assert.equal(verified.signatureAlgorithm, 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256');
      withFiles({ 'md.xml': xml, 'cert.pem': set.metadata.certificate, 'wrong.pem': set.signing.certificate }, (d) => {
        const args = (cert: string, file = 'md.xml') => [
          '--verify',
          '--pubkey-cert-pem',
          cert,
          '--id-attr:ID',
          `${MD.md}:EntityDescriptor`,
          file,
        ];
        const ok = xmlsec1(d, args('cert.pem'));
        assert.equal(ok.status, 0, ok.stderr);
        assert.notEqual(xmlsec1(d, args('wrong.pem')).status, 0, 'another key does not verify it');
      });
      const tampered = xml.replace('uni.example<', 'evil.example<');
      assert.notEqual(tampered, xml);
      withFiles({ 'md.xml': tampered, 'cert.pem': set.metadata.certificate }, (d) => {
        const run = xmlsec1(d, [
          '--verify',
          '--pubkey-cert-pem',
          'cert.pem',
          '--id-attr:ID',
          `${MD.md}:EntityDescriptor`,
          'md.xml',
        ]);
        assert.notEqual(run.status, 0, 'a changed document does not verify');
      });
    });

    it(
      'xmllint finds it valid against the SAML metadata schema',
      { skip: !xmllintAvailable() && 'xmllint is not installed' },
      async () => {
        const xml = await fetchMetadata();
        const schema = join(import.meta.dirname, '../../src/saml/xml/schemas/saml-schema-metadata-2.0.xsd');
        withFiles(
          { 'md.xml': xml, 'bad.xml': xml.replace('<md:SingleSignOnService ', '<md:SingleSignOnService Bogus="1" ') },
          (d) => {
            const run = (file: string) =>
              spawnSync('xmllint', ['--noout', '--nonet', '--schema', schema, join(d, file)], { encoding: 'utf8' });
            const ok = run('md.xml');
            assert.equal(ok.status, 0, ok.stderr);
            assert.notEqual(run('bad.xml').status, 0, 'xmllint refuses what the schema does not allow');
          },
        );
      },
    );

    it('names the entity, its endpoints, NameID formats, keys, scopes, branding, organization and contact', async () => {
      const { root } = parseXml(await fetchMetadata());
      assert.equal(root.getAttribute('entityID'), ENTITY_ID);
      const validUntil = Date.parse(root.getAttribute('validUntil')!);
      assert.ok(Math.abs(validUntil - (Date.now() + 7 * 24 * 3600_000)) < 120_000);
      assert.equal(root.getAttribute('cacheDuration'), 'PT21600S');
      const [idp] = childElements(root, MD.md, 'IDPSSODescriptor');
      assert.equal(idp!.getAttribute('protocolSupportEnumeration'), 'urn:oasis:names:tc:SAML:2.0:protocol');
      const endpoints = (name: string) =>
        childElements(idp!, MD.md, name).map((e) => [e.getAttribute('Binding'), e.getAttribute('Location')]);
      assert.deepEqual(endpoints('SingleSignOnService'), [
        [REDIRECT, `${PUBLIC_URL}/saml2/idp/sso`],
        [POST, `${PUBLIC_URL}/saml2/idp/sso`],
      ]);
      assert.deepEqual(endpoints('SingleLogoutService'), [
        [REDIRECT, `${PUBLIC_URL}/saml2/idp/slo`],
        [POST, `${PUBLIC_URL}/saml2/idp/slo`],
      ]);
      assert.deepEqual(childElements(idp!, MD.md, 'NameIDFormat').map(textOf), [
        'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
        'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
        'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
        'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
      ]);
      const keyUses = childElements(idp!, MD.md, 'KeyDescriptor').map((k) => k.getAttribute('use'));
      assert.deepEqual(keyUses, ['signing', 'encryption']);
      const set = await samlKeys(ctx.store, ctx.keys);
      const certificates = all(idp!, MD.ds, 'X509Certificate').map((e) => textOf(e));
      const body = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, '');
      assert.deepEqual(certificates, [body(set.signing.certificate), body(set.encryption[0]!.certificate)]);
      assert.ok(!certificates.includes(body(set.metadata.certificate)), 'the metadata key signs, it is not a role key');

      assert.deepEqual(
        all(idp!, MD.shibmd, 'Scope').map((s) => [textOf(s), s.getAttribute('regexp')]),
        [
          ['college.example', 'false'],
          ['uni.example', 'false'],
        ],
      );
      const [name] = all(idp!, MD.mdui, 'DisplayName');
      assert.equal(textOf(name!), 'Example <University> & Co', 'text, never markup');
      const [logo] = all(idp!, MD.mdui, 'Logo');
      assert.match(textOf(logo!), /^https:\/\/idp\.example\.test\/brand\/site\/logo\?v=/);
      assert.deepEqual([logo!.getAttribute('width'), logo!.getAttribute('height')], ['120', '40']);
      assert.equal(textOf(all(idp!, MD.mdui, 'PrivacyStatementURL')[0]!), 'https://example.org/privacy');
      assert.deepEqual(
        childElements(idp!, MD.saml, 'Attribute').map((a) => a.getAttribute('Name')),
        ['urn:oasis:names:tc:SAML:attribute:subject-id', 'urn:oasis:names:tc:SAML:attribute:pairwise-id'],
      );
      const [org] = childElements(root, MD.md, 'Organization');
      assert.equal(textOf(childElements(org!, MD.md, 'OrganizationURL')[0]!), 'https://example.org/');
      const [contact] = childElements(root, MD.md, 'ContactPerson');
      assert.equal(contact!.getAttribute('contactType'), 'technical');
      assert.equal(textOf(childElements(contact!, MD.md, 'EmailAddress')[0]!), 'mailto:idp-admin@example.org');
    });

    it(
      'pysaml2 loads it as a service provider does, checking its signature',
      { skip: !pysaml2 && 'python3-pysaml2 is not installed' },
      async () => {
        const xml = await fetchMetadata();
        const set = await samlKeys(ctx.store, ctx.keys);
        const loaded = loadWithPysaml2(xml, set.metadata.certificate);
        assert.equal(loaded.status, 0, loaded.err);
        assert.deepEqual(JSON.parse(loaded.out), {
          entity_id: ENTITY_ID,
          sso_redirect: [`${PUBLIC_URL}/saml2/idp/sso`],
          sso_post: [`${PUBLIC_URL}/saml2/idp/sso`],
          slo_redirect: [`${PUBLIC_URL}/saml2/idp/slo`],
          signing_certificates: 1,
          encryption_certificates: 1,
        });
        const changed = loadWithPysaml2(xml.replace('>uni.example<', '>evil.example<'), set.metadata.certificate);
        assert.notEqual(changed.status, 0);
        assert.match(changed.err, /SignatureError/);
        const otherKey = loadWithPysaml2(xml, set.signing.certificate);
        assert.notEqual(otherKey.status, 0, 'only the metadata key verifies it');
      },
    );

    it('is kept in memory, and rebuilt when an organization is added', async () => {
      const first = await fetchMetadata();
      assert.equal(await fetchMetadata(), first, 'the same signed document');
      await seedOrg(ctx, 3, 'school.example', 'Example School');
      const next = await fetchMetadata();
      assert.notEqual(next, first);
      assert.ok(next.includes('>school.example</shibmd:Scope>'));
    });

    it('advertises entity-category support for the categories released for a trusted federation, schema-valid', async () => {
      const support = (xml: string) =>
        all(parseXml(xml).root, MD.saml, 'Attribute')
          .filter((a) => a.getAttribute('Name') === 'http://macedir.org/entity-category-support')
          .flatMap((a) => childElements(a, MD.saml, 'AttributeValue').map(textOf));
      assert.deepEqual(support(await fetchMetadata()), [], 'no federation releases a category: none is claimed');
      const federation = await party('federation.example.org');
      const server = await metadataServer();
      try {
        server.documents.set(
          '/fed.xml',
          signedAggregate(federation, { entities: [spEntity({ entityId: 'https://wiki.example.edu/sp' })] }),
        );
        const settings = {
          fetch: { development: true },
          maxAggregateBytes: 1024 * 1024,
          timeoutMs: 10_000,
          isolateAboveBytes: 1024 * 1024,
        };
        await addFederation(ctx.store, settings, {
          url: `${server.url}/fed.xml`,
          certificate: federation.certificate,
          releases: ['pseudonymous', 'research-and-scholarship'],
        });
      } finally {
        await server.close();
      }
      const xml = await fetchMetadata();
      const { root } = parseXml(xml);
      const [attributes] = childElements(childElements(root, MD.md, 'Extensions')[0]!, MD.mdattr, 'EntityAttributes');
      assert.ok(attributes, 'md:Extensions/mdattr:EntityAttributes on the EntityDescriptor');
      assert.deepEqual(support(xml), [RS, PSEUDONYMOUS]);
      await validateSchema(parseXml(xml), 'metadata');
      const set = await samlKeys(ctx.store, ctx.keys);
      verifyEnvelopedSignature(parseXml(xml), parseXml(xml).root, { keys: [set.metadata.certificate] });
      if (xmllintAvailable()) {
        const schema = join(import.meta.dirname, '../../src/saml/xml/schemas/saml-schema-metadata-2.0.xsd');
        withFiles({ 'md.xml': xml }, (d) => {
          const run = spawnSync('xmllint', ['--noout', '--nonet', '--schema', schema, join(d, 'md.xml')], {
            encoding: 'utf8',
          });
          assert.equal(run.status, 0, run.stderr);
        });
      }
    });

    it('publishes a rotated signing key at once beside the current one', async () => {
      const before = await samlKeys(ctx.store, ctx.keys);
      const [added] = await rotateSamlKeys(ctx.store, ctx.keys, ['signing']);
      const xml = await fetchMetadata();
      const parsed = parseXml(xml);
      await validateSchema(parsed, 'metadata');
      const [idp] = childElements(parsed.root, MD.md, 'IDPSSODescriptor');
      const signing = childElements(idp!, MD.md, 'KeyDescriptor').filter((k) => k.getAttribute('use') === 'signing');
      assert.equal(signing.length, 2);
      const published = signing.map((k) => textOf(all(k, MD.ds, 'X509Certificate')[0]!));
      const after = await samlKeys(ctx.store, ctx.keys);
      const body = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, '');
      assert.deepEqual(published.sort(), after.published.map((k) => body(k.certificate)).sort());
      assert.ok(published.includes(body(before.signing.certificate)));
      assert.ok(after.published.some((k) => k.kid === added!.kid));
      assert.equal(after.signing.kid, before.signing.kid, 'the old key signs until the new one activates');
    });
  });

  describe(`IdP metadata over time (${dialect})`, () => {
    let ctx: TestContext;
    let clock = Date.now();
    before(async () => (ctx = await startTestApp(dialect, {}, { now: () => clock })));
    after(async () => ctx.close());
    const get = async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/saml2/idp/metadata' });
      assert.equal(res.statusCode, 200);
      return res.body;
    };

    it('is built again once a cache duration has passed, so validUntil stays most of a week away', async () => {
      const first = await get();
      clock += 5 * 3600_000;
      assert.equal(await get(), first, 'kept within the cache duration');
      clock += 3600_000 + 1000;
      const next = await get();
      assert.notEqual(next, first);
      const until = (xml: string) => Date.parse(parseXml(xml).root.getAttribute('validUntil')!);
      assert.equal(until(next) - until(first), 6 * 3600_000 + 1000);
      assert.ok(until(next) - clock >= 7 * 24 * 3600_000 - 1000);
    });
  });
}
