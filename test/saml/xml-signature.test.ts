// Enveloped signatures: interoperability with xmlsec1 both ways, the XML Signature Wrapping shapes
// from the published attack lists, algorithm allow-lists and keys only from the caller.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { SignedXml } from 'xml-crypto';
import {
  DIGEST,
  NS,
  parseXml,
  serialize,
  signElementInPool,
  signEnveloped,
  SIGNATURE,
  textOf,
  TRANSFORM,
  verifyEnvelopedSignature,
  XmlSecurityError,
  type Element,
  type XmlRefusal,
} from '../../src/saml/xml/index.ts';
import {
  ASSERTION,
  assertion,
  authnRequest,
  party,
  PROTOCOL,
  readIn,
  response,
  withFiles,
  xmlsec1,
  type Party,
} from './saml-fixtures.ts';

let sp: Party;
let attacker: Party;

before(async () => {
  [sp, attacker] = await Promise.all([party('sp.example.org'), party('attacker.example')]);
});

function sign(xml: string, id: string, signer: Party = sp): string {
  return signEnveloped(parseXml(xml).document, id, { privateKey: signer.privateKey, certificate: signer.certificate });
}

function verifyRoot(xml: string, options: { allowSha1?: boolean; keys?: string[] } = {}) {
  const parsed = parseXml(xml);
  return verifyEnvelopedSignature(parsed, parsed.root, {
    keys: options.keys ?? [sp.certificate],
    allowSha1: options.allowSha1,
  });
}

async function refusedWith(reason: XmlRefusal | XmlRefusal[], run: () => unknown): Promise<void> {
  const reasons = Array.isArray(reason) ? reason : [reason];
  await assert.rejects(
    async () => run(),
    (err: unknown) => {
      assert.ok(err instanceof XmlSecurityError, `expected XmlSecurityError, got ${String(err)}`);
      assert.ok(reasons.includes(err.reason), `${err.reason}: ${err.message}`);
      return true;
    },
  );
}

const first = (root: Element, ns: string, name: string) => root.getElementsByTagNameNS(ns, name)[0]!;

/** A signature made by xml-crypto directly, to build shapes signEnveloped never makes. */
function rawSignature(
  xml: string,
  references: Array<{ xpath: string; transforms?: string[]; digest?: string }>,
  options: { signatureAlgorithm?: string; location?: string; c14n?: string } = {},
): string {
  const signed = new SignedXml({
    privateKey: sp.privateKey,
    publicCert: sp.certificate,
    signatureAlgorithm: options.signatureAlgorithm ?? SIGNATURE.rsaSha256,
    canonicalizationAlgorithm: options.c14n ?? TRANSFORM.excC14n,
  });
  for (const r of references) {
    signed.addReference({
      xpath: r.xpath,
      transforms: r.transforms ?? [TRANSFORM.enveloped, TRANSFORM.excC14n],
      digestAlgorithm: r.digest ?? DIGEST.sha256,
    });
  }
  signed.computeSignature(xml, {
    prefix: 'ds',
    location: { reference: options.location ?? "/*/*[local-name()='Issuer']", action: 'after' },
  });
  return signed.getSignedXml();
}

describe('signing and verifying', () => {
  it('signs after the Issuer and verifies, handing back the signed element', () => {
    const signed = sign(authnRequest(), '_req1');
    const root = parseXml(signed).root;
    const children = Array.from({ length: root.childNodes.length }, (_, i) => root.childNodes.item(i) as Element);
    assert.deepEqual(
      children.map((c) => c.localName),
      ['Issuer', 'Signature', 'NameIDPolicy'],
    );
    const verified = verifyRoot(signed);
    assert.equal(verified.element.localName, 'AuthnRequest');
    assert.equal(verified.element.getAttribute('ID'), '_req1');
    assert.equal(verified.signatureAlgorithm, SIGNATURE.rsaSha256);
    assert.equal(verified.element.getElementsByTagNameNS(NS.dsig, 'Signature').length, 0);
    assert.equal(textOf(first(verified.element, ASSERTION, 'Issuer')), 'https://sp.example.org/shibboleth');
  });

  it('refuses any change to the signed content', async () => {
    const signed = sign(authnRequest(), '_req1');
    await refusedWith('signature-invalid', () =>
      verifyRoot(signed.replace('sp.example.org/shibboleth', 'evil.example/x')),
    );
    await refusedWith('signature-invalid', () =>
      verifyRoot(signed.replace('AllowCreate="true"', 'AllowCreate="false"')),
    );
  });

  it('verifies with any of several keys (a rollover) and says which', async () => {
    const signed = sign(authnRequest(), '_req1');
    assert.equal(verifyRoot(signed, { keys: [attacker.certificate, sp.certificate] }).keyIndex, 1);
    await refusedWith('signature-invalid', () => verifyRoot(signed, { keys: [attacker.certificate] }));
  });

  it('signs an assertion inside a response, and then the response, both verifying', () => {
    const once = sign(response('_resp1', assertion('_as1')), '_as1', sp);
    const twice = sign(once, '_resp1', sp);
    const parsed = parseXml(twice);
    const inner = first(parsed.root, ASSERTION, 'Assertion');
    const a = verifyEnvelopedSignature(parsed, inner, { keys: [sp.certificate] });
    assert.equal(a.element.localName, 'Assertion');
    assert.equal(textOf(first(a.element, ASSERTION, 'NameID')), 'admin@evil.com');
    const r = verifyEnvelopedSignature(parsed, parsed.root, { keys: [sp.certificate] });
    assert.equal(r.element.localName, 'Response');
  });
});

