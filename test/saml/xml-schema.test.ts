// The schema gate (libxml2 through libxml2-wasm), cross-checked with Debian's xmllint, and the
// self-signed certificates of published keys.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import {
  createSelfSignedCertificate,
  parseXml,
  readCertificate,
  signEnveloped,
  validateSchema,
  XmlSecurityError,
} from '../../src/saml/xml/index.ts';
import { assertion, authnRequest, party, response, withFiles, type Party } from './saml-fixtures.ts';
import { spawnSync } from 'node:child_process';

const SCHEMAS = join(import.meta.dirname, '../../src/saml/xml/schemas');

let idp: Party;
before(async () => {
  idp = await party('idp.example.org');
});

function metadata(extensions = ''): string {
  return (
    `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:mdui="urn:oasis:names:tc:SAML:metadata:ui" ` +
    `xmlns:shibmd="urn:mace:shibboleth:metadata:1.0" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" ` +
    `entityID="https://idp.example.org/saml2/idp/metadata" validUntil="2030-01-01T00:00:00Z" ID="_md1">` +
    `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `<md:Extensions><shibmd:Scope regexp="false">uni.example</shibmd:Scope>` +
    `<mdui:UIInfo><mdui:DisplayName xml:lang="en">Example University</mdui:DisplayName>${extensions}</mdui:UIInfo></md:Extensions>` +
    `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${readCertificate(idp.certificate).base64}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
    `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.org/saml2/idp/sso"/>` +
    `</md:IDPSSODescriptor></md:EntityDescriptor>`
  );
}

async function invalid(xml: string, kind: 'protocol' | 'metadata'): Promise<XmlSecurityError> {
  let caught: unknown;
  try {
    await validateSchema(parseXml(xml), kind);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof XmlSecurityError, `expected a refusal, got ${String(caught)}`);
  assert.equal(caught.reason, 'schema-invalid');
  return caught;
}

/** Debian's xmllint, validating against the same files: the independent opinion. */
function xmllint(xml: string, schema: string): number {
  return withFiles({ 'doc.xml': xml }, (dir) => {
    const run = spawnSync('xmllint', ['--noout', '--nonet', '--schema', join(SCHEMAS, schema), join(dir, 'doc.xml')], {
      encoding: 'utf8',
    });
    return run.status ?? -1;
  });
}

describe('schema validation', () => {
  it('accepts valid requests, signed responses and metadata, as xmllint does', async () => {
    const signedRequest = signEnveloped(parseXml(authnRequest()).document, '_req1', {
      privateKey: idp.privateKey,
      certificate: idp.certificate,
    });
    const signedResponse = signEnveloped(parseXml(response('_r', assertion('_a'))).document, '_a', {
      privateKey: idp.privateKey,
      certificate: idp.certificate,
    });
    for (const xml of [authnRequest(), signedRequest, signedResponse]) {
      await validateSchema(parseXml(xml), 'protocol');
      assert.equal(xmllint(xml, 'saml-schema-protocol-2.0.xsd'), 0);
    }
    await validateSchema(parseXml(metadata()), 'metadata');
    assert.equal(xmllint(metadata(), 'saml-schema-metadata-2.0.xsd'), 0);
  });

  it('refuses what the SAML schemas do not allow, as xmllint does', async () => {
    const cases = [
      authnRequest().replace('Version="2.0" ', ''),
      authnRequest().replace('IssueInstant="2026-01-01T00:00:00Z"', 'IssueInstant="yesterday"'),
      authnRequest().replace('<saml:Issuer>', '<saml:Bogus/><saml:Issuer>'),
      authnRequest().replace('AllowCreate="true"', 'AllowCreate="maybe"'),
      response('_r', assertion('_a'))
        .replace('<samlp:Status>', '<samlp:Extensions/><samlp:Status>')
        .replace('<samlp:Extensions/>', '<samlp:Extensions></samlp:Extensions>'),
    ];
    for (const xml of cases) {
      const err = await invalid(xml, 'protocol');
      assert.ok(err.detail && err.detail.length > 0);
      assert.notEqual(xmllint(xml, 'saml-schema-protocol-2.0.xsd'), 0, xml);
    }
  });

  it('validates known metadata extensions (mdui) and refuses a message of the other kind', async () => {
    await invalid(
      metadata('<mdui:Logo height="16" width="16">not a URL but fine</mdui:Logo><mdui:Bogus/>'),
      'metadata',
    );
    await invalid(metadata(), 'protocol');
    await invalid(authnRequest(), 'metadata');
  });

  it('validates a typical AuthnRequest in well under a millisecond once compiled', async () => {
    const parsed = parseXml(authnRequest());
    await validateSchema(parsed, 'protocol');
    const started = performance.now();
    for (let i = 0; i < 200; i++) await validateSchema(parsed, 'protocol');
    const each = (performance.now() - started) / 200;
    assert.ok(each < 5, `${each} ms per validation`);
  });
});

describe('self-signed certificates', () => {
  it('makes an RSA-SHA256 certificate for the key, valid for the given days, that openssl agrees with', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 3072 });
    const now = new Date('2026-01-01T00:00:00Z');
    const pem = await createSelfSignedCertificate({ privateKey, commonName: 'idp.example.org', validDays: 365, now });
    const certificate = new X509Certificate(pem);
    assert.ok(certificate.verify(publicKey), 'self-signed by the key');
    assert.ok(certificate.checkIssued(certificate));
    assert.equal(certificate.subject, 'CN=idp.example.org');
    const facts = readCertificate(pem);
    assert.equal(facts.notAfter.toISOString(), '2027-01-01T00:00:00.000Z');
    assert.ok(facts.publicKey.equals(publicKey));
    assert.equal(facts.sha256Fingerprint, certificate.fingerprint256.replace(/:/g, '').toLowerCase());
    const text = spawnSync('openssl', ['x509', '-noout', '-text'], { input: pem, encoding: 'utf8' });
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, /sha256WithRSAEncryption/);
    assert.match(text.stdout, /Public-Key: \(3072 bit\)/);
  });

  it('refuses keys under 2048 bits and keys that are not RSA', async () => {
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey;
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    await assert.rejects(createSelfSignedCertificate({ privateKey: small, commonName: 'x' }));
    await assert.rejects(createSelfSignedCertificate({ privateKey: ec, commonName: 'x' }));
  });
});
