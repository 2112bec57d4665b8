// The FIDO Metadata Service (MDS3): which authenticator models exist, what their makers and the
// FIDO Alliance say about them (revoked, compromised, certified), and the roots their attestation
// certificates chain to. An operator downloads the signed blob from https://mds3.fidoalliance.org/
// and imports it (`mds import`); nothing is fetched at run time. Registration asks
// authenticatorVerdict() whether an authenticator model is refused, and the library checks
// attestations against the imported statements (loadMetadataStatements()).
//
// "Attested" (passkeys.attested = 1) means: the registration's attestation format was not 'none',
// verifyRegistrationResponse verified it, and @simplewebauthn/server held a metadata statement for
// the AAGUID, so it validated the attestation's x5c chain to that statement's
// attestationRootCertificates (and matched the key's algorithm to the statement's). The library
// consults statements for the packed (full attestation, with x5c), tpm, android-key and
// android-safetynet formats; packed self-attestation (no x5c), fido-u2f and apple never reach a
// statement, and an AAGUID without a statement is verified without one ('permissive'), so neither
// is attested. attestedAgainstMetadata() applies exactly this rule to a verified registration.
import { rootCertificates } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, errors as joseErrors } from 'jose';
import type { Kysely, Transaction, Insertable } from 'kysely';
import type { MetadataStatement, VerifiedRegistrationResponse } from '@simplewebauthn/server';
import type { DB, MdsAuthenticatorsTable } from '../store/schema.ts';
import type { Store } from '../store/index.ts';
import {
  findMdsAuthenticator,
  insertMdsImport,
  lastMdsSerial,
  listMdsStatements,
  latestMdsImport,
  listPasskeysWithMdsStatus,
  upsertMdsAuthenticators,
  type PasskeyWithStatus,
} from '../store/mds.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest } from '../errors.ts';
import { iso } from '../time.ts';
import { AAGUID } from './formats.ts';
import { authenticatorInfo, type AaguidData } from './aaguid.ts';
import { webauthnHelpers, webauthnServer } from './library.ts';
import { removeOrganizationPasskey } from './passkey-removal.ts';

type Q = Kysely<DB> | Transaction<DB>;
type RegistrationInfo = NonNullable<VerifiedRegistrationResponse['registrationInfo']>;

/** The MDS3 statuses that mean an authenticator model must not be trusted: it may not register. */
export const REFUSED_STATUSES = [
  'REVOKED',
  'USER_VERIFICATION_BYPASS',
  'ATTESTATION_KEY_COMPROMISE',
  'USER_KEY_REMOTE_COMPROMISE',
  'USER_KEY_PHYSICAL_COMPROMISE',
] as const;

export function isRefusedStatus(status: string): boolean {
  return (REFUSED_STATUSES as readonly string[]).includes(status);
}

/** Stored when an entry has no status report (MDS3 requires one; a blob may still lack it). */
export const NO_STATUS = 'NO_STATUS_REPORT';

export type AuthenticatorVerdict =
  | { refused: false; known: boolean; description?: string; icon?: string }
  | { refused: true; status: string; description: string };

/** What the imported metadata says about an authenticator model: refused, known, or unknown. */
export async function authenticatorVerdict(db: Q, aaguid: string): Promise<AuthenticatorVerdict> {
  const row = await findMdsAuthenticator(db, aaguid.toLowerCase());
  if (!row) return { refused: false, known: false };
  if (isRefusedStatus(row.status)) return { refused: true, status: row.status, description: row.description };
  return { refused: false, known: true, description: row.description, ...(row.icon ? { icon: row.icon } : {}) };
}

/**
 * Hands the imported statements to @simplewebauthn/server's MetadataService, which
 * verifyRegistrationResponse consults for attestations (see the top of this file). Call it at
 * start and after an import; it affects this process only. Returns how many were loaded. With none
 * imported it does not load the library (it stays loaded on first use, src/webauthn/library.ts).
 */
