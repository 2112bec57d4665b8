// XML Encryption of assertions (and the other saml:Encrypted* elements) with xml-encryption.
//
// Encrypting: AES-256-GCM content, the key transported with rsa-oaep-mgf1p (what xmlsec1 1.2, and
// so mod_auth_mellon and pysaml2, can unwrap); AES-CBC only when the caller asks for it, for a peer
// that offers nothing better. Decrypting: the algorithms are checked against an allow-list before
// the library sees the element, RSA PKCS#1 v1.5 key transport is never accepted (Bleichenbacher),
// and every failure reads the same, so the answer is no padding oracle.
import { X509Certificate } from 'node:crypto';
import { promisify } from 'node:util';
import xmlenc from 'xml-encryption';
import { ENCRYPTION, KEY_TRANSPORT, NS } from './algorithms.ts';
import { refuse } from './errors.ts';
import { rsaPrivateKey, rsaPublicKey, type PrivateKeyInput } from './keys.ts';
import { childElements, parseXml, serialize, type Document, type Element, type ParsedXml } from './parse.ts';

const encrypt = promisify(xmlenc.encrypt) as (content: string, options: object) => Promise<string>;
const decrypt = promisify(xmlenc.decrypt) as (xml: string, options: object) => Promise<string>;

export type ContentEncryption = (typeof ENCRYPTION)[keyof typeof ENCRYPTION];
export type KeyTransport = (typeof KEY_TRANSPORT)[keyof typeof KEY_TRANSPORT];

const CBC: readonly string[] = [ENCRYPTION.aes128Cbc, ENCRYPTION.aes256Cbc];
const GCM: readonly string[] = [ENCRYPTION.aes128Gcm, ENCRYPTION.aes256Gcm];
const KEY_TRANSPORTS: readonly string[] = [KEY_TRANSPORT.rsaOaepMgf1p, KEY_TRANSPORT.rsaOaep];

export interface EncryptOptions {
  /** the recipient's encryption certificate (PEM), from its metadata */
  certificate: string;
  /** AES-256-GCM unless given; CBC only for a recipient whose metadata lists nothing better */
  encryptionAlgorithm?: ContentEncryption;
  keyTransport?: KeyTransport;
}

/**
 * Replace `assertion` (a saml:Assertion in `document`) with a saml:EncryptedAssertion holding it
 * encrypted for the recipient, and return the new element.
 */
export async function encryptAssertion(
  document: Document,
  assertion: Element,
  options: EncryptOptions,
): Promise<Element> {
  if (assertion.namespaceURI !== NS.assertion || assertion.localName !== 'Assertion') {
    throw new Error('only a saml:Assertion is encrypted here');
  }
  const encryptedData = await encryptElement(assertion, options);
  const container = document.createElementNS(NS.assertion, 'saml:EncryptedAssertion');
  container.appendChild(document.importNode(encryptedData, true));
  assertion.parentNode!.replaceChild(container, assertion);
  return container;
}

/** An xenc:EncryptedData of the element (Type Element), with the content key in its KeyInfo. */
export async function encryptElement(element: Element, options: EncryptOptions): Promise<Element> {
  const certificate = new X509Certificate(options.certificate);
  rsaPublicKey(certificate);
  const encrypted = await encrypt(serialize(element), {
    rsa_pub: certificate.publicKey.export({ type: 'spki', format: 'pem' }),
    pem: certificate.toString(),
    encryptionAlgorithm: options.encryptionAlgorithm ?? ENCRYPTION.aes256Gcm,
    keyEncryptionAlgorithm: options.keyTransport ?? KEY_TRANSPORT.rsaOaepMgf1p,
    keyEncryptionDigest: 'sha1',
    disallowEncryptionWithInsecureAlgorithm: !CBC.includes(options.encryptionAlgorithm ?? ''),
    warnInsecureAlgorithm: false,
  });
  return parseXml(encrypted.trim()).root;
}

export interface DecryptOptions {
  /** the service's own decryption key */
  privateKey: PrivateKeyInput;
  /** accept AES-CBC content (unauthenticated) from a peer that sends nothing better */
  allowCbc?: boolean;
}

function algorithm(parent: Element, namespace: string): string {
  const methods = childElements(parent, namespace, 'EncryptionMethod');
  if (methods.length !== 1) throw refuse('encryption-algorithm', 'exactly one EncryptionMethod is required');
  return methods[0]!.getAttribute('Algorithm') ?? '';
}

/** The EncryptedKeys a container may use: inside EncryptedData's KeyInfo, or beside EncryptedData. */
function encryptedKeys(container: Element, encryptedData: Element): Element[] {
  const keyInfo = childElements(encryptedData, NS.dsig, 'KeyInfo');
  return [
    ...keyInfo.flatMap((k) => childElements(k, NS.xenc, 'EncryptedKey')),
    ...childElements(container, NS.xenc, 'EncryptedKey'),
  ];
}

/** Only the algorithms on the allow-list reach the library. */
function checkAlgorithms(container: Element, allowCbc: boolean): void {
  const data = childElements(container, NS.xenc, 'EncryptedData');
  if (data.length !== 1) throw refuse('encryption-algorithm', 'exactly one EncryptedData is required');
  const content = algorithm(data[0]!, NS.xenc);
  if (!GCM.includes(content) && !(allowCbc && CBC.includes(content))) {
    throw refuse('encryption-algorithm', 'the content encryption algorithm is not accepted');
  }
  const keys = encryptedKeys(container, data[0]!);
  if (keys.length === 0) throw refuse('encryption-algorithm', 'no EncryptedKey');
  for (const key of keys) {
    if (!KEY_TRANSPORTS.includes(algorithm(key, NS.xenc))) {
      throw refuse('encryption-algorithm', 'the key transport algorithm is not accepted');
    }
  }
}

/**
 * Decrypt a saml:EncryptedAssertion (or EncryptedID, EncryptedAttribute) and return its content,
 * parsed strictly like any inbound XML. It must be one element in the SAML assertion namespace.
 */
export async function decryptElement(container: Element, options: DecryptOptions): Promise<ParsedXml> {
  const allowCbc = options.allowCbc === true;
  checkAlgorithms(container, allowCbc);
  const key = rsaPrivateKey(options.privateKey).export({ type: 'pkcs8', format: 'pem' });
  let plaintext: string;
  try {
    plaintext = await decrypt(serialize(container), {
      key,
      disallowDecryptionWithInsecureAlgorithm: !allowCbc,
      warnInsecureAlgorithm: false,
    });
  } catch {
    throw refuse('decryption-failed', 'the message could not be decrypted');
  }
  let parsed: ParsedXml;
  try {
    parsed = parseXml(plaintext);
  } catch {
    throw refuse('decryption-failed', 'the message could not be decrypted');
  }
  if (parsed.root.namespaceURI !== NS.assertion)
    throw refuse('decryption-failed', 'the message could not be decrypted');
  return parsed;
}
