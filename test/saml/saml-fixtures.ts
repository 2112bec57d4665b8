// Keys, certificates, messages and the xmlsec1 command line for the SAML XML tests.
import { execFileSync, spawnSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSelfSignedCertificate } from '../../src/saml/xml/certificates.ts';

export interface Party {
  privateKey: KeyObject;
  privateKeyPem: string;
  certificate: string;
}

export async function party(commonName: string, modulusLength = 2048): Promise<Party> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength });
  const certificate = await createSelfSignedCertificate({ privateKey, commonName });
  return { privateKey, privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, certificate };
}

export const PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';
export const ASSERTION = 'urn:oasis:names:tc:SAML:2.0:assertion';

export function authnRequest(id = '_req1', issuer = 'https://sp.example.org/shibboleth'): string {
  return (
    `<samlp:AuthnRequest xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" ID="${id}" Version="2.0" ` +
    `IssueInstant="2026-01-01T00:00:00Z" Destination="https://idp.example.org/saml2/idp/sso" ` +
    `AssertionConsumerServiceURL="https://sp.example.org/Shibboleth.sso/SAML2/POST" ` +
    `ProtocolBinding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST">` +
    `<saml:Issuer>${issuer}</saml:Issuer>` +
    `<samlp:NameIDPolicy Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent" AllowCreate="true"/>` +
    `</samlp:AuthnRequest>`
  );
}

export function assertion(id = '_assert1', nameId = 'admin@evil.com'): string {
  return (
    `<saml:Assertion xmlns:saml="${ASSERTION}" xmlns:xs="http://www.w3.org/2001/XMLSchema" ID="${id}" Version="2.0" IssueInstant="2026-01-01T00:00:00Z">` +
    `<saml:Issuer>https://idp.example.org/saml2/idp/metadata</saml:Issuer>` +
    `<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">${nameId}</saml:NameID></saml:Subject>` +
    `<saml:AttributeStatement><saml:Attribute Name="urn:oid:2.16.840.1.113730.3.1.241" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri" FriendlyName="displayName">` +
    `<saml:AttributeValue xsi:type="xs:string" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">Ada &amp; &lt;Lovelace&gt;</saml:AttributeValue></saml:Attribute></saml:AttributeStatement>` +
    `</saml:Assertion>`
  );
}

export function response(id = '_resp1', inner = assertion()): string {
  return (
    `<samlp:Response xmlns:samlp="${PROTOCOL}" xmlns:saml="${ASSERTION}" ID="${id}" Version="2.0" ` +
    `IssueInstant="2026-01-01T00:00:00Z" Destination="https://sp.example.org/Shibboleth.sso/SAML2/POST">` +
    `<saml:Issuer>https://idp.example.org/saml2/idp/metadata</saml:Issuer>` +
    `<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>` +
    inner +
    `</samlp:Response>`
  );
}

/** A directory with files in it, removed after `use`. */
export function withFiles<T>(files: Record<string, string>, use: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'saml-xml-'));
  try {
    for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), content);
    return use(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs xmlsec1 (Debian package xmlsec1) in `dir`: its exit status and output. */
export function xmlsec1(dir: string, args: string[]): { status: number; stdout: string; stderr: string } {
  const run = spawnSync('xmlsec1', args, { cwd: dir, encoding: 'utf8' });
  if (run.error) throw run.error;
  return { status: run.status ?? -1, stdout: run.stdout, stderr: run.stderr };
}

export function readIn(dir: string, name: string): string {
  return readFileSync(join(dir, name), 'utf8');
}

export function xmllintAvailable(): boolean {
  try {
    execFileSync('xmllint', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
