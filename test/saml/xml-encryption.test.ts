// Assertion encryption: xmlsec1 decrypts what we encrypt and we decrypt what xmlsec1 encrypts;
// the algorithm allow-list on decryption.
import { before, describe, it } from 'node:test';
import { X509Certificate } from 'node:crypto';
import assert from 'node:assert/strict';
import {
  decryptElement,
  ENCRYPTION,
  encryptAssertion,
  KEY_TRANSPORT,
  NS,
  parseXml,
  serialize,
  textOf,
  XmlSecurityError,
  type Element,
  type XmlRefusal,
} from '../../src/saml/xml/index.ts';
import { encryptedInShape, REFUSED_SHAPES } from './encryption-shapes.ts';
import { ASSERTION, assertion, party, readIn, response, withFiles, xmlsec1, type Party } from './saml-fixtures.ts';

let sp: Party;
let other: Party;

before(async () => {
  [sp, other] = await Promise.all([party('sp.example.org'), party('other.example')]);
});

async function refused(reason: XmlRefusal, run: () => Promise<unknown>): Promise<void> {
  await assert.rejects(run, (err: unknown) => {
    assert.ok(err instanceof XmlSecurityError, `expected XmlSecurityError, got ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    return true;
  });
}

const first = (root: Element, ns: string, name: string) => root.getElementsByTagNameNS(ns, name)[0]!;

/** A Response whose assertion is encrypted for the SP. */
async function encryptedResponse(options: Partial<Parameters<typeof encryptAssertion>[2]> = {}) {
  const parsed = parseXml(response('_resp1', assertion('_as1')));
  encryptAssertion(parsed.document, first(parsed.root, ASSERTION, 'Assertion'), {
    certificate: sp.certificate,
    ...options,
  });
  return parsed;
}

/** What xmlsec1 --encrypt makes of an assertion, from an EncryptedData template. */
function xmlsecEncrypted(content: string, keyTransport: string, session: string): string {
  const template =
    `<xenc:EncryptedData xmlns:xenc="${NS.xenc}" Type="http://www.w3.org/2001/04/xmlenc#Element">` +
    `<xenc:EncryptionMethod Algorithm="${content}"/>` +
    `<ds:KeyInfo xmlns:ds="${NS.dsig}"><xenc:EncryptedKey><xenc:EncryptionMethod Algorithm="${keyTransport}">` +
    `<ds:DigestMethod Algorithm="http://www.w3.org/2000/09/xmldsig#sha1"/></xenc:EncryptionMethod>` +
    `<xenc:CipherData><xenc:CipherValue/></xenc:CipherData></xenc:EncryptedKey></ds:KeyInfo>` +
    `<xenc:CipherData><xenc:CipherValue/></xenc:CipherData></xenc:EncryptedData>`;
  const data = `<saml:EncryptedAssertion xmlns:saml="${ASSERTION}">${assertion('_as1')}</saml:EncryptedAssertion>`;
  return withFiles({ 'cert.pem': sp.certificate, 'tmpl.xml': template, 'data.xml': data }, (dir) => {
    const run = xmlsec1(dir, [
      '--encrypt',
      '--pubkey-cert-pem',
      'cert.pem',
      '--session-key',
      session,
      '--xml-data',
      'data.xml',
      '--node-xpath',
      "/*/*[local-name()='Assertion']",
      '--output',
      'out.xml',
      'tmpl.xml',
    ]);
    assert.equal(run.status, 0, run.stderr);
    return readIn(dir, 'out.xml');
  });
}

describe('encrypting assertions', () => {
  it('encrypts with AES-256-GCM and rsa-oaep-mgf1p by default, replacing the assertion', async () => {
    const parsed = await encryptedResponse();
    const encrypted = first(parsed.root, ASSERTION, 'EncryptedAssertion');
    assert.ok(encrypted);
    assert.equal(parsed.root.getElementsByTagNameNS(ASSERTION, 'Assertion').length, 0);
    const methods = Array.from(encrypted.getElementsByTagNameNS(NS.xenc, 'EncryptionMethod')).map((m) =>
      m.getAttribute('Algorithm'),
    );
    assert.deepEqual(methods.sort(), [KEY_TRANSPORT.rsaOaepMgf1p, ENCRYPTION.aes256Gcm].sort());
    assert.doesNotMatch(serialize(parsed.document), /admin@evil\.com/);
  });

  it('decrypts its own output back to the assertion', async () => {
    const parsed = await encryptedResponse();
    const decrypted = await decryptElement(first(parsed.root, ASSERTION, 'EncryptedAssertion'), {
      privateKey: sp.privateKey,
    });
    assert.equal(decrypted.root.localName, 'Assertion');
    assert.equal(textOf(first(decrypted.root, ASSERTION, 'NameID')), 'admin@evil.com');
    assert.equal(textOf(first(decrypted.root, ASSERTION, 'AttributeValue')), 'Ada & <Lovelace>');
  });

  it('decrypts its own output for every content algorithm and key transport offered', async () => {
    for (const encryptionAlgorithm of Object.values(ENCRYPTION)) {
      for (const keyTransport of Object.values(KEY_TRANSPORT)) {
        const parsed = await encryptedResponse({ encryptionAlgorithm, keyTransport });
        const container = first(parsed.root, ASSERTION, 'EncryptedAssertion');
        const decrypted = await decryptElement(container, { privateKey: sp.privateKey, allowCbc: true });
        assert.equal(textOf(first(decrypted.root, ASSERTION, 'NameID')), 'admin@evil.com', encryptionAlgorithm);
      }
    }
  });

  it('names the recipient certificate in the EncryptedKey, and a new key and IV each time', async () => {
    const values: string[] = [];
    for (let i = 0; i < 2; i++) {
      const parsed = await encryptedResponse();
      const key = first(parsed.root, NS.xenc, 'EncryptedKey');
      const certificate = textOf(first(key, NS.dsig, 'X509Certificate'));
      assert.equal(certificate, new X509Certificate(sp.certificate).raw.toString('base64'));
      values.push(...Array.from(parsed.root.getElementsByTagNameNS(NS.xenc, 'CipherValue')).map((v) => textOf(v)));
    }
    assert.equal(new Set(values).size, 4);
  });

  it('xmlsec1 --decrypt reads what we encrypt (GCM by default, CBC when asked)', async () => {
    for (const encryptionAlgorithm of [undefined, ENCRYPTION.aes256Cbc, ENCRYPTION.aes128Cbc] as const) {
      const parsed = await encryptedResponse(encryptionAlgorithm ? { encryptionAlgorithm } : {});
      withFiles({ 'key.pem': sp.privateKeyPem, 'resp.xml': serialize(parsed.document) }, (dir) => {
        const run = xmlsec1(dir, ['--decrypt', '--privkey-pem', 'key.pem', '--output', 'out.xml', 'resp.xml']);
        assert.equal(run.status, 0, run.stderr);
        const out = parseXml(readIn(dir, 'out.xml'));
        assert.equal(textOf(first(out.root, ASSERTION, 'NameID')), 'admin@evil.com');
      });
    }
  });

  it('decrypts what xmlsec1 --encrypt makes (GCM and, when allowed, CBC)', async () => {
    const gcm = parseXml(xmlsecEncrypted(ENCRYPTION.aes256Gcm, KEY_TRANSPORT.rsaOaepMgf1p, 'aes-256'));
    const decrypted = await decryptElement(gcm.root, { privateKey: sp.privateKey });
    assert.equal(textOf(first(decrypted.root, ASSERTION, 'NameID')), 'admin@evil.com');
    const cbc = parseXml(xmlsecEncrypted(ENCRYPTION.aes128Cbc, KEY_TRANSPORT.rsaOaepMgf1p, 'aes-128'));
    await refused('encryption-algorithm', () => decryptElement(cbc.root, { privateKey: sp.privateKey }));
    const allowed = await decryptElement(cbc.root, { privateKey: sp.privateKey, allowCbc: true });
    assert.equal(allowed.root.localName, 'Assertion');
  });
});

describe('decryption refusals', () => {
  it('refuses RSA PKCS#1 v1.5 key transport even when CBC is allowed', async () => {
    const rsa15 = parseXml(
      xmlsecEncrypted(ENCRYPTION.aes256Gcm, 'http://www.w3.org/2001/04/xmlenc#rsa-1_5', 'aes-256'),
    );
    await refused('encryption-algorithm', () =>
      decryptElement(rsa15.root, { privateKey: sp.privateKey, allowCbc: true }),
    );
  });

  it('refuses Triple DES content', async () => {
    const des = parseXml(
      xmlsecEncrypted('http://www.w3.org/2001/04/xmlenc#tripledes-cbc', KEY_TRANSPORT.rsaOaepMgf1p, 'des-192'),
    );
    await refused('encryption-algorithm', () =>
      decryptElement(des.root, { privateKey: sp.privateKey, allowCbc: true }),
    );
  });

  it('says the same for a wrong key and for tampered ciphertext (no oracle)', async () => {
    const parsed = await encryptedResponse();
    const container = first(parsed.root, ASSERTION, 'EncryptedAssertion');
    await refused('decryption-failed', () => decryptElement(container, { privateKey: other.privateKey }));
    const values = container.getElementsByTagNameNS(NS.xenc, 'CipherValue');
    const content = values[values.length - 1]!;
    const bytes = Buffer.from(content.textContent!, 'base64');
    bytes[bytes.length - 20]! ^= 1;
    content.textContent = bytes.toString('base64');
    await refused('decryption-failed', () => decryptElement(container, { privateKey: sp.privateKey }));
  });

  it('AES-CBC, when allowed: decrypts, and says the same for a wrong key, bad padding or a cut ciphertext', async () => {
    const cbc = async () =>
      first(
        (await encryptedResponse({ encryptionAlgorithm: ENCRYPTION.aes256Cbc })).root,
        ASSERTION,
        'EncryptedAssertion',
      );
    const container = await cbc();
    const decrypted = await decryptElement(container, { privateKey: sp.privateKey, allowCbc: true });
    assert.equal(textOf(first(decrypted.root, ASSERTION, 'NameID')), 'admin@evil.com');
    await refused('decryption-failed', () =>
      decryptElement(container, { privateKey: other.privateKey, allowCbc: true }),
    );
    for (const alter of [
      (bytes: Buffer) => Buffer.concat([bytes.subarray(0, -16), Buffer.alloc(16, 0xff)]),
      (bytes: Buffer) => bytes.subarray(0, -5),
    ]) {
      const altered = await cbc();
      const values = altered.getElementsByTagNameNS(NS.xenc, 'CipherValue');
      const content = values[values.length - 1]!;
      content.textContent = alter(Buffer.from(content.textContent!, 'base64')).toString('base64');
      await refused('decryption-failed', () => decryptElement(altered, { privateKey: sp.privateKey, allowCbc: true }));
    }
  });

  it('refuses two EncryptedData elements in one container', async () => {
    const parsed = await encryptedResponse();
    const container = first(parsed.root, ASSERTION, 'EncryptedAssertion');
    container.appendChild(first(container, NS.xenc, 'EncryptedData').cloneNode(true));
    await refused('encryption-algorithm', () => decryptElement(container, { privateKey: sp.privateKey }));
  });
});

describe('decryption refuses shapes the library could read differently from the check', () => {
  const contents = {
    EncryptedAssertion: assertion('_as1'),
    EncryptedID: `<saml:NameID xmlns:saml="${ASSERTION}" Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent">victim</saml:NameID>`,
  } as const;

  for (const container of ['EncryptedAssertion', 'EncryptedID'] as const) {
    it(`${container}: the sound shape built the same way decrypts`, async () => {
      for (const allowCbc of [false, true]) {
        const xml = encryptedInShape(container, contents[container], sp.certificate, 'sound');
        const decrypted = await decryptElement(parseXml(xml).root, { privateKey: sp.privateKey, allowCbc });
        assert.equal(decrypted.root.localName, container === 'EncryptedID' ? 'NameID' : 'Assertion');
      }
    });

    for (const shape of REFUSED_SHAPES) {
      it(`${container}: refuses ${shape}, with AES-CBC allowed or not`, async () => {
        for (const allowCbc of [true, false]) {
          const xml = encryptedInShape(container, contents[container], sp.certificate, shape);
          await refused('encryption-algorithm', () =>
            decryptElement(parseXml(xml).root, { privateKey: sp.privateKey, allowCbc }),
          );
        }
      });
    }
  }

  it('refuses an EncryptionMethod out of place, even with an accepted algorithm', async () => {
    const parsed = await encryptedResponse();
    const container = first(parsed.root, ASSERTION, 'EncryptedAssertion');
    const extra = parsed.document.createElementNS(NS.xenc, 'xenc:EncryptionMethod');
    extra.setAttribute('Algorithm', ENCRYPTION.aes256Gcm);
    first(container, NS.xenc, 'CipherData').appendChild(extra);
    await refused('encryption-algorithm', () => decryptElement(container, { privateKey: sp.privateKey }));
  });
});