export async function loadMetadataStatements(db: Q): Promise<number> {
  const rows = await listMdsStatements(db);
  if (rows.length === 0) return 0;
  const statements: MetadataStatement[] = [];
  for (const row of rows) {
    // The icon (a data: URI, often the largest part) plays no part in verification.
    const { icon: _icon, ...statement } = JSON.parse(row.statement) as MetadataStatement;
    statements.push({ ...statement, aaguid: row.aaguid });
  }
  const { MetadataService } = await webauthnServer();
  await MetadataService.initialize({ mdsServers: [], statements, verificationMode: 'permissive' });
  return statements.length;
}

let loadedImport: number | undefined;

/**
 * Loads the statements when another import (by any instance) happened since this process last
 * did: one small query per registration that asks for attestation.
 */
export async function ensureMetadataStatements(db: Q): Promise<void> {
  const latest = (await latestMdsImport(db))?.id;
  if (latest === undefined || latest === loadedImport) return;
  await loadMetadataStatements(db);
  loadedImport = latest;
}

/** The formats whose verification consults MetadataService (see the top of this file). */
const STATEMENT_FORMATS = new Set(['packed', 'tpm', 'android-key', 'android-safetynet']);

/** Whether a verified registration was checked against an imported statement: passkeys.attested. */
export async function attestedAgainstMetadata(
  info: Pick<RegistrationInfo, 'fmt' | 'aaguid' | 'attestationObject'>,
): Promise<boolean> {
  if (!STATEMENT_FORMATS.has(info.fmt)) return false;
  if (info.fmt === 'packed') {
    const { decodeAttestationObject } = await webauthnHelpers();
    if (!decodeAttestationObject(info.attestationObject).get('attStmt').get('x5c')) return false;
  }
  const { MetadataService } = await webauthnServer();
  try {
    return (await MetadataService.getStatement(info.aaguid)) !== undefined;
  } catch {
    return false;
  }
}

/** Passkeys whose authenticator model has a refused status, in one organization or in all. */
export function compromisedPasskeys(db: Q, orgId?: number): Promise<PasskeyWithStatus[]> {
  return listPasskeysWithMdsStatus(db, REFUSED_STATUSES, orgId);
}

/**
 * Deletes the passkeys compromisedPasskeys() lists, each through the passkey API's own deletion
 * (its audit record and event), with the operator as actor and the reason in the record.
 */
export async function removeCompromisedPasskeys(
  store: Store,
  reason: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
  orgId?: number,
): Promise<{ deleted: number[] }> {
  const text = reason.trim();
  if (!text || text.length > 200 || /[\u0000-\u001f\u007f]/.test(text))
    throw badRequest('--reason must be one line of 1 to 200 characters');
  const removal = { who: actor, reason: text, at: now };
  const deleted: number[] = [];
  for (const passkey of await compromisedPasskeys(store.db, orgId)) {
    if (await removeOrganizationPasskey(store, removal, passkey.org_id, passkey.id)) deleted.push(passkey.id);
  }
  return { deleted };
}

// ---- The blob: a JWS whose x5c chain leads to the FIDO Alliance's root ----

/** The FIDO MDS3 blob is signed under GlobalSign Root CA - R3 (SHA-256 fingerprint below). */
const MDS_ROOT_SHA256 =
  'CB:B5:22:D7:B7:F1:27:AD:6A:01:13:86:5B:DF:1C:D4:10:2E:7D:07:59:AF:63:5A:7C:F4:72:0D:C9:63:C5:3B';

