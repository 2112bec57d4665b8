// Key pairs and an identity provider's metadata for the SAML service providers the tests start.
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DOMImplementation } from '@xmldom/xmldom';
import { createSelfSignedCertificate, NS, readCertificate, serialize } from '../../../src/saml/xml/index.ts';

export interface KeyPair {
  privateKey: KeyObject;
  /** PEM */
  certificate: string;
  keyFile: string;
  certFile: string;
}

/** An RSA-2048 key and a self-signed certificate, written as PEM files <name>.key and <name>.crt in dir. */
export async function writeKeyPair(dir: string, name: string, commonName = name): Promise<KeyPair> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const certificate = await createSelfSignedCertificate({ privateKey, commonName });
  const keyFile = join(dir, `${name}.key`);
  const certFile = join(dir, `${name}.crt`);
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o644 });
  writeFileSync(certFile, certificate, { mode: 0o644 });
  return { privateKey, certificate, keyFile, certFile };
}

export const BINDING = {
  redirect: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect',
  post: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST',
} as const;

export interface TestIdpMetadata {
  entityId: string;
  ssoUrl: string;
  sloUrl: string;
  /** PEM: the signing (and encryption) certificate */
  certificate: string;
}

/**
 * An IDPSSODescriptor naming the given endpoints and certificate: enough for a service provider to
 * send its requests there (before the service publishes its own metadata, and for peers pointed at
 * something that is not the service).
 */
export function testIdpMetadata(idp: TestIdpMetadata): string {
  const document = new DOMImplementation().createDocument(NS.metadata, 'md:EntityDescriptor', null);
  const root = document.documentElement!;
  root.setAttribute('entityID', idp.entityId);
  root.setAttributeNS('http://www.w3.org/2000/xmlns/', 'xmlns:ds', NS.dsig);
  const descriptor = document.createElementNS(NS.metadata, 'md:IDPSSODescriptor');
  descriptor.setAttribute('protocolSupportEnumeration', NS.protocol);
  descriptor.setAttribute('WantAuthnRequestsSigned', 'false');
  root.appendChild(descriptor);
  for (const use of ['signing', 'encryption']) {
    const key = document.createElementNS(NS.metadata, 'md:KeyDescriptor');
    key.setAttribute('use', use);
    const info = document.createElementNS(NS.dsig, 'ds:KeyInfo');
    const data = document.createElementNS(NS.dsig, 'ds:X509Data');
    const cert = document.createElementNS(NS.dsig, 'ds:X509Certificate');
    cert.appendChild(document.createTextNode(readCertificate(idp.certificate).base64));
    data.appendChild(cert);
    info.appendChild(data);
    key.appendChild(info);
    descriptor.appendChild(key);
  }
  const endpoint = (name: string, binding: string, location: string) => {
    const element = document.createElementNS(NS.metadata, `md:${name}`);
    element.setAttribute('Binding', binding);
    element.setAttribute('Location', location);
    descriptor.appendChild(element);
  };
  endpoint('SingleLogoutService', BINDING.redirect, idp.sloUrl);
  endpoint('SingleLogoutService', BINDING.post, idp.sloUrl);
  const format = document.createElementNS(NS.metadata, 'md:NameIDFormat');
  format.appendChild(document.createTextNode('urn:oasis:names:tc:SAML:2.0:nameid-format:persistent'));
  descriptor.appendChild(format);
  endpoint('SingleSignOnService', BINDING.redirect, idp.ssoUrl);
  endpoint('SingleSignOnService', BINDING.post, idp.ssoUrl);
  return `<?xml version="1.0" encoding="UTF-8"?>\n${serialize(document)}\n`;
}
