// Keys derived from the master secret, and the small primitives built on them.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, type Config } from './config.ts';

export interface Keyring {
  /** AES-256-GCM key for signing keys at rest */
  keyEncryption: Buffer;
  /** AES-256-GCM key for pagination cursors */
  cursor: Buffer;
  /** HMAC key for client secrets (a KeyObject: HMAC with one costs a fraction of HMAC with a Buffer) */
  clientSecret: KeyObject;
  /** keys for oidc-provider's signed cookies */
  cookies: string[];
  /** HMAC key for CSRF tokens */
  csrf: KeyObject;
  /** the CSRF key of the secret before a rotation, verifying only (IDP_SECRET_PREVIOUS) */
  previousCsrf?: KeyObject;
  /** secret of the DPoP nonces (RFC 9449 8), so every instance accepts every other's */
  dpopNonce: Buffer;
  /** AES-256-GCM key for webhook secrets and push streams' authorization headers at rest */
  eventSecrets: Buffer;
  /** AES-256-GCM key for LDAP directories' service account passwords at rest */
  directorySecrets: Buffer;
  /** AES-256-GCM key for console session cookies */
  consoleSession: Buffer;
  /** AES-256-GCM key for a SAML request waiting on the sign-in (the authorization request's state) */
  samlState: Buffer;
  /** HMAC key of SAML pairwise-id values */
  samlPairwise: KeyObject;
  /** AES-256-GCM key for upstream identity providers' client secrets and private keys at rest */
  upstreamSecrets: Buffer;
}

function derive(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), `idp:${purpose}`, 32));
}

/**
 * Keys whose results outlive the secret: client-secret hashes stay in the database and pairwise
 * ids are a user's identifier at a service provider, so neither may change when the master secret
 * is replaced. They are derived from the first secret; `secret rotate` keeps them in the database
 * sealed under the new one (src/store/kept-keys.ts), and the keyring takes them from there.
 */
export const KEPT_KEYS = { clientSecret: 'client-secret-hash', samlPairwise: 'saml-pairwise' } as const;
export type KeptKeyName = keyof typeof KEPT_KEYS;
export type KeptKeys = Partial<Record<KeptKeyName, Buffer>>;

/** The additional data a kept key is sealed with (under keyEncryption). */
export const keptKeyAad = (name: KeptKeyName) => `kept-key:${KEPT_KEYS[name]}`;

/** Keys of the secret before a rotation that open() also tries, keyed by the current key. */
const previousKeys = new WeakMap<Buffer, Buffer>();

export interface KeyringOptions {
  /** the secret before the last rotation: what it sealed still opens, what it signed still verifies */
  previous?: string | undefined;
  /** keys kept across rotations (KEPT_KEYS), opened from the database */
  kept?: KeptKeys;
}

export function keyring(secret: string, options: KeyringOptions = {}): Keyring {
  const { previous, kept = {} } = options;
  const sealing = (purpose: string) => {
    const key = derive(secret, purpose);
    if (previous !== undefined && previous !== secret) previousKeys.set(key, derive(previous, purpose));
    return key;
  };
  const cookies = [derive(secret, 'cookies').toString('base64url')];
  if (previous !== undefined && previous !== secret) cookies.push(derive(previous, 'cookies').toString('base64url'));
  return {
    keyEncryption: sealing('signing-key-encryption'),
    cursor: sealing('pagination-cursor'),
    clientSecret: createSecretKey(kept.clientSecret ?? derive(secret, KEPT_KEYS.clientSecret)),
    cookies,
    csrf: createSecretKey(derive(secret, 'csrf')),
    ...(previous !== undefined && previous !== secret
      ? { previousCsrf: createSecretKey(derive(previous, 'csrf')) }
      : {}),
    dpopNonce: derive(secret, 'dpop-nonce'),
    eventSecrets: sealing('event-secrets'),
    directorySecrets: sealing('directory-secrets'),
    consoleSession: sealing('console-session'),
    samlState: sealing('saml-state'),
    samlPairwise: createSecretKey(kept.samlPairwise ?? derive(secret, KEPT_KEYS.samlPairwise)),
    upstreamSecrets: sealing('upstream-secrets'),
  };
}

/** The kept keys' values under this keyring (what `secret rotate` stores when none are stored yet). */
export function keptKeyValues(keys: Keyring): Record<KeptKeyName, Buffer> {
  return { clientSecret: keys.clientSecret.export(), samlPairwise: keys.samlPairwise.export() };
}