/** GlobalSign Root CA - R3, for a Node.js whose bundled roots no longer carry it. Valid until 2029-03-18. */
const GLOBALSIGN_ROOT_CA_R3 = `-----BEGIN CERTIFICATE-----
MIIDXzCCAkegAwIBAgILBAAAAAABIVhTCKIwDQYJKoZIhvcNAQELBQAwTDEgMB4G
A1UECxMXR2xvYmFsU2lnbiBSb290IENBIC0gUjMxEzARBgNVBAoTCkdsb2JhbFNp
Z24xEzARBgNVBAMTCkdsb2JhbFNpZ24wHhcNMDkwMzE4MTAwMDAwWhcNMjkwMzE4
MTAwMDAwWjBMMSAwHgYDVQQLExdHbG9iYWxTaWduIFJvb3QgQ0EgLSBSMzETMBEG
A1UEChMKR2xvYmFsU2lnbjETMBEGA1UEAxMKR2xvYmFsU2lnbjCCASIwDQYJKoZI
hvcNAQEBBQADggEPADCCAQoCggEBAMwldpB5BngiFvXAg7aEyiie/QV2EcWtiHL8
RgJDx7KKnQRfJMsuS+FggkbhUqsMgUdwbN1k0ev1LKMPgj0MK66X17YUhhB5uzsT
gHeMCOFJ0mpiLx9e+pZo34knlTifBtc+ycsmWQ1z3rDI6SYOgxXG71uL0gRgykmm
KPZpO/bLyCiR5Z2KYVc3rHQU3HTgOu5yLy6c+9C7v/U9AOEGM+iCK65TpjoWc4zd
QQ4gOsC0p6Hpsk+QLjJg6VfLuQSSaGjlOCZgdbKfd/+RFO+uIEn8rUAVSNECMWEZ
XriX7613t2Saer9fwRPvm2L7DWzgVGkWqQPabumDk3F2xmmFghcCAwEAAaNCMEAw
DgYDVR0PAQH/BAQDAgEGMA8GA1UdEwEB/wQFMAMBAf8wHQYDVR0OBBYEFI/wS3+o
LkUkrk1Q+mOai97i3Ru8MA0GCSqGSIb3DQEBCwUAA4IBAQBLQNvAUKr+yAzv95ZU
RUm7lgAJQayzE4aGKAczymvmdLm6AC2upArT9fHxD4q/c2dKg8dEe3jgr25sbwMp
jjM5RcOO5LlXbKr8EpbsU8Yt5CRsuZRj+9xTaGdWPoO4zzUhw8lo/s7awlOqzJCK
6fBdRoyV3XpYKBovHd7NADdBj+1EbddTKJd+82cEHhXXipa0095MJ6RMG3NzdvQX
mcIfeg7jLQitChws/zyrVQ4PkX4268NXSb7hLi18YIvDQVETI53O9zJrlAGomecs
Mx86OyXShkDOOyyGeMlhLxS67ttVb9+E7gUJTb0o2HLO02JQZR7rkpeDMdmztcpH
WD9f
-----END CERTIFICATE-----
`;

/** The FIDO MDS root: from Node.js's bundled roots (by subject, pinned by fingerprint), else the copy above. */
export function fidoMdsRoot(): X509Certificate {
  for (const pem of rootCertificates) {
    if (!pem.includes('MIIDXzCCAkegAwIBAgILBAAAAAABIVhTCKIw')) continue;
    const cert = new X509Certificate(pem);
    if (cert.subject.includes('OU=GlobalSign Root CA - R3') && cert.fingerprint256 === MDS_ROOT_SHA256) return cert;
  }
  return new X509Certificate(GLOBALSIGN_ROOT_CA_R3);
}

/** A root given by the operator (`--root`): the first certificate of a PEM file. */
export function rootFromPem(pem: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch {
    throw badRequest('the root is not a PEM certificate');
  }
}

/** The signature algorithms an MDS blob may use. */
const BLOB_ALGORITHMS = ['ES256', 'ES384', 'ES512', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];

function refuse(problem: string): never {
  throw badRequest(`${problem}; nothing was imported`);
}

function certificateName(cert: X509Certificate): string {
  return cert.subject.replace(/\n/g, ', ');
}

/** The JWS header's x5c certificates, leaf first. */
function headerChain(blob: string): X509Certificate[] {
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(blob))
    refuse('the file is not an MDS blob (a JWT: header.payload.signature)');
  let x5c: unknown;
  try {
    x5c = decodeProtectedHeader(blob).x5c;
  } catch {
    refuse('the file is not an MDS blob (its JWT header is not JSON)');
  }
  if (!Array.isArray(x5c) || x5c.length === 0 || !x5c.every((c) => typeof c === 'string'))
    refuse('the blob has no x5c certificate chain in its header');
  return x5c.map((der: string, i) => {
    try {
      return new X509Certificate(Buffer.from(der, 'base64'));
    } catch {
      refuse(`certificate ${i + 1} of the blob's x5c chain cannot be read`);
    }
  });
}

