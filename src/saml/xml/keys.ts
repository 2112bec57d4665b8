// Keys as the layer takes them: always from the caller (metadata, configuration), never from a message.
import { createPrivateKey, createPublicKey, KeyObject, X509Certificate } from 'node:crypto';
import { refuse } from './errors.ts';

/** A certificate or public key: PEM text, DER/base64 certificate body, an X509Certificate or a KeyObject. */
export type PublicKeyInput = string | Buffer | X509Certificate | KeyObject;
export type PrivateKeyInput = string | Buffer | KeyObject;

const MIN_RSA_BITS = 2048;

/** The bare base64 of an X.509 certificate, as metadata's X509Certificate element holds it, in PEM. */
export function certificateToPem(base64OrPem: string): string {
  if (base64OrPem.includes('-----BEGIN')) return base64OrPem;
  const body = base64OrPem.replace(/\s+/g, '');
  return `-----BEGIN CERTIFICATE-----\n${body.replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
}

/** An RSA public key of at least 2048 bits, from whatever the caller holds. */
export function rsaPublicKey(input: PublicKeyInput): KeyObject {
  let key: KeyObject;
  try {
    if (input instanceof X509Certificate) key = input.publicKey;
    else if (input instanceof KeyObject) key = input;
    else {
      const text = Buffer.isBuffer(input) ? input.toString('latin1') : input;
      key = /-----BEGIN (?:PUBLIC KEY|RSA PUBLIC KEY)-----/.test(text)
        ? createPublicKey(text)
        : new X509Certificate(certificateToPem(text)).publicKey;
    }
  } catch {
    throw refuse('signature-invalid', 'the key is not a usable certificate or public key');
  }
  if (key.type === 'private') key = createPublicKey(key);
  return checkRsa(key);
}

export function rsaPrivateKey(input: PrivateKeyInput): KeyObject {
  const key = input instanceof KeyObject ? input : createPrivateKey(input);
  if (key.type !== 'private') throw new Error('a private key is required');
  return checkRsa(key);
}

function checkRsa(key: KeyObject): KeyObject {
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < MIN_RSA_BITS) {
    throw refuse('signature-algorithm', `only RSA keys of ${MIN_RSA_BITS} bits or more are accepted`);
  }
  return key;
}
