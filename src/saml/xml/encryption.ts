// XML Encryption of assertions (and the other saml:Encrypted* elements).
//
// Encrypting: AES-256-GCM content, the key transported with rsa-oaep-mgf1p (what xmlsec1 1.2, and
// so mod_auth_mellon and pysaml2, can unwrap); AES-CBC only when the caller asks for it, for a peer
// that offers nothing better. The xenc:EncryptedData is built here as elements of the message's own
// document with node:crypto, like every other part of an outgoing message: xml-encryption renders
// its output from string templates, which would then have to be parsed and copied into the
// document. Decrypting: the structure (one EncryptedData, one EncryptedKey in its KeyInfo, no
// RetrievalMethod) and every EncryptionMethod are checked against an allow-list before the library
// sees the element, RSA PKCS#1 v1.5 key transport is never accepted (Bleichenbacher), and every
// failure reads the same, so the answer is no padding oracle.
import {
  constants,
  createCipheriv,
  createDecipheriv,
  publicEncrypt,
  randomBytes,
  X509Certificate,
  type CipherGCMTypes,
  type KeyObject,
} from 'node:crypto';
import xmlenc from 'xml-encryption';
import { DIGEST, ENCRYPTION, KEY_TRANSPORT, NS } from './algorithms.ts';
import { refuse } from './errors.ts';
import { rsaPrivateKey, rsaPublicKey, type PrivateKeyInput } from './keys.ts';
import { childElements, parseXml, serialize, type Document, type Element, type ParsedXml } from './parse.ts';

export type ContentEncryption = (typeof ENCRYPTION)[keyof typeof ENCRYPTION];
export type KeyTransport = (typeof KEY_TRANSPORT)[keyof typeof KEY_TRANSPORT];

const CBC: readonly string[] = [ENCRYPTION.aes128Cbc, ENCRYPTION.aes256Cbc];
const GCM: readonly string[] = [ENCRYPTION.aes128Gcm, ENCRYPTION.aes256Gcm];
const KEY_TRANSPORTS: readonly string[] = [KEY_TRANSPORT.rsaOaepMgf1p, KEY_TRANSPORT.rsaOaep];
const XMLNS = 'http://www.w3.org/2000/xmlns/';
const TYPE_ELEMENT = 'http://www.w3.org/2001/04/xmlenc#Element';

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
export function encryptAssertion(document: Document, assertion: Element, options: EncryptOptions): Element {
  if (assertion.namespaceURI !== NS.assertion || assertion.localName !== 'Assertion') {
    throw new Error('only a saml:Assertion is encrypted here');
  }
  const encryptedData = encryptElement(assertion, options);
  const container = document.createElementNS(NS.assertion, 'saml:EncryptedAssertion');
  assertion.parentNode!.replaceChild(container, assertion);
  container.appendChild(encryptedData);
  return container;
}

interface Recipient {
  publicKey: KeyObject;
  /** the certificate's DER in base64, for the EncryptedKey's KeyInfo */
  certificate: string;
}

/** Certificates read before, by their PEM: an SP's certificate is read once, not for every assertion. */
const recipients = new Map<string, Recipient>();
const MAX_RECIPIENTS = 1000;

/** The recipient's RSA public key (of the accepted size, else it throws) and certificate. */
function recipientOf(pem: string): Recipient {
  const known = recipients.get(pem);
  if (known) return known;
  const certificate = new X509Certificate(pem);
  const recipient = { publicKey: rsaPublicKey(certificate), certificate: certificate.raw.toString('base64') };
  if (recipients.size >= MAX_RECIPIENTS) recipients.clear();
  recipients.set(pem, recipient);
  return recipient;
}

/** The content encrypted with a fresh key: IV, ciphertext and (GCM) tag, as XML Encryption lays them out. */
function encryptContent(algorithm: string, plaintext: string): { key: Buffer; bytes: Buffer } {
  const spec = CONTENT[algorithm];
  if (!spec) throw new Error('the content encryption algorithm is not offered');
  const key = randomBytes(spec.keyLength);
  const iv = randomBytes(spec.ivLength);
  if (spec.gcm) {
    const cipher = createCipheriv(spec.cipher as CipherGCMTypes, key, iv, { authTagLength: 16 });
    return { key, bytes: Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]) };
  }
  // PKCS#7 padding is one of the paddings XML Encryption's CBC allows (the last byte counts them)
  const cipher = createCipheriv(spec.cipher, key, iv);
  return { key, bytes: Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final()]) };
}

/**
 * An xenc:EncryptedData of the element (Type Element), in the element's own document, with the
 * content key in its KeyInfo: RSA-OAEP with SHA-1 and MGF1 with SHA-1 under either transport
 * identifier (the only digest rsa-oaep-mgf1p has, and xmlenc11#rsa-oaep's default), the
 * recipient's certificate beside it so that an SP with several keys knows which one to use.
 */
