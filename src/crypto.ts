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

export function keyring(secret: string): Keyring {
  return {
    keyEncryption: derive(secret, 'signing-key-encryption'),
    cursor: derive(secret, 'pagination-cursor'),
    clientSecret: createSecretKey(derive(secret, 'client-secret-hash')),
    cookies: [derive(secret, 'cookies').toString('base64url')],
    csrf: createSecretKey(derive(secret, 'csrf')),
    dpopNonce: derive(secret, 'dpop-nonce'),
    eventSecrets: derive(secret, 'event-secrets'),
    directorySecrets: derive(secret, 'directory-secrets'),
    consoleSession: derive(secret, 'console-session'),
    samlState: derive(secret, 'saml-state'),
    samlPairwise: createSecretKey(derive(secret, 'saml-pairwise')),
    upstreamSecrets: derive(secret, 'upstream-secrets'),
  };
}

export interface SecretSource {
  secret: string;
  generated: boolean;
  path?: string;
}

/**
 * The configured secret, or (SQLite only) the one stored under DATA_DIR. Only the service
 * generates one, on first start; admin commands refuse to run without it rather than create a
 * second secret the database's keys were not sealed under.
 */
export function loadSecret(config: Config, options: { generate: boolean } = { generate: true }): SecretSource {
  if (config.idpSecret) return { secret: config.idpSecret, generated: false };
  const path = join(config.dataDir, 'idp-secret');
  const variable = config.storage.find((d) => d.holds === 'secret')?.variable ?? 'DATA_DIR';
  try {
    if (existsSync(path)) {
      const secret = readFileSync(path, 'utf8').trim();
      if (secret.length < 32)
        throw new ConfigError('IDP_SECRET', `${path}: stored secret is too short; remove it or set IDP_SECRET`);
      return { secret, generated: false, path };
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

/** AES-256-GCM: iv(12) | tag(16) | ciphertext, base64url. aad binds the box to its use. */
export function seal(key: Buffer, plaintext: Buffer, aad = ''): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64url');
}

/** Returns undefined for anything that is not an intact box sealed with this key and aad. */
export function open(key: Buffer, box: string, aad = ''): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(box)) return undefined;
  const raw = Buffer.from(box, 'base64url');
  if (raw.length < 28) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
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