describe('the signer against xml-crypto', () => {
  it('makes the digest and signature value xml-crypto makes for the same element, awkward content and all', () => {
    // attribute values and text that canonicalization escapes, a prefixed attribute (xsi:type), an
    // element in a default namespace, a QName in content whose prefix only the root declares
    const xml =
      `<samlp:Response xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" xmlns:xs="http://www.w3.org/2001/XMLSchema" ID="_r1" Version="2.0" IssueInstant="2026-01-01T00:00:00Z" Destination="https://sp.example.org/acs?a=1&amp;b=&quot;2&quot;">` +
      `<saml:Issuer>https://idp.example.org/</saml:Issuer>` +
      `<saml:Assertion ID="_a1" Version="2.0" IssueInstant="2026-01-01T00:00:00Z"><saml:Issuer>https://idp.example.org/</saml:Issuer>` +
      `<saml:AttributeStatement><saml:Attribute Name="urn:oid:2.16.840.1.113730.3.1.241" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri">` +
      `<saml:AttributeValue xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="xs:string">Ada &amp; &lt;Lovelace&gt; "tab\there" &#xD;</saml:AttributeValue>` +
      `</saml:Attribute></saml:AttributeStatement><Extra xmlns="urn:example:other" b="2" a="1">x</Extra></saml:Assertion></samlp:Response>`;
    const ours = parseXml(sign(xml, '_a1')).document;
    const theirs = parseXml(
      rawSignature(xml, [{ xpath: "//*[@ID='_a1']" }], { location: "//*[@ID='_a1']/*[local-name()='Issuer']" }),
    ).document;
    for (const name of ['DigestValue', 'SignatureValue']) {
      const value = (d: typeof ours) => textOf(d.getElementsByTagNameNS(NS.dsig, name)[0]!);
      assert.equal(value(ours), value(theirs), name);
    }
    // and it verifies, with the escaped content intact
    const verified = verifyEnvelopedSignature(
      { xml: serialize(ours), document: ours, root: ours.documentElement! },
      first(ours.documentElement!, ASSERTION, 'Assertion'),
      { keys: [sp.certificate] },
    );
    assert.match(serialize(verified.element), /Ada &amp; &lt;Lovelace&gt;/);
  });

  it('makes the same signature on the thread pool as on the event loop', async () => {
    const xml = response('_r2', assertion('_a2'));
    const inPool = parseXml(xml).document;
    await signElementInPool(inPool, '_a2', { privateKey: sp.privateKey, certificate: sp.certificate });
    // RSA PKCS#1 v1.5 signatures are deterministic: the same key and SignedInfo give the same value
    assert.equal(serialize(inPool), sign(xml, '_a2'));
    const parsed = parseXml(serialize(inPool));
    const verified = verifyEnvelopedSignature(parsed, first(parsed.root, ASSERTION, 'Assertion'), {
      keys: [sp.certificate],
    });
    assert.equal(verified.element.getAttribute('ID'), '_a2');
  });

  it('refuses to sign an element that carries a signature already', () => {
    const once = parseXml(sign(authnRequest(), '_req1')).document;
    assert.throws(
      () => signEnveloped(once, '_req1', { privateKey: sp.privateKey, certificate: sp.certificate }),
      /signed already/,
    );
  });
});

