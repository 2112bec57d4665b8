// X.509 certificates for the keys the service publishes in SAML metadata. node:crypto reads
// certificates but cannot create one, so self-signed certificates are made with @peculiar/x509
// (WebCrypto underneath, node:crypto's own; no install script). Federations expect exactly this: a
// long-lived self-signed certificate carrying the key, whose validity nobody checks (SAML trusts the
// key in metadata, not a chain). The library is loaded when a certificate is first made (a new
// key, not every start): loading it was about a tenth of the time from start to ready.
import { createHash, webcrypto, X509Certificate, type KeyObject } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { rsaPrivateKey, rsaPublicKey, type PrivateKeyInput } from './keys.ts';

export interface SelfSignedOptions {
  privateKey: PrivateKeyInput;
  /** the subject and issuer common name, say the IdP's host name */
  commonName: string;
  /** validity in days from now (default ten years, as federation metadata practice has it) */
  validDays?: number;
  now?: Date;
}

const RSA_SHA256 = { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } as const;

/** A self-signed RSA-SHA256 certificate (PEM) for an RSA key of 2048 bits or more. */
export async function createSelfSignedCertificate(options: SelfSignedOptions): Promise<string> {
  await import('reflect-metadata');
  // its CommonJS build, whose exports are the default export both for Node and in the bundle
  const { default: x509 } = (await import('@peculiar/x509')) as unknown as { default: typeof X509 };
  const privateKey = rsaPrivateKey(options.privateKey);
  const publicKey = rsaPublicKey(privateKey);
  // node:crypto's CryptoKey and the DOM one @peculiar/x509 is typed with are the same objects at run time.
  const keys = {
    privateKey: privateKey.toCryptoKey(RSA_SHA256, false, ['sign']),
    publicKey: publicKey.toCryptoKey(RSA_SHA256, true, ['verify']),
  } as unknown as CryptoKeyPair;
  const now = options.now ?? new Date();
  const notAfter = new Date(now.getTime() + (options.validDays ?? 3650) * 86_400_000);
  const serial = Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)));
  serial[0]! &= 0x7f; // a positive INTEGER
  const certificate = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial.toString('hex'),
      name: [{ CN: [options.commonName] }],
      notBefore: new Date(now.getTime() - 60_000),
      notAfter,
      keys,
      signingAlgorithm: RSA_SHA256,
      extensions: [new x509.BasicConstraintsExtension(false, undefined, true)],
    },
    webcrypto as unknown as Crypto,
  );
  return certificate.toString('pem') + '\n';
}

export interface CertificateFacts {
  publicKey: KeyObject;
  /** SHA-256 of the DER, lower-case hex without separators */
  sha256Fingerprint: string;
  notBefore: Date;
  notAfter: Date;
  /** the base64 body, as metadata's ds:X509Certificate holds it */
  base64: string;
}

/** What the service needs to know of a PEM certificate (its own, or one from metadata). */
export function readCertificate(pem: string): CertificateFacts {
  const certificate = new X509Certificate(pem);
  return {
    publicKey: certificate.publicKey,
    sha256Fingerprint: createHash('sha256').update(certificate.raw).digest('hex'),
    notBefore: certificate.validFromDate,
    notAfter: certificate.validToDate,
    base64: certificate.raw.toString('base64'),
  };
}
