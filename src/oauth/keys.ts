// Signing keys: generated on first start, sealed under IDP_SECRET in the database, shared by
// every instance. A rotated key is published in the JWKS at once but only signs after an
// activation delay (two refresh intervals), so every instance publishes it before any token
// carries it; the old key stays published until tokens it signed have expired.
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import type { JWK } from 'jose';
import type { Store } from '../store/index.ts';
import * as repo from '../store/keys.ts';
import { open, seal, type Keyring } from '../crypto.ts';

/** The additional data a signing key's private part is sealed with. */
export const signingKeyAad = (kid: string) => `signing-key:${kid}`;

export const SIGNING_ALGS = ['ES256', 'RS256'] as const;
export type SigningAlg = (typeof SIGNING_ALGS)[number];

export interface KeyTiming {
  /** delay between `keys rotate` and the new key signing */
  activationDelayMs: number;
  /** how long a retired key stays published (longest token lifetime plus skew) */
  retentionMs: number;
}

export interface KeySet {
  /** private JWKs for oidc-provider in publication order; all but the active key of each alg are verify-only */
  providerJwks: JWK[];
  /** public JWKs of every published key */
  publicJwks: JWK[];
  /** active kid per alg */
  active: Record<SigningAlg, string>;
  /** changes whenever the set or the active keys change */
  fingerprint: string;
}