describe('interoperability with xmlsec1', () => {
  it('xmlsec1 --verify accepts what signEnveloped signs (request, and an assertion in a response)', () => {
    const signedRequest = sign(authnRequest(), '_req1');
    const signedAssertion = sign(response('_resp1', assertion('_as1')), '_as1');
    const tampered = signedRequest.replace('AllowCreate="true"', 'AllowCreate="false"');
    const files = {
      'cert.pem': sp.certificate,
      'req.xml': signedRequest,
      'resp.xml': signedAssertion,
      'bad.xml': tampered,
    };
    withFiles(files, (dir) => {
      const req = xmlsec1(dir, [
        '--verify',
        '--pubkey-cert-pem',
        'cert.pem',
        '--id-attr:ID',
        `${PROTOCOL}:AuthnRequest`,
        'req.xml',
      ]);
      assert.equal(req.status, 0, req.stderr);
      const resp = xmlsec1(dir, [
        '--verify',
        '--pubkey-cert-pem',
        'cert.pem',
        '--id-attr:ID',
        `${ASSERTION}:Assertion`,
        'resp.xml',
      ]);
      assert.equal(resp.status, 0, resp.stderr);
      // and refuses a tampered copy, so the check above is a real one
      const bad = xmlsec1(dir, [
        '--verify',
        '--pubkey-cert-pem',
        'cert.pem',
        '--id-attr:ID',
        `${PROTOCOL}:AuthnRequest`,
        'bad.xml',
      ]);
      assert.notEqual(bad.status, 0);
    });
  });

  it('verifies what xmlsec1 --sign signs from a template', () => {
    const template = authnRequest().replace(
      '</saml:Issuer>',
      '</saml:Issuer><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo>' +
        `<ds:CanonicalizationMethod Algorithm="${TRANSFORM.excC14n}"/><ds:SignatureMethod Algorithm="${SIGNATURE.rsaSha256}"/>` +
        `<ds:Reference URI="#_req1"><ds:Transforms><ds:Transform Algorithm="${TRANSFORM.enveloped}"/>` +
        `<ds:Transform Algorithm="${TRANSFORM.excC14n}"/></ds:Transforms><ds:DigestMethod Algorithm="${DIGEST.sha256}"/>` +
        '<ds:DigestValue/></ds:Reference></ds:SignedInfo><ds:SignatureValue/>' +
        '<ds:KeyInfo><ds:X509Data/></ds:KeyInfo></ds:Signature>',
    );
    const signed = withFiles(
      { 'key.pem': sp.privateKeyPem, 'cert.pem': sp.certificate, 'tmpl.xml': template },
      (dir) => {
        const run = xmlsec1(dir, [
          '--sign',
          '--privkey-pem',
          'key.pem,cert.pem',
          '--id-attr:ID',
          `${PROTOCOL}:AuthnRequest`,
          '--output',
          'out.xml',
          'tmpl.xml',
        ]);
        assert.equal(run.status, 0, run.stderr);
        return readIn(dir, 'out.xml');
      },
    );
    assert.match(signed, /<ds:X509Certificate>/);
    const verified = verifyRoot(signed);
    assert.equal(verified.element.getAttribute('ID'), '_req1');
    assert.throws(() => verifyRoot(signed, { keys: [attacker.certificate] }));
  });
});

