// A test PKI made with the openssl CLI (a root, an intermediate, a leaf that signs) and FIDO
// Metadata Service blobs signed by the leaf, the way mds3.fidoalliance.org signs its blob.
import { execFileSync } from 'node:child_process';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CompactSign } from 'jose';

export interface TestPki {
  dir: string;
  rootPem: string;
  rootPath: string;
  /** x5c: leaf, intermediate (base64 DER) */
  x5c: string[];
  leafKey: KeyObject;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function key(dir: string, name: string): void {
  openssl(dir, ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`]);
}

function der(dir: string, name: string): string {
  return new X509Certificate(readFileSync(join(dir, `${name}.pem`))).raw.toString('base64');
}

/** A certificate for `name` signed by `issuer`'s key; a CA when ca is true. */
function issue(dir: string, name: string, issuer: string, ca: boolean): void {
  key(dir, name);
  openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', `/O=Test/CN=${name}`, '-out', `${name}.csr`]);
  writeFileSync(
    join(dir, `${name}.ext`),
    ca
      ? 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n'
      : 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n',
  );
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${issuer}.pem`,
    '-CAkey',
    `${issuer}.key`,
    '-CAcreateserial',
    '-days',
    '30',
    '-sha256',
    '-extfile',
    `${name}.ext`,
    '-out',
    `${name}.pem`,
  ]);
}

/** A self-signed root CA named `name` in dir (name.pem, name.key). */
export function makeRoot(dir: string, name: string): string {
  key(dir, name);
  openssl(dir, [
    'req',
    '-x509',
    '-new',
    '-key',
    `${name}.key`,
    '-subj',
    `/O=Test/CN=${name}`,
    '-days',
    '60',
    '-sha256',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-out',
    `${name}.pem`,
  ]);
  return join(dir, `${name}.pem`);
}

/** Root -> intermediate -> leaf, all P-256. */
export function makePki(dir: string): TestPki {
  const rootPath = makeRoot(dir, 'mds-root');
  issue(dir, 'mds-intermediate', 'mds-root', true);
  issue(dir, 'mds-leaf', 'mds-intermediate', false);
  return {
    dir,
    rootPem: readFileSync(rootPath, 'utf8'),
    rootPath,
    x5c: [der(dir, 'mds-leaf'), der(dir, 'mds-intermediate')],
    leafKey: createPrivateKey(readFileSync(join(dir, 'mds-leaf.key'))),
  };
}

export interface TestEntry {
  aaguid?: string;
  description: string;
  /** status reports, oldest first unless a test says otherwise */
  statuses: { status: string; effectiveDate?: string }[];
  icon?: string;
  /** the statement's own aaguid, when it differs from the entry's */
  statementAaguid?: string;
}

/** A blob payload: MDS3's shape, one FIDO2 (aaguid) entry per TestEntry, plus a U2F entry without one. */
export function payload(no: number, nextUpdate: string, entries: TestEntry[]): Record<string, unknown> {
  return {
    legalHeader: 'test',
    no,
    nextUpdate,
    entries: [
      ...entries.map((e) => ({
        aaguid: e.aaguid,
        metadataStatement: {
          aaguid: e.statementAaguid ?? e.aaguid,
          description: e.description,
          authenticatorVersion: 1,
          protocolFamily: 'fido2',
          schema: 3,
          attestationTypes: ['basic_full'],
          authenticationAlgorithms: ['secp256r1_ecdsa_sha256_raw'],
          attestationRootCertificates: [],
          ...(e.icon ? { icon: e.icon } : {}),
        },
        statusReports: e.statuses,
        timeOfLastStatusChange: '2024-01-01',
      })),
      {
        attestationCertificateKeyIdentifiers: ['0123456789abcdef0123456789abcdef01234567'],
        metadataStatement: { description: 'A U2F key', protocolFamily: 'u2f' },
        statusReports: [{ status: 'FIDO_CERTIFIED', effectiveDate: '2020-01-01' }],
        timeOfLastStatusChange: '2020-01-01',
      },
    ],
  };
}

/** The blob: a compact JWS signed by the leaf with ES256, its chain in the x5c header. */
export async function signBlob(pki: TestPki, body: unknown): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(body)))
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT', x5c: pki.x5c })
    .sign(pki.leafKey);
}

/** A date (YYYY-MM-DD) `days` from today, UTC. */
export function day(days: number): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
}
