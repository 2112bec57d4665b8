// The list endpoints' 'offset' token: AES-256-GCM over {version, last id, expiry, fingerprint}.
// The key derives from IDP_SECRET, so every instance sharing the secret accepts every token;
// nothing is stored server-side.
import { createHash } from 'node:crypto';
import { open, seal } from '../crypto.ts';

const VERSION = 1;
const FINGERPRINT_BYTES = 16;
const PLAINTEXT_BYTES = 1 + 8 + 8 + FINGERPRINT_BYTES;
// Binds the box to this use: a box sealed for something else under the same key never opens here.
const AAD = 'passkey-list-offset/v1';
// Longer than any token we mint; stops work on absurd input before any decoding.
const MAX_TOKEN_LENGTH = 200;

/** What a continuation token is bound to: another path, org, eppn or per_page is another request. */
export interface ListRequest {
  path: 'organization' | 'user';
  orgId: number;
  eppn: string | null;
  perPage: number;
}

export function fingerprint(r: ListRequest): Buffer {
  const canonical = JSON.stringify([r.path, r.orgId, r.eppn, r.perPage]);
  return createHash('sha256').update(canonical).digest().subarray(0, FINGERPRINT_BYTES);
}

export function mintOffset(key: Buffer, request: ListRequest, lastId: number, expiresAt: number): string {
  const plain = Buffer.alloc(PLAINTEXT_BYTES);
  plain.writeUInt8(VERSION, 0);
  plain.writeBigUInt64BE(BigInt(lastId), 1);
  plain.writeBigUInt64BE(BigInt(expiresAt), 9);
  fingerprint(request).copy(plain, 17);
  return seal(key, plain, AAD);
}

export type OffsetResult = { ok: true; lastId: number } | { ok: false; reason: string };

export function readOffset(key: Buffer, token: string, request: ListRequest, now: number): OffsetResult {
  if (token.length === 0) return { ok: false, reason: 'token is empty' };
  const plain = token.length <= MAX_TOKEN_LENGTH ? open(key, token, AAD) : undefined;
  if (!plain || plain.length !== PLAINTEXT_BYTES || plain.readUInt8(0) !== VERSION) {
    return { ok: false, reason: 'token is malformed or has been altered' };
  }
  if (!plain.subarray(17).equals(fingerprint(request))) {
    return { ok: false, reason: 'token was issued for a different request' };
  }
  if (Number(plain.readBigUInt64BE(9)) <= now) return { ok: false, reason: 'token has expired' };
  const lastId = Number(plain.readBigUInt64BE(1));
  if (!Number.isSafeInteger(lastId)) return { ok: false, reason: 'token is malformed or has been altered' };
  return { ok: true, lastId };
}