describe('XML Signature Wrapping', () => {
  it('refuses an unsigned root wrapping the signed original (signature moved down with it)', async () => {
    const signed = sign(authnRequest(), '_req1');
    const inner = signed.replace(/^<samlp:AuthnRequest /, '<samlp:AuthnRequest ');
    const evil = authnRequest('_evil', 'https://evil.example').replace(
      '</saml:Issuer>',
      `</saml:Issuer><samlp:Extensions>${inner}</samlp:Extensions>`,
    );
    await refusedWith('signature-missing', () => verifyRoot(evil));
  });

  it('refuses the signature moved up to an evil root, still pointing at the original in Extensions', async () => {
    const signed = parseXml(sign(authnRequest(), '_req1'));
    const signature = first(signed.root, NS.dsig, 'Signature');
    signed.root.removeChild(signature);
    const evil = parseXml(authnRequest('_evil', 'https://evil.example'));
    const extensions = evil.document.createElementNS(PROTOCOL, 'samlp:Extensions');
    extensions.appendChild(evil.document.importNode(signed.root, true));
    const issuer = first(evil.root, ASSERTION, 'Issuer');
    evil.root.insertBefore(extensions, issuer.nextSibling);
    evil.root.insertBefore(evil.document.importNode(signature, true), issuer.nextSibling);
    await refusedWith('signature-shape', () => verifyRoot(serialize(evil.document)));
  });

  it('refuses a copy of the signed element under an evil root that takes its ID (duplicate IDs)', async () => {
    const signed = parseXml(sign(authnRequest(), '_req1'));
    const signature = first(signed.root, NS.dsig, 'Signature');
    const evil = parseXml(authnRequest('_req1', 'https://evil.example'));
    const extensions = evil.document.createElementNS(PROTOCOL, 'samlp:Extensions');
    extensions.appendChild(evil.document.importNode(signed.root, true));
    const issuer = first(evil.root, ASSERTION, 'Issuer');
    evil.root.insertBefore(extensions, issuer.nextSibling);
    evil.root.insertBefore(evil.document.importNode(signature, true), issuer.nextSibling);
    await refusedWith('signature-shape', () => verifyRoot(serialize(evil.document)));
  });

  it('refuses duplicate IDs anywhere in the document, even outside what is signed', async () => {
    const signed = sign(response('_resp1', assertion('_as1')), '_as1');
    const dup = signed.replace(
      '<samlp:Status>',
      '<samlp:Extensions><x ID="_dup" xmlns="urn:x"/><y Id="_dup" xmlns="urn:x"/></samlp:Extensions><samlp:Status>',
    );
    const parsed = parseXml(dup);
    await refusedWith('signature-shape', () =>
      verifyEnvelopedSignature(parsed, first(parsed.root, ASSERTION, 'Assertion'), { keys: [sp.certificate] }),
    );
    assert.throws(() =>
      sign(
        authnRequest().replace(
          '<samlp:NameIDPolicy',
          '<samlp:Extensions><x ID="_req1" xmlns="urn:x"/></samlp:Extensions><samlp:NameIDPolicy',
        ),
        '_req1',
      ),
    );
  });

  it('refuses an evil assertion added in Extensions after signing', async () => {
    const signed = sign(authnRequest(), '_req1');
    const evil = signed.replace(
      '<samlp:NameIDPolicy',
      `<samlp:Extensions>${assertion('_evil')}</samlp:Extensions><samlp:NameIDPolicy`,
    );
    await refusedWith('signature-invalid', () => verifyRoot(evil));
  });

  it('refuses an evil assertion hidden in a ds:Object of the signature (which the digest does not cover)', async () => {
    const signed = sign(authnRequest(), '_req1');
    const evil = signed.replace('</ds:Signature>', `<ds:Object>${assertion('_evil')}</ds:Object></ds:Signature>`);
    await refusedWith('signature-shape', () => verifyRoot(evil));
  });

  it('refuses a signature whose reference is a child, not the root', async () => {
    const xml = authnRequest().replace(
      '<samlp:NameIDPolicy',
      `<samlp:Extensions><x:Thing xmlns:x="urn:x" ID="_child">signed</x:Thing></samlp:Extensions><samlp:NameIDPolicy`,
    );
    const signed = rawSignature(xml, [{ xpath: "//*[@ID='_child']" }]);
    await refusedWith('signature-shape', () => verifyRoot(signed));
  });

  it('refuses two references, even when both verify', async () => {
    const xml = authnRequest().replace(
      '<samlp:NameIDPolicy',
      `<samlp:Extensions><x:Thing xmlns:x="urn:x" ID="_child">signed</x:Thing></samlp:Extensions><samlp:NameIDPolicy`,
    );
    const signed = rawSignature(xml, [{ xpath: "//*[@ID='_req1']" }, { xpath: "//*[@ID='_child']" }]);
    await refusedWith('signature-shape', () => verifyRoot(signed));
  });

  it('refuses two signatures on one element', async () => {
    const signed = sign(authnRequest(), '_req1');
    const sig = /<ds:Signature[\s\S]*<\/ds:Signature>/.exec(signed)![0];
    await refusedWith('signature-shape', () => verifyRoot(signed.replace(sig, sig + sig)));
  });

  it('a comment inserted into a signed value leaves the signature valid and the value whole', () => {
    // The attack: the signed NameID admin@evil.com.attacker.example is cut at a comment by parsers
    // that read the first text node. Here the value reads in full, from the verified element too.
    const signed = sign(response('_resp1', assertion('_as1', 'admin@evil.com.attacker.example')), '_as1');
    const tampered = signed.replace('admin@evil.com.attacker.example', 'admin@evil.com<!---->.attacker.example');
    const parsed = parseXml(tampered);
    const verified = verifyEnvelopedSignature(parsed, first(parsed.root, ASSERTION, 'Assertion'), {
      keys: [sp.certificate],
    });
    assert.equal(textOf(first(verified.element, ASSERTION, 'NameID')), 'admin@evil.com.attacker.example');
    assert.equal(first(parsed.root, ASSERTION, 'NameID').firstChild!.nodeValue, 'admin@evil.com.attacker.example');
  });

  it('a signature over exc-c14n#WithComments: changed comments neither break nor change anything', () => {
    const xml = authnRequest().replace(
      'https://sp.example.org/shibboleth',
      'https://sp.example.org/<!--a-->shibboleth',
    );
    const signed = rawSignature(xml, [
      { xpath: "//*[@ID='_req1']", transforms: [TRANSFORM.enveloped, TRANSFORM.excC14nWithComments] },
    ]);
    const changed = signed.replace('<!--a-->', '<!--b--><!--c-->');
    const verified = verifyRoot(changed);
    assert.equal(textOf(first(verified.element, ASSERTION, 'Issuer')), 'https://sp.example.org/shibboleth');
  });

  it('refuses a document re-signed by an attacker who puts their certificate in KeyInfo', async () => {
    const evil = sign(authnRequest('_req1', 'https://evil.example'), '_req1', attacker);
    assert.match(evil, /X509Certificate/);
    await refusedWith('signature-invalid', () => verifyRoot(evil));
  });

  it('refuses a signature that is not a direct child of the verified element', async () => {
    const signed = sign(authnRequest(), '_req1');
    const sig = /<ds:Signature[\s\S]*<\/ds:Signature>/.exec(signed)![0];
    const moved = signed
      .replace(sig, '')
      .replace('<samlp:NameIDPolicy', `<samlp:Extensions>${sig}</samlp:Extensions><samlp:NameIDPolicy`);
    await refusedWith('signature-missing', () => verifyRoot(moved));
  });
});