function generate(alg: SigningAlg, now: number, activatesAt: number, keys: Keyring): repo.SigningKeyRow {
  const kid = randomUUID();
  const pair =
    alg === 'ES256'
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privateJwk = { ...pair.privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
  const publicJwk = { ...pair.publicKey.export({ format: 'jwk' }), kid, alg, use: 'sig' };
  return {
    kid,
    alg,
    private_jwk: seal(keys.keyEncryption, Buffer.from(JSON.stringify(privateJwk)), signingKeyAad(kid)),
    public_jwk: JSON.stringify(publicJwk),
    created_at: now,
    activates_at: activatesAt,
    retired_at: null,
  };
}

/** Creates the first key of each algorithm when there is none (safe when instances start at once). */
export async function ensureSigningKeys(store: Store, keys: Keyring, now = Date.now()): Promise<string[]> {
  return repo.inSigningKeyTransaction(store, async (trx) => {
    const existing = await repo.listSigningKeys(trx);
    const missing = SIGNING_ALGS.filter((alg) => !existing.some((k) => k.alg === alg));
    const rows = missing.map((alg) => generate(alg, now, now, keys));
    await repo.insertSigningKeys(trx, rows);
    return rows.map((r) => r.kid);
  });
}

/** Adds a new key per algorithm, active after the delay; the current ones retire then. */
export async function rotateSigningKeys(
  store: Store,
  keys: Keyring,
  timing: KeyTiming,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ kid: string; alg: string; activatesAt: number }[]> {
  return repo.inSigningKeyTransaction(store, (trx) =>
    rotateIn(trx, keys, timing.activationDelayMs, timing, actor, now),
  );
}

/** How long before it signs a key rotated on schedule is published: two lifetimes of a relying party's JWKS cache of a day. */
export const SCHEDULED_PUBLICATION_MS = 2 * 86_400_000;

/**
 * The scheduled rotation: when the newest key of an algorithm is older than `rotationMs`, new keys
 * are added as by `keys rotate`, published SCHEDULED_PUBLICATION_MS (at least the activation delay)
 * before they sign. The age is checked again under the signing-key lock, so of instances that find
 * the keys due at the same moment one rotates and the others find the new keys: never two.
 */
export async function rotateSigningKeysIfDue(
  store: Store,
  keys: Keyring,
  timing: KeyTiming,
  rotationMs: number,
  now = Date.now(),
): Promise<{ kid: string; alg: string; activatesAt: number }[]> {
  if (rotationMs <= 0) return [];
  const due = (rows: repo.SigningKeyRow[]) =>
    SIGNING_ALGS.some((alg) => {
      const newest = Math.max(...rows.filter((r) => r.alg === alg).map((r) => r.created_at));
      return Number.isFinite(newest) && newest + rotationMs <= now;
    });
  if (!due(await repo.listSigningKeys(store.db))) return [];
  return repo.inSigningKeyTransaction(store, async (trx) => {
    if (!due(await repo.listSigningKeys(trx))) return [];
    const delay = Math.max(timing.activationDelayMs, SCHEDULED_PUBLICATION_MS);
    return rotateIn(trx, keys, delay, timing, SYSTEM, now);
  });
}

async function rotateIn(
  trx: repo.Trx,
  keys: Keyring,
  activationDelayMs: number,
  timing: KeyTiming,
  actor: NonNullable<Change['actor']>,
  now: number,
): Promise<{ kid: string; alg: string; activatesAt: number }[]> {
  const activatesAt = now + activationDelayMs;
  const rows = SIGNING_ALGS.map((alg) => generate(alg, now, activatesAt, keys));
  await repo.insertSigningKeys(trx, rows);
  for (const row of rows) await repo.retireSigningKeys(trx, row.alg, row.kid, activatesAt);
  await repo.deleteSigningKeysRetiredBefore(trx, now - timing.retentionMs);
  const details = { kids: rows.map((r) => r.kid), activates_at: activatesAt };
  await recordAudit(trx, {
    action: 'keys.rotate',
    actor,
    at: now,
    subject: rows.map((r) => r.kid).join(' '),
    details,
  });
  return rows.map((r) => ({ kid: r.kid, alg: r.alg, activatesAt }));
}

const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The one order every instance publishes its keys in, whatever order the database returned them:
 * by algorithm, newest activation first, then kid (compared by code units, not a collation).
 * oidc-provider signs only with the keys not marked verify-only, so the order never picks a key.
 */
function publicationOrder(rows: repo.SigningKeyRow[]): repo.SigningKeyRow[] {
  return [...rows].sort(
    (a, b) => byCodeUnits(a.alg, b.alg) || b.activates_at - a.activates_at || byCodeUnits(a.kid, b.kid),
  );
}

export async function loadKeySet(store: Store, keys: Keyring, timing: KeyTiming, now = Date.now()): Promise<KeySet> {
  const rows = (await repo.listSigningKeys(store.db)).filter(
    (r) => r.retired_at === null || r.retired_at + timing.retentionMs > now,
  );
  const active = {} as Record<SigningAlg, string>;
  for (const alg of SIGNING_ALGS) {
    // newest key that has activated and not yet retired; rows come newest first
    const current = rows.find(
      (r) => r.alg === alg && r.activates_at <= now && (r.retired_at === null || r.retired_at > now),
    );
    if (!current) throw new Error(`no active ${alg} signing key`);
    active[alg] = current.kid;
  }
  const activeKids = new Set(Object.values(active));
  const ordered = publicationOrder(rows);
  const providerJwks = ordered.map((r) => {
    const plain = open(keys.keyEncryption, r.private_jwk, signingKeyAad(r.kid));
    if (!plain)
      throw new Error(`signing key ${r.kid} cannot be decrypted: IDP_SECRET differs from the one it was stored under`);
    const jwk = JSON.parse(plain.toString('utf8')) as JWK;
    return activeKids.has(r.kid) ? jwk : { ...jwk, key_ops: ['verify'] };
  });
  return {
    providerJwks,
    publicJwks: ordered.map((r) => JSON.parse(r.public_jwk) as JWK),
    active,
    fingerprint: ordered.map((r) => `${r.kid}${activeKids.has(r.kid) ? '*' : ''}`).join(','),
  };
}

/** Throws when the stored signing keys were sealed under another IDP_SECRET. */
export async function assertSecretMatches(store: Store, keys: Keyring): Promise<void> {
  const [row] = await repo.listSigningKeys(store.db);
  if (row && !open(keys.keyEncryption, row.private_jwk, signingKeyAad(row.kid))) {
    throw new Error(
      'IDP_SECRET does not match the secret this database was set up with (its signing keys cannot be decrypted)',
    );
  }
}