export interface SecretSource {
  secret: string;
  generated: boolean;
  path?: string;
  /** the secret before the last rotation (IDP_SECRET_PREVIOUS or <DATA_DIR>/idp-secret.previous) */
  previous?: string;
}

export const SECRET_FILE = 'idp-secret';
export const PREVIOUS_SECRET_FILE = 'idp-secret.previous';

/** The previous secret: IDP_SECRET_PREVIOUS, else (a secret kept in DATA_DIR) the file beside it. */
function previousSecret(config: Config, fromFile: boolean): string | undefined {
  if (config.idpSecretPrevious !== undefined) return config.idpSecretPrevious;
  if (!fromFile) return undefined;
  const path = join(config.dataDir, PREVIOUS_SECRET_FILE);
  if (!existsSync(path)) return undefined;
  const previous = readFileSync(path, 'utf8').trim();
  if (previous.length < 32)
    throw new ConfigError('IDP_SECRET_PREVIOUS', `${path}: stored previous secret is too short; remove it`);
  return previous;
}

const withPrevious = (source: SecretSource, previous: string | undefined): SecretSource =>
  previous === undefined ? source : { ...source, previous };

/**
 * The configured secret, or (SQLite only) the one stored under DATA_DIR. Only the service
 * generates one, on first start; admin commands refuse to run without it rather than create a
 * second secret the database's keys were not sealed under.
 */
export function loadSecret(config: Config, options: { generate: boolean } = { generate: true }): SecretSource {
  if (config.idpSecret)
    return withPrevious({ secret: config.idpSecret, generated: false }, previousSecret(config, false));
  const path = join(config.dataDir, SECRET_FILE);
  const variable = config.storage.find((d) => d.holds === 'secret')?.variable ?? 'DATA_DIR';
  try {
    if (existsSync(path)) {
      const secret = readFileSync(path, 'utf8').trim();
      if (secret.length < 32)
        throw new ConfigError('IDP_SECRET', `${path}: stored secret is too short; remove it or set IDP_SECRET`);
      return withPrevious({ secret, generated: false, path }, previousSecret(config, true));
    }
    if (!options.generate)
      throw new Error(
        `no IDP_SECRET set and none stored at ${path}; set IDP_SECRET (or DATA_DIR), or start the service once to generate one`,
      );
    // The directory was checked by checkStorage() and is never created here.
    const secret = randomBytes(32).toString('base64url');
    writeFileSync(path, `${secret}\n`, { mode: 0o600, flag: 'wx' });
    chmodSync(path, 0o600);
    return { secret, generated: true, path };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code !== 'string' || !code.startsWith('E')) throw err;
    throw new ConfigError(
      variable,
      `cannot ${options.generate ? 'read or store' : 'read'} the secret file ${path} (${code}); make the directory writable, or set IDP_SECRET`,
    );
  }
}

/** Each key as a KeyObject, made once: a cipher made from raw bytes costs several times one made from a KeyObject. */
const keyObjects = new WeakMap<Buffer, KeyObject>();
function keyObjectOf(key: Buffer): KeyObject {
  let object = keyObjects.get(key);
  if (!object) keyObjects.set(key, (object = createSecretKey(key)));
  return object;
}

/** AES-256-GCM: iv(12) | tag(16) | ciphertext, base64url. aad binds the box to its use. */
export function seal(key: Buffer, plaintext: Buffer, aad = ''): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyObjectOf(key), iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url');
}

/**
 * Returns undefined for anything that is not an intact box sealed with this key and aad. During a
 * rotation of the master secret (IDP_SECRET_PREVIOUS), a box the previous secret's key sealed opens too.
 */
export function open(key: Buffer, box: string, aad = ''): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(box)) return undefined;
  const raw = Buffer.from(box, 'base64url');
  if (raw.length < 28) return undefined;
  const opened = openRaw(key, raw, aad);
  if (opened) return opened;
  const previous = previousKeys.get(key);
  return previous ? openRaw(previous, raw, aad) : undefined;
}

function openRaw(key: Buffer, raw: Buffer, aad: string): Buffer | undefined {
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyObjectOf(key), raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]);
  } catch {
    return undefined;
  }
}

export function hmac(key: KeyObject, value: string): string {
  return createHmac('sha256', key).update(value).digest('base64url');
}

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}