function checkValidity(cert: X509Certificate, what: string, now: number): void {
  if (cert.validToDate.getTime() < now) refuse(`${what} (${certificateName(cert)}) expired on ${cert.validTo}`);
  if (cert.validFromDate.getTime() > now)
    refuse(`${what} (${certificateName(cert)}) is not valid before ${cert.validFrom}`);
}

function signedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  return issuer.ca && cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

/** Each certificate current and signed by the next; the last the root or signed by it. */
function verifyChain(chain: X509Certificate[], root: X509Certificate, now: number): void {
  checkValidity(root, 'the trusted root', now);
  chain.forEach((cert, i) => {
    checkValidity(cert, `certificate ${i + 1} of the blob's x5c chain`, now);
    const issuer = chain[i + 1];
    if (issuer && !signedBy(cert, issuer))
      refuse(`certificate ${i + 1} of the blob's x5c chain is not signed by certificate ${i + 2}`);
  });
  const last = chain[chain.length - 1]!;
  if (!last.raw.equals(root.raw) && !signedBy(last, root))
    refuse(`the blob's certificate chain does not lead to the trusted root (${certificateName(root)})`);
}

/** The payload, once the leaf certificate's key verifies the signature. */
async function verifiedPayload(blob: string, leaf: X509Certificate): Promise<unknown> {
  let bytes: Uint8Array;
  try {
    ({ payload: bytes } = await compactVerify(blob, leaf.publicKey, { algorithms: BLOB_ALGORITHMS }));
  } catch (err) {
    if (err instanceof joseErrors.JOSEAlgNotAllowed) refuse("the blob's signature algorithm is not allowed");
    refuse("the blob's signature does not verify with its signing certificate");
  }
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    refuse("the blob's payload is not JSON");
  }
}

// ---- The payload: entries become rows ----

interface StatusReport {
  status: string;
  effectiveDate?: string;
}

export interface ParsedBlob {
  serial: number;
  nextUpdate: string;
  rows: Insertable<MdsAuthenticatorsTable>[];
  /** entries without an AAGUID (U2F, UAF): not FIDO2 authenticators */
  skipped: number;
}

function malformed(problem: string): never {
  refuse(`the blob's payload is malformed: ${problem}`);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The latest report by effectiveDate; of reports on the same day, the last listed. */
function latestReport(reports: StatusReport[]): StatusReport | undefined {
  let latest: StatusReport | undefined;
  for (const r of reports) if (!latest || (r.effectiveDate ?? '') >= (latest.effectiveDate ?? '')) latest = r;
  return latest;
}

function statusReports(n: number, value: unknown): StatusReport[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) malformed(`entry ${n}: statusReports must be an array`);
  return value.map((r) => {
    if (!isObject(r) || typeof r.status !== 'string' || !r.status)
      malformed(`entry ${n}: every status report needs a status`);
    if (r.effectiveDate !== undefined && typeof r.effectiveDate !== 'string')
      malformed(`entry ${n}: a status report's effectiveDate must be a date`);
    return { status: r.status, effectiveDate: r.effectiveDate };
  });
}

/** Only image data: URIs are kept as icons; pages may show them. */
function iconOf(statement: Record<string, unknown>): string | null {
  const icon = statement.icon;
  return typeof icon === 'string' && /^data:image\/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]+$/.test(icon)
    ? icon
    : null;
}

function entryRow(n: number, entry: Record<string, unknown>, now: number): Insertable<MdsAuthenticatorsTable> {
  const aaguid = typeof entry.aaguid === 'string' ? entry.aaguid.toLowerCase() : '';
  if (!AAGUID.test(aaguid)) malformed(`entry ${n}: aaguid is not a UUID`);
  const statement = entry.metadataStatement;
  if (!isObject(statement)) malformed(`entry ${n}: metadataStatement must be an object`);
  if (typeof statement.description !== 'string' || !statement.description.trim())
    malformed(`entry ${n}: metadataStatement.description must be a non-empty string`);
  const latest = latestReport(statusReports(n, entry.statusReports));
  return {
    aaguid,
    description: statement.description.trim(),
    status: latest?.status ?? NO_STATUS,
    status_date: latest?.effectiveDate ?? null,
    icon: iconOf(statement),
    statement: JSON.stringify(statement),
    updated_at: now,
  };
}