describe('algorithm allow-lists', () => {
  it('accepts RSA-SHA384 and RSA-SHA512 with SHA-384/512 digests', () => {
    for (const [signatureAlgorithm, digestAlgorithm] of [
      [SIGNATURE.rsaSha384, DIGEST.sha384],
      [SIGNATURE.rsaSha512, DIGEST.sha512],
    ] as const) {
      const signed = signEnveloped(parseXml(authnRequest()).document, '_req1', {
        privateKey: sp.privateKey,
        certificate: sp.certificate,
        signatureAlgorithm,
        digestAlgorithm,
      });
      assert.equal(verifyRoot(signed).signatureAlgorithm, signatureAlgorithm);
    }
  });

  it('refuses RSA-SHA1 and SHA-1 digests unless the caller allows SHA-1', async () => {
    const sha1 = rawSignature(authnRequest(), [{ xpath: "//*[@ID='_req1']", digest: DIGEST.sha1 }], {
      signatureAlgorithm: SIGNATURE.rsaSha1,
    });
    await refusedWith('signature-algorithm', () => verifyRoot(sha1));
    assert.equal(verifyRoot(sha1, { allowSha1: true }).signatureAlgorithm, SIGNATURE.rsaSha1);
    const sha1Digest = rawSignature(authnRequest(), [{ xpath: "//*[@ID='_req1']", digest: DIGEST.sha1 }]);
    await refusedWith('signature-algorithm', () => verifyRoot(sha1Digest));
  });

  it('refuses transforms other than enveloped-signature and exclusive canonicalization', async () => {
    const inclusive = rawSignature(authnRequest(), [
      {
        xpath: "//*[@ID='_req1']",
        transforms: [TRANSFORM.enveloped, 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315'],
      },
    ]);
    await refusedWith('signature-algorithm', () => verifyRoot(inclusive));
    const noEnveloped = rawSignature(authnRequest(), [{ xpath: "//*[@ID='_req1']", transforms: [TRANSFORM.excC14n] }]);
    await refusedWith(['signature-algorithm', 'signature-invalid'], () => verifyRoot(noEnveloped));
    const inclusiveSignedInfo = rawSignature(authnRequest(), [{ xpath: "//*[@ID='_req1']" }], {
      c14n: 'http://www.w3.org/TR/2001/REC-xml-c14n-20010315',
    });
    await refusedWith('signature-algorithm', () => verifyRoot(inclusiveSignedInfo));
  });

  it('refuses keys that are not RSA of 2048 bits or more', async () => {
    const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' });
    const signed = rawSignature(authnRequest(), [{ xpath: "//*[@ID='_req1']" }]);
    await refusedWith('signature-algorithm', () => verifyRoot(signed, { keys: [weak as string] }));
    await refusedWith('signature-algorithm', () => verifyRoot(signed, { keys: [ec as string] }));
  });
});
