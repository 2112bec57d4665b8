// Importing WebAuthn credentials registered at another identity provider. All or nothing.
import { webauthnHelpers } from './library.ts';
import type { Store } from '../store/index.ts';
import { isUniqueViolation } from '../store/index.ts';
import { findUserByEppn } from '../store/directory.ts';
import { insertPasskeys } from '../store/passkeys.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest } from '../errors.ts';
import type { Insertable } from 'kysely';
import type { PasskeysTable } from '../store/schema.ts';
import { normalizeEppn } from '../directory/index.ts';
import { AAGUID, IMPORTED_TRANSPORTS, isB64url, MAX_LABEL, ZERO_AAGUID } from './formats.ts';
import { validLabel } from './passkey-names.ts';

const FIELDS = [
  'eppn',
  'label',
  'credential_id',
  'public_key',
  'aaguid',
  'sign_count',
  'transports',
  'created_at',
  'last_used_at',
  'mfa_verified',
];

function fail(entry: number, problem: string): never {
  throw badRequest(`entry ${entry}: ${problem}`);
}

function timestamp(entry: number, field: string, value: unknown, nullable: boolean): number | null {
  if (value === null && nullable) return null;
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(value)) {
    fail(entry, `${field} must be an ISO 8601 timestamp with offset${nullable ? ' or null' : ''}`);
  }
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) fail(entry, `${field} is not a valid time`);
  return ms;
}

/** Checks that bytes are a COSE public key WebAuthn can verify with (EC2, RSA or OKP, with alg). */
async function coseKey(entry: number, bytes: Buffer): Promise<void> {
  const { decodeCredentialPublicKey } = await webauthnHelpers();
  let key: Map<number, unknown>;
  try {
    key = decodeCredentialPublicKey(new Uint8Array(bytes)) as unknown as Map<number, unknown>;
  } catch {
    fail(entry, 'public_key is not a CBOR-encoded COSE key');
  }
  if (!(key instanceof Map)) fail(entry, 'public_key is not a CBOR-encoded COSE key');
  const kty = key.get(1);
  const alg = key.get(3);
  if (![1, 2, 3].includes(kty as number) || typeof alg !== 'number')
    fail(entry, 'public_key is not a COSE key of type EC2, RSA or OKP with an alg');
  // EC2: crv(-1) x(-2) y(-3); RSA: n(-1) e(-2); OKP: crv(-1) x(-2)
  const needs = kty === 3 ? [-1, -2] : kty === 2 ? [-2, -3] : [-2];
  for (const p of needs) if (!(key.get(p) instanceof Uint8Array)) fail(entry, 'public_key is missing key parameters');
}

export interface ImportResult {
  imported: number;
  ids: number[];
}

export async function importPasskeys(
  store: Store,
  input: unknown,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<ImportResult> {
  if (!Array.isArray(input)) throw badRequest('the file must hold a JSON array of passkey entries');
  if (input.length === 0) throw badRequest('the file holds no entries');
  const seen = new Set<string>();
  const rows: Insertable<PasskeysTable>[] = [];
  for (let i = 0; i < input.length; i++) {
    const n = i + 1;
    const e = input[i] as Record<string, unknown>;
    if (typeof e !== 'object' || e === null || Array.isArray(e)) fail(n, 'must be a JSON object');
    const unknown = Object.keys(e).filter((k) => !FIELDS.includes(k));
    if (unknown.length) fail(n, `unknown field '${unknown[0]}'`);
    if (typeof e.eppn !== 'string') fail(n, 'eppn must be a string');
    const user = await findUserByEppn(store.db, normalizeEppn(e.eppn));
    if (!user) fail(n, `user '${e.eppn}' does not exist`);
    const label = validLabel(e.label);
    if (label === undefined) fail(n, `label must be 1-${MAX_LABEL} printable characters`);
    if (!isB64url(e.credential_id) || !e.credential_id) fail(n, 'credential_id must be base64url');
    const credentialId = Buffer.from(e.credential_id, 'base64url');
    if (credentialId.length < 16 || credentialId.length > 1023) fail(n, 'credential_id must be 16-1023 bytes');
    if (seen.has(e.credential_id)) fail(n, 'credential_id appears twice in the file');
    seen.add(e.credential_id);
    if (!isB64url(e.public_key) || !e.public_key) fail(n, 'public_key must be base64url');
    const publicKey = Buffer.from(e.public_key, 'base64url');
    await coseKey(n, publicKey);
    const aaguid =
      e.aaguid === undefined || e.aaguid === null
        ? ZERO_AAGUID
        : typeof e.aaguid === 'string'
          ? e.aaguid.toLowerCase()
          : '';
    if (!AAGUID.test(aaguid)) fail(n, 'aaguid must be a UUID');
    const signCount = e.sign_count ?? 0;
    if (typeof signCount !== 'number' || !Number.isSafeInteger(signCount) || signCount < 0 || signCount > 0xffffffff)
      fail(n, 'sign_count must be an integer 0-4294967295');
    const transports = e.transports ?? [];
    if (!Array.isArray(transports) || transports.some((t) => typeof t !== 'string' || !IMPORTED_TRANSPORTS.has(t)))
      fail(n, `transports must be a list of ${[...IMPORTED_TRANSPORTS].join(', ')}`);
    const createdAt = timestamp(n, 'created_at', e.created_at, false) as number;
    const lastUsedAt = timestamp(n, 'last_used_at', e.last_used_at ?? null, true);
    if (createdAt > now + 60_000) fail(n, 'created_at is in the future');
    if (typeof e.mfa_verified !== 'boolean') fail(n, 'mfa_verified must be true or false');
    rows.push({
      user_id: user.id,
      org_id: user.org_id,
      credential_id: credentialId,
      public_key: publicKey,
      sign_count: signCount,
      transports: JSON.stringify(transports),
      label,
      aaguid,
      backup_eligible: 0,
      backup_state: 0,
      mfa_verified: e.mfa_verified ? 1 : 0,
      created_at: createdAt,
      last_used_at: lastUsedAt,
    });
  }
  try {
    const ids = await store.db.transaction().execute(async (trx) => {
      const ids: number[] = [];
      for (let i = 0; i < rows.length; i += 500) ids.push(...(await insertPasskeys(trx, rows.slice(i, i + 500))));
      const details = { count: ids.length };
      await recordAudit(trx, { action: 'passkey.import', actor, at: now, passkeyIds: ids, details });
      return ids;
    });
    return { imported: ids.length, ids };
  } catch (err) {
    if (isUniqueViolation(err))
      throw badRequest('a credential_id in the file is already registered; nothing was imported');
    throw err;
  }
}
