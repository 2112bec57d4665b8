// The identity provider's SAML keys: RSA-3072 with long-lived self-signed certificates (what
// federations expect: SAML trusts the key in metadata, not a chain), sealed under IDP_SECRET in
// the database like the OpenID Connect signing keys, shared by every instance, made on first use.
//
// Three uses: `signing` (Responses and assertions), `encryption` (published for SPs and upstream
// IdPs that encrypt to us) and `metadata` (signs the metadata document). A rotation follows the
// publish-before-use rule of the OpenID Connect keys: the new key is in the metadata at once and
// only takes over after SAML_KEY_TIMING.activationDelayMs, two metadata cache durations, by which
// time every SP refreshing as the metadata's cacheDuration asks has it; the old key stays published
// until then, and a little longer for messages in flight.
import { generateKeyPair, randomUUID, createPrivateKey, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import type { Store } from '../store/index.ts';
import * as repo from '../store/saml.ts';
import { open, seal, type Keyring } from '../crypto.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { createSelfSignedCertificate } from '../saml/xml/index.ts';

/** The additional data a SAML key's private part is sealed with. */
export const samlKeyAad = (kid: string) => `saml-key:${kid}`;

export const SAML_KEY_USES = ['signing', 'encryption', 'metadata'] as const;
export type SamlKeyUse = (typeof SAML_KEY_USES)[number];

export interface SamlKey {
  kid: string;
  use: SamlKeyUse;
  privateKey: KeyObject;
  /** PEM */
  certificate: string;
  activatesAt: number;
  retiresAt: number | null;
}

export interface SamlKeySet {
  /** the key that signs Responses and assertions now */
  signing: SamlKey;
  /** every signing key the metadata publishes (the next one before it signs, the last one a while after) */
  published: SamlKey[];
  /** the key that signs the metadata document now */
  metadata: SamlKey;
  /** every encryption key that may still be used to decrypt (published or recently retired) */
  decryption: SamlKey[];
  /** the encryption keys the metadata publishes */
  encryption: SamlKey[];
}

const HOUR = 3600_000;

/**
 * The timing of the IdP's metadata and its keys. The metadata says cacheDuration 6 hours (SPs
 * that load it by URL refresh at least that often; Shibboleth SP also caps its refresh at 4 hours
 * by default) and validUntil 7 days. A new key signs two cache durations after `saml keys rotate`.
 */
export const SAML_KEY_TIMING = {
  cacheDurationMs: 6 * HOUR,
  validityMs: 7 * 24 * HOUR,
  activationDelayMs: 12 * HOUR,
  /** a retired signing key stays published this long (Responses in flight, SP clock skew) */
  signingGraceMs: HOUR,
  /** a retired encryption key still decrypts this long (SPs holding the old metadata) */
  decryptionRetentionMs: 12 * HOUR,
} as const;

export const SAML_KEY_BITS = 3072;

const generateRsa = promisify(generateKeyPair);

async function generate(
  use: SamlKeyUse,
  keys: Keyring,
  now: number,
  activatesAt: number,
  commonName: string,
): Promise<repo.SamlKeyRow> {
  const kid = randomUUID();
  const { privateKey } = await generateRsa('rsa', { modulusLength: SAML_KEY_BITS });
  const certificate = await createSelfSignedCertificate({ privateKey, commonName, now: new Date(now) });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return {
    kid,
    key_use: use,
    private_key: seal(keys.keyEncryption, Buffer.from(pem), samlKeyAad(kid)),
    certificate,
    created_at: now,
    activates_at: activatesAt,
    retired_at: null,
  };
}

/** Creates the first key of each use that has none (instances racing: the first insert wins, the rest read it). */
export async function ensureSamlKeys(
  store: Store,
  keys: Keyring,
  now = Date.now(),
  commonName = 'SAML identity provider',
): Promise<string[]> {
  const have = new Set((await repo.listSamlKeys(store.db)).map((r) => r.key_use));
  const missing = SAML_KEY_USES.filter((use) => !have.has(use));
  if (missing.length === 0) return [];
  // Generated outside the transaction: RSA-3072 takes a while, and the lock should not wait on it.
  // The first keys are in use at once: active from an hour back, so an instance whose clock is a
  // little behind the one that made them finds them active too.
  const made = await Promise.all(missing.map((use) => generate(use, keys, now, now - HOUR, commonName)));
  return repo.inSamlKeyTransaction(store, async (trx) => {
    const present = new Set((await repo.listSamlKeys(trx)).map((r) => r.key_use));
    const rows = made.filter((r) => !present.has(r.key_use));
    await repo.insertSamlKeys(trx, rows);
    return rows.map((r) => r.kid);
  });
}

/** New keys for the given uses, published now, in use after the activation delay; the current ones retire then. */
export async function rotateSamlKeys(
  store: Store,
  keys: Keyring,
  uses: readonly SamlKeyUse[] = SAML_KEY_USES,
  { actor = SYSTEM, now = Date.now() }: Change = {},
  commonName = 'SAML identity provider',
): Promise<{ kid: string; use: SamlKeyUse; activatesAt: number }[]> {
  await ensureSamlKeys(store, keys, now, commonName);
  const activatesAt = now + SAML_KEY_TIMING.activationDelayMs;
  const rows = await Promise.all(uses.map((use) => generate(use, keys, now, activatesAt, commonName)));
  await repo.inSamlKeyTransaction(store, async (trx) => {
    await repo.insertSamlKeys(trx, rows);
    for (const row of rows) await repo.retireSamlKeys(trx, row.key_use, row.kid, activatesAt);
    const longest = Math.max(SAML_KEY_TIMING.signingGraceMs, SAML_KEY_TIMING.decryptionRetentionMs);
    await repo.deleteSamlKeysRetiredBefore(trx, now - longest);
    await recordAudit(trx, {
      action: 'saml_keys.rotate',
      actor,
      at: now,
      subject: rows.map((r) => r.kid).join(' '),
      details: { keys: rows.map((r) => ({ kid: r.kid, use: r.key_use })), activates_at: activatesAt },
    });
  });
  forget(store);
  return rows.map((r) => ({ kid: r.kid, use: r.key_use as SamlKeyUse, activatesAt }));
}

/**
 * How long before it signs a signing key rotated on schedule is in the metadata: the metadata's
 * validity (validUntil), so an SP that loaded it once by hand and honours validUntil has fetched the
 * new key too, and at least the activation delay of `saml keys rotate`.
 */
export const SAML_SCHEDULED_PUBLICATION_MS = Math.max(SAML_KEY_TIMING.validityMs, SAML_KEY_TIMING.activationDelayMs);

/**
 * The scheduled rotation of the signing key (KEY_ROTATION_DAYS, as for the OpenID Connect keys):
 * when the newest signing key is `rotationMs` old, a new one is published at once and signs
 * SAML_SCHEDULED_PUBLICATION_MS later, when the old one retires (it stays in the metadata
 * SAML_KEY_TIMING.signingGraceMs longer). The age is checked again under the SAML key lock, so of
 * instances that find it due at once one adds a key. Nothing happens before the first keys exist
 * (they are made on first use); the encryption and metadata keys change only by `saml keys rotate`.
 */
export async function rotateSamlSigningKeyIfDue(
  store: Store,
  keys: Keyring,
  rotationMs: number,
  now = Date.now(),
  commonName = 'SAML identity provider',
): Promise<{ kid: string; activatesAt: number } | undefined> {
  if (rotationMs <= 0) return undefined;
  const due = (rows: repo.SamlKeyRow[]) => {
    const newest = Math.max(...rows.filter((r) => r.key_use === 'signing').map((r) => r.created_at));
    return Number.isFinite(newest) && newest + rotationMs <= now;
  };
  if (!due(await repo.listSamlKeys(store.db))) return undefined;
  const activatesAt = now + SAML_SCHEDULED_PUBLICATION_MS;
  // Generated outside the lock (RSA-3072 takes a while); an instance that finds it done drops its key.
  const row = await generate('signing', keys, now, activatesAt, commonName);
  const added = await repo.inSamlKeyTransaction(store, async (trx) => {
    if (!due(await repo.listSamlKeys(trx))) return false;
    await repo.insertSamlKeys(trx, [row]);
    await repo.retireSamlKeys(trx, 'signing', row.kid, activatesAt);
    const longest = Math.max(SAML_KEY_TIMING.signingGraceMs, SAML_KEY_TIMING.decryptionRetentionMs);
    await repo.deleteSamlKeysRetiredBefore(trx, now - longest);
    await recordAudit(trx, {
      action: 'saml_keys.rotate',
      actor: SYSTEM,
      at: now,
      subject: row.kid,
      details: { keys: [{ kid: row.kid, use: 'signing' }], activates_at: activatesAt, scheduled: true },
    });
    return true;
  });
  if (!added) return undefined;
  forget(store);
  return { kid: row.kid, activatesAt };
}

/** Keys are read from the database at most this often per process; a rotation activates hours later. */
const RELOAD_MS = 10_000;

interface Loaded {
  at: number;
  keys: SamlKey[];
}

const loadedKeys = new WeakMap<Store, WeakMap<Keyring, Loaded>>();
/** Opened private keys by kid, per keyring (a key is never handed to a caller holding another secret). */
const opened = new WeakMap<Keyring, Map<string, KeyObject>>();

function forget(store: Store): void {
  loadedKeys.delete(store);
}

function openKey(keys: Keyring, row: repo.SamlKeyRow): KeyObject {
  let byKid = opened.get(keys);
  if (!byKid) opened.set(keys, (byKid = new Map<string, KeyObject>()));
  const known = byKid.get(row.kid);
  if (known) return known;
  const plain = open(keys.keyEncryption, row.private_key, samlKeyAad(row.kid));
  if (!plain)
    throw new Error(`SAML key ${row.kid} cannot be decrypted: IDP_SECRET differs from the one it was stored under`);
  const key = createPrivateKey(plain.toString('utf8'));
  byKid.set(row.kid, key);
  return key;
}

async function loadKeys(store: Store, keys: Keyring, commonName: string): Promise<SamlKey[]> {
  const cached = loadedKeys.get(store)?.get(keys);
  if (cached && Date.now() - cached.at < RELOAD_MS) return cached.keys;
  let rows = await repo.listSamlKeys(store.db);
  if (SAML_KEY_USES.some((use) => !rows.some((r) => r.key_use === use))) {
    await ensureSamlKeys(store, keys, Date.now(), commonName);
    rows = await repo.listSamlKeys(store.db);
  }
  const loaded = rows.map((row) => ({
    kid: row.kid,
    use: row.key_use as SamlKeyUse,
    privateKey: openKey(keys, row),
    certificate: row.certificate,
    activatesAt: row.activates_at,
    retiresAt: row.retired_at,
  }));
  let byKeyring = loadedKeys.get(store);
  if (!byKeyring) loadedKeys.set(store, (byKeyring = new WeakMap<Keyring, Loaded>()));
  byKeyring.set(keys, { at: Date.now(), keys: loaded });
  return loaded;
}

/** The active key of a use: the newest that has activated and not retired (keys come newest first). */
function active(all: SamlKey[], use: SamlKeyUse, now: number): SamlKey {
  const key = all.find((k) => k.use === use && k.activatesAt <= now && (k.retiresAt === null || k.retiresAt > now));
  if (!key) throw new Error(`no active SAML ${use} key`);
  return key;
}

/** The IdP's SAML keys as they stand at `now`; the first ones are created on first use. */
export async function samlKeys(
  store: Store,
  keys: Keyring,
  now = Date.now(),
  commonName = 'SAML identity provider',
): Promise<SamlKeySet> {
  const all = await loadKeys(store, keys, commonName);
  const within = (key: SamlKey, graceMs: number) => key.retiresAt === null || key.retiresAt + graceMs > now;
  return {
    signing: active(all, 'signing', now),
    published: all.filter((k) => k.use === 'signing' && within(k, SAML_KEY_TIMING.signingGraceMs)),
    metadata: active(all, 'metadata', now),
    decryption: all.filter((k) => k.use === 'encryption' && within(k, SAML_KEY_TIMING.decryptionRetentionMs)),
    encryption: all.filter((k) => k.use === 'encryption' && within(k, 0)),
  };
}

/** Every stored key, for `saml keys list`: no private parts. */
export async function listSamlKeys(store: Store): Promise<
  {
    kid: string;
    use: SamlKeyUse;
    certificate: string;
    createdAt: number;
    activatesAt: number;
    retiresAt: number | null;
  }[]
> {
  return (await repo.listSamlKeys(store.db)).map((r) => ({
    kid: r.kid,
    use: r.key_use as SamlKeyUse,
    certificate: r.certificate,
    createdAt: r.created_at,
    activatesAt: r.activates_at,
    retiresAt: r.retired_at,
  }));
}

/**
 * When the key in use of each use was created (epoch ms), from the stored rows without opening a
 * private key: for the key-age metric. Empty before the first keys were made.
 */
export async function activeSamlKeysCreatedAt(store: Store, now = Date.now()): Promise<Record<string, number>> {
  const created: Record<string, number> = {};
  // newest first, as in loadKeys: the first that has activated and not retired is the one in use
  for (const row of await repo.listSamlKeys(store.db)) {
    if (row.key_use in created || row.activates_at > now) continue;
    if (row.retired_at !== null && row.retired_at <= now) continue;
    created[row.key_use] = row.created_at;
  }
  return created;
}