/** The blob's serial, next update and FIDO2 entries, checked. */
export function parsePayload(payload: unknown, now: number): ParsedBlob {
  if (!isObject(payload)) malformed('not a JSON object');
  const { no, nextUpdate, entries } = payload;
  if (typeof no !== 'number' || !Number.isInteger(no) || no < 1 || no > 2_147_483_647)
    malformed('no must be a positive integer');
  if (typeof nextUpdate !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(nextUpdate) || isNaN(Date.parse(nextUpdate)))
    malformed('nextUpdate must be a date (YYYY-MM-DD)');
  if (!Array.isArray(entries)) malformed('entries must be an array');
  // The entry's aaguid names the model (the published blob has statements whose own aaguid differs).
  // An aaguid listed twice keeps a refused status once one entry has it, else the last entry.
  const rows = new Map<string, Insertable<MdsAuthenticatorsTable>>();
  let skipped = 0;
  entries.forEach((entry, i) => {
    if (!isObject(entry)) malformed(`entry ${i + 1} is not an object`);
    if (entry.aaguid === undefined || entry.aaguid === null) {
      skipped++;
      return;
    }
    const row = entryRow(i + 1, entry, now);
    const earlier = rows.get(row.aaguid);
    if (!earlier || !isRefusedStatus(earlier.status)) rows.set(row.aaguid, row);
  });
  return { serial: no, nextUpdate, rows: [...rows.values()], skipped };
}

export interface MdsImportSummary {
  serial: number;
  next_update: string;
  /** FIDO2 authenticators stored (inserted or updated) */
  entries: number;
  /** of those, how many have a refused status */
  refused: number;
  /** entries without an AAGUID, not stored */
  skipped: number;
  imported_at: string;
}

/**
 * Verifies a blob (signature, certificate chain to the root, validity dates, nextUpdate, serial
 * greater than the last imported) and stores its FIDO2 entries and the import, audited, in one
 * transaction. Refuses with one line and changes nothing otherwise.
 */
export async function importMetadataBlob(
  store: Store,
  blob: string,
  { root = fidoMdsRoot(), actor = SYSTEM, now = Date.now() }: Change & { root?: X509Certificate } = {},
): Promise<MdsImportSummary> {
  const text = blob.trim();
  const chain = headerChain(text);
  verifyChain(chain, root, now);
  const parsed = parsePayload(await verifiedPayload(text, chain[0]!), now);
  if (parsed.nextUpdate < iso(now).slice(0, 10))
    refuse(`the blob is out of date: its nextUpdate ${parsed.nextUpdate} has passed; download a current one`);
  const summary = await store.db.transaction().execute(async (trx) => {
    const last = await lastMdsSerial(trx);
    if (last !== undefined && parsed.serial <= last)
      refuse(`the blob's serial ${parsed.serial} is not greater than the last imported serial ${last}`);
    await upsertMdsAuthenticators(trx, parsed.rows);
    const row = { serial: parsed.serial, next_update: parsed.nextUpdate, entries: parsed.rows.length };
    await insertMdsImport(trx, { ...row, imported_at: now });
    const refused = parsed.rows.filter((r) => isRefusedStatus(r.status)).length;
    const result = { ...row, refused, skipped: parsed.skipped, imported_at: iso(now) };
    await recordAudit(trx, { action: 'mds.import', actor, at: now, subject: `mds:${parsed.serial}`, details: result });
    return result;
  });
  await loadMetadataStatements(store.db);
  return summary;
}

/** How a passkey's authenticator is shown to people (account page, console): its model name and
 * icons from AAGUID_DATA_FILE or the shipped list, else from the imported metadata; a model the
 * metadata reports compromised keeps its name but loses the metadata's icon. */
export interface AuthenticatorDisplay {
  name: string | undefined;
  icon: string | undefined;
  iconDark: string | undefined;
}

export async function authenticatorDisplay(db: Q, aaguid: string, data?: AaguidData): Promise<AuthenticatorDisplay> {
  const known = await authenticatorVerdict(db, aaguid);
  const info = authenticatorInfo(aaguid, data);
  return {
    name: info?.name ?? known.description,
    icon: info?.iconLight ?? (known.refused ? undefined : known.icon),
    iconDark: info?.iconDark,
  };
}