export function encryptElement(element: Element, options: EncryptOptions): Element {
  const recipient = recipientOf(options.certificate);
  const algorithm = options.encryptionAlgorithm ?? ENCRYPTION.aes256Gcm;
  const transport = options.keyTransport ?? KEY_TRANSPORT.rsaOaepMgf1p;
  if (!KEY_TRANSPORTS.includes(transport)) throw new Error('the key transport is not offered');
  const content = encryptContent(algorithm, serialize(element));
  const wrapped = publicEncrypt(
    { key: recipient.publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha1' },
    content.key,
  );
  const document = element.ownerDocument!;
  const add = (parent: Element, namespace: string, name: string, text?: string) => {
    const child = document.createElementNS(namespace, name);
    if (text !== undefined) child.appendChild(document.createTextNode(text));
    parent.appendChild(child);
    return child;
  };
  const data = document.createElementNS(NS.xenc, 'xenc:EncryptedData');
  data.setAttributeNS(XMLNS, 'xmlns:xenc', NS.xenc);
  data.setAttribute('Type', TYPE_ELEMENT);
  add(data, NS.xenc, 'xenc:EncryptionMethod').setAttribute('Algorithm', algorithm);
  const keyInfo = add(data, NS.dsig, 'ds:KeyInfo');
  keyInfo.setAttributeNS(XMLNS, 'xmlns:ds', NS.dsig);
  const encryptedKey = add(keyInfo, NS.xenc, 'xenc:EncryptedKey');
  const method = add(encryptedKey, NS.xenc, 'xenc:EncryptionMethod');
  method.setAttribute('Algorithm', transport);
  add(method, NS.dsig, 'ds:DigestMethod').setAttribute('Algorithm', DIGEST.sha1);
  const certificate = add(add(encryptedKey, NS.dsig, 'ds:KeyInfo'), NS.dsig, 'ds:X509Data');
  add(certificate, NS.dsig, 'ds:X509Certificate', recipient.certificate);
  add(add(encryptedKey, NS.xenc, 'xenc:CipherData'), NS.xenc, 'xenc:CipherValue', wrapped.toString('base64'));
  add(add(data, NS.xenc, 'xenc:CipherData'), NS.xenc, 'xenc:CipherValue', content.bytes.toString('base64'));
  return data;
}

export interface DecryptOptions {
  /** the service's own decryption key */
  privateKey: PrivateKeyInput;
  /** accept AES-CBC content (unauthenticated) from a peer that sends nothing better */
  allowCbc?: boolean;
}

/** Every element below `root`, in document order. */
function descendants(root: Element): Element[] {
  const out: Element[] = [];
  const stack = childElements(root).reverse();
  while (stack.length > 0) {
    const element = stack.pop()!;
    out.push(element);
    stack.push(...childElements(element).reverse());
  }
  return out;
}

const notAccepted = (message: string) => refuse('encryption-algorithm', message);

/** The one child of `parent` in the XML Encryption namespace named `localName` (any namespace counts). */
function onlyChild(parent: Element, localName: string): Element {
  const found = childElements(parent).filter((c) => c.localName === localName);
  if (found.length !== 1 || found[0]!.namespaceURI !== NS.xenc) {
    throw notAccepted(`exactly one xenc:${localName} is required in xenc:${parent.localName}`);
  }
  return found[0]!;
}

/**
 * Only one shape reaches the library: the container holds one xenc:EncryptedData, whose ds:KeyInfo
 * holds the one xenc:EncryptedKey of the whole container, and every xenc:EncryptionMethod in it is
 * on the allow-list. The library looks elements up by local name alone, anywhere in the container
 * and in document order (the first KeyInfo/EncryptedKey is the key it unwraps, nesting included),
 * so anything that would let it pick another element than the one checked here is refused: a
 * second EncryptedKey (beside EncryptedData, or nested in an EncryptedKey's KeyInfo), a nested
 * EncryptedData, a ds:RetrievalMethod, an EncryptionMethod anywhere else, in any namespace.
 */
function checkStructure(container: Element, allowCbc: boolean): { data: Element; key: Element } {
  const all = descendants(container);
  const named = (localName: string) => all.filter((e) => e.localName === localName);
  if (named('RetrievalMethod').length > 0) throw notAccepted('a RetrievalMethod is not accepted');
  const data = named('EncryptedData');
  if (data.length !== 1 || data[0]!.parentNode !== container || data[0]!.namespaceURI !== NS.xenc) {
    throw notAccepted('exactly one EncryptedData is required, directly in the container');
  }
  const keys = named('EncryptedKey');
  if (keys.length !== 1) throw notAccepted('exactly one EncryptedKey is required');
  const key = keys[0]!;
  const keyInfo = key.parentNode as Element | null;
  if (
    key.namespaceURI !== NS.xenc ||
    keyInfo?.localName !== 'KeyInfo' ||
    keyInfo.namespaceURI !== NS.dsig ||
    keyInfo.parentNode !== data[0]
  ) {
    throw notAccepted('the EncryptedKey must be in the KeyInfo of the EncryptedData');
  }
  const content = onlyChild(data[0], 'EncryptionMethod');
  const transport = onlyChild(key, 'EncryptionMethod');
  for (const method of named('EncryptionMethod')) {
    if (method !== content && method !== transport) throw notAccepted('an EncryptionMethod out of place');
  }
  const contentAlgorithm = content.getAttribute('Algorithm') ?? '';
  if (!GCM.includes(contentAlgorithm) && !(allowCbc && CBC.includes(contentAlgorithm))) {
    throw notAccepted('the content encryption algorithm is not accepted');
  }
  if (!KEY_TRANSPORTS.includes(transport.getAttribute('Algorithm') ?? '')) {
    throw notAccepted('the key transport algorithm is not accepted');
  }
  for (const parent of [data[0], key]) onlyChild(onlyChild(parent, 'CipherData'), 'CipherValue');
  return { data: data[0], key };
}

/** node:crypto's name, key and IV length of each content algorithm accepted. */
const CONTENT: Record<string, { cipher: string; keyLength: number; ivLength: number; gcm: boolean }> = {
  [ENCRYPTION.aes128Gcm]: { cipher: 'aes-128-gcm', keyLength: 16, ivLength: 12, gcm: true },
  [ENCRYPTION.aes256Gcm]: { cipher: 'aes-256-gcm', keyLength: 32, ivLength: 12, gcm: true },
  [ENCRYPTION.aes128Cbc]: { cipher: 'aes-128-cbc', keyLength: 16, ivLength: 16, gcm: false },
  [ENCRYPTION.aes256Cbc]: { cipher: 'aes-256-cbc', keyLength: 32, ivLength: 16, gcm: false },
};

/** The content (IV, ciphertext, GCM tag) decrypted with the unwrapped key; throws on any mismatch. */
function decryptContent(algorithm: string, key: Buffer, bytes: Buffer): Buffer {
  const spec = CONTENT[algorithm];
  if (!spec || key.length !== spec.keyLength) throw new Error('key or algorithm mismatch');
  const iv = bytes.subarray(0, spec.ivLength);
  if (spec.gcm) {
    if (bytes.length < spec.ivLength + 16) throw new Error('too short');
    const decipher = createDecipheriv(spec.cipher as CipherGCMTypes, key, iv, { authTagLength: 16 });
    decipher.setAuthTag(bytes.subarray(bytes.length - 16));
    return Buffer.concat([decipher.update(bytes.subarray(spec.ivLength, bytes.length - 16)), decipher.final()]);
  }
  const body = bytes.subarray(spec.ivLength);
  if (body.length === 0 || body.length % 16 !== 0) throw new Error('not whole blocks');
  const decipher = createDecipheriv(spec.cipher, key, iv).setAutoPadding(false);
  const padded = Buffer.concat([decipher.update(body), decipher.final()]);
  // XML Encryption padding: the last byte says how many to drop (the others are arbitrary)
  const padding = padded[padded.length - 1]!;
  if (padding < 1 || padding > 16) throw new Error('bad padding');
  return padded.subarray(0, padded.length - padding);
}

/**
 * Decrypt a saml:EncryptedAssertion (or EncryptedID, EncryptedAttribute) and return its content,
 * parsed strictly like any inbound XML. It must be one element in the SAML assertion namespace.
 *
 * The content key is unwrapped by the library with its own guard always on
 * (disallowDecryptionWithInsecureAlgorithm refuses rsa-1_5, whatever the CBC policy), from the one
 * EncryptedKey checkStructure left; the content is then decrypted here with only the algorithms
 * of the allow-list. The library's own decrypt is not used: its one option covers both rsa-1_5
 * and AES-CBC, so it could not keep rsa-1_5 out while letting CBC in.
 */
export async function decryptElement(container: Element, options: DecryptOptions): Promise<ParsedXml> {
  const allowCbc = options.allowCbc === true;
  const { data } = checkStructure(container, allowCbc);
  const algorithm = onlyChild(data, 'EncryptionMethod').getAttribute('Algorithm') ?? '';
  const cipherValue = onlyChild(onlyChild(data, 'CipherData'), 'CipherValue');
  const key = rsaPrivateKey(options.privateKey).export({ type: 'pkcs8', format: 'pem' });
  let plaintext: Buffer;
  try {
    const contentKey = xmlenc.decryptKeyInfo(serialize(container), {
      key,
      disallowDecryptionWithInsecureAlgorithm: true,
      warnInsecureAlgorithm: false,
    });
    plaintext = decryptContent(algorithm, contentKey, Buffer.from(cipherValue.textContent ?? '', 'base64'));
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
