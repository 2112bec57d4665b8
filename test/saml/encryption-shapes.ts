// Encrypted SAML elements built by hand with node:crypto, in the shapes a decryption library could
// read differently from the allow-list check: the content key wrapped with RSA PKCS#1 v1.5 where
// the library would find it, a second EncryptedKey, a RetrievalMethod, a nested EncryptedData.
// Every shape carries genuine ciphertext for the recipient's certificate, so a refusal is the
// check's doing, not a decryption failure (the `sound` shape shows the rest of the build is right).
import { constants, createCipheriv, publicEncrypt, randomBytes, X509Certificate } from 'node:crypto';
import { ENCRYPTION, KEY_TRANSPORT, NS } from '../../src/saml/xml/index.ts';

export const RSA_1_5 = 'http://www.w3.org/2001/04/xmlenc#rsa-1_5';

export type EncryptionShape =
  /** one EncryptedKey (rsa-oaep-mgf1p) in EncryptedData's KeyInfo: what is accepted */
  | 'sound'
  /** the only EncryptedKey uses rsa-1_5 */
  | 'rsa-1_5'
  /** an rsa-oaep EncryptedKey (a decoy) in EncryptedData's KeyInfo whose own KeyInfo holds the real key, wrapped with rsa-1_5 */
  | 'nested-rsa-1_5'
  /** no KeyInfo in EncryptedData; an rsa-oaep EncryptedKey beside it, with the rsa-1_5 one in its KeyInfo */
  | 'nested-rsa-1_5-beside'
  /** the rsa-1_5 EncryptedKey in EncryptedData's KeyInfo under another namespace, an rsa-oaep one beside */
  | 'foreign-namespace-rsa-1_5'
  /** two rsa-oaep EncryptedKeys: one in EncryptedData's KeyInfo, one beside EncryptedData */
  | 'two-keys'
  /** EncryptedData's KeyInfo points at the EncryptedKey beside it with a RetrievalMethod */
  | 'retrieval-method'
  /** a second EncryptedData (the real ciphertext) inside EncryptedData's KeyInfo */
  | 'nested-encrypted-data';

export const REFUSED_SHAPES: readonly EncryptionShape[] = [
  'rsa-1_5',
  'nested-rsa-1_5',
  'nested-rsa-1_5-beside',
  'foreign-namespace-rsa-1_5',
  'two-keys',
  'retrieval-method',
  'nested-encrypted-data',
];

const GCM = ENCRYPTION.aes256Gcm;
const OAEP = KEY_TRANSPORT.rsaOaepMgf1p;

/**
 * A saml:EncryptedAssertion or saml:EncryptedID (`container`) holding `content` (one element, its
 * namespaces declared), encrypted with AES-256-GCM for `certificate`, in `shape`.
 */
export function encryptedInShape(
  container: 'EncryptedAssertion' | 'EncryptedID',
  content: string,
  certificate: string,
  shape: EncryptionShape,
): string {
  const publicKey = new X509Certificate(certificate).publicKey;
  const contentKey = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', contentKey, iv);
  const body = Buffer.concat([cipher.update(content, 'utf8'), cipher.final()]);
  const cipherValue = Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64');
  const wrap = (padding: number) =>
    publicEncrypt({ key: publicKey, padding, oaepHash: 'sha1' }, contentKey).toString('base64');
  const oaep = wrap(constants.RSA_PKCS1_OAEP_PADDING);
  const v15 = wrap(constants.RSA_PKCS1_PADDING);
  const method = (algorithm: string) => `<xenc:EncryptionMethod Algorithm="${algorithm}"/>`;
  const cipherData = (value: string) =>
    `<xenc:CipherData><xenc:CipherValue>${value}</xenc:CipherValue></xenc:CipherData>`;
  const key = (algorithm: string, value: string, inner = '', attributes = '') =>
    `<xenc:EncryptedKey${attributes}>${method(algorithm)}${inner ? `<ds:KeyInfo>${inner}</ds:KeyInfo>` : ''}${cipherData(value)}</xenc:EncryptedKey>`;
  const data = (keyInfo: string, value = cipherValue) =>
    `<xenc:EncryptedData Type="${NS.xenc}Element">${method(GCM)}${keyInfo ? `<ds:KeyInfo>${keyInfo}</ds:KeyInfo>` : ''}${cipherData(value)}</xenc:EncryptedData>`;
  // a well-formed but wrong key and ciphertext where the shape needs a decoy
  const decoy = wrap(constants.RSA_PKCS1_OAEP_PADDING).replace(/^./, (c) => (c === 'A' ? 'B' : 'A'));
  let inner: string;
  switch (shape) {
    case 'sound':
      inner = data(key(OAEP, oaep));
      break;
    case 'rsa-1_5':
      inner = data(key(RSA_1_5, v15));
      break;
    case 'nested-rsa-1_5':
      inner = data(key(OAEP, decoy, key(RSA_1_5, v15)));
      break;
    case 'nested-rsa-1_5-beside':
      inner = data('') + key(OAEP, decoy, key(RSA_1_5, v15));
      break;
    case 'foreign-namespace-rsa-1_5':
      inner =
        data(`<x:EncryptedKey xmlns:x="urn:example:not-xenc">${method(RSA_1_5)}${cipherData(v15)}</x:EncryptedKey>`) +
        key(OAEP, oaep);
      break;
    case 'two-keys':
      inner = data(key(OAEP, oaep)) + key(OAEP, oaep);
      break;
    case 'retrieval-method':
      inner =
        data(`<ds:RetrievalMethod URI="#_key1" Type="${NS.xenc}EncryptedKey"/>`) + key(OAEP, oaep, '', ' Id="_key1"');
      break;
    case 'nested-encrypted-data':
      inner = data(key(OAEP, oaep) + data('', cipherValue), Buffer.from('not this').toString('base64'));
      break;
  }
  return (
    `<saml:${container} xmlns:saml="${NS.assertion}" xmlns:xenc="${NS.xenc}" xmlns:ds="${NS.dsig}">` +
    inner +
    `</saml:${container}>`
  );
}
