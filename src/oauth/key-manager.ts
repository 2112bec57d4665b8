// Keeps this instance's view of the signing keys current: reloads them every refresh interval
// (and on demand), and reports when the published set or the active keys change.
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { rotateSamlSigningKeyIfDue } from '../service-providers/saml-keys.ts';
import { ensureSigningKeys, loadKeySet, rotateSigningKeysIfDue, type KeySet, type KeyTiming } from './keys.ts';

export interface KeyManager {
  current(): KeySet;
  /** reloads from the database; resolves true when something changed */
  refresh(): Promise<boolean>;
  onChange(listener: (keys: KeySet) => void): void;
  stop(): void;
}

export function keyTiming(config: Config): KeyTiming {
  return {
    activationDelayMs: 2 * config.keyRefreshInterval * 1000,
    retentionMs: (Math.max(config.accessTokenTtl, config.idTokenTtl) + 300) * 1000,
  };
}

export async function startKeyManager(
  config: Config,
  store: Store,
  keys: Keyring,
  log: FastifyBaseLogger,
): Promise<KeyManager> {
  const timing = keyTiming(config);
  const created = await ensureSigningKeys(store, keys);
  if (created.length) log.info({ kids: created }, 'generated signing keys');
  let current = await loadKeySet(store, keys, timing);
  const listeners: ((k: KeySet) => void)[] = [];
  let inflight: Promise<boolean> | undefined;
  let lastRefresh = Date.now();

  const reload = async (): Promise<boolean> => {
    lastRefresh = Date.now();
    const next = await loadKeySet(store, keys, timing);
    if (next.fingerprint === current.fingerprint) return false;
    current = next;
    log.info({ active: next.active }, 'signing keys changed');
    for (const l of listeners) l(next);
    return true;
  };
  const refresh = () => {
    // at most one reload at a time, and on-demand reloads no more than once a second
    if (!inflight && Date.now() - lastRefresh >= 1000) inflight = reload().finally(() => (inflight = undefined));
    return inflight ?? Promise.resolve(false);
  };
  // The scheduled rotation (KEY_ROTATION_DAYS), checked with every refresh by every instance; one of
  // them rotates (rotateSigningKeysIfDue), and the others load its keys.
  const rotateIfDue = async () => {
    const added = await rotateSigningKeysIfDue(store, keys, timing, config.keyRotationDays * 86_400_000);
    if (added.length) log.info({ added }, 'signing keys rotated on schedule');
    // The SAML identity provider's signing key, on the same schedule (src/service-providers/saml-keys.ts).
    const saml = await rotateSamlSigningKeyIfDue(
      store,
      keys,
      config.keyRotationDays * 86_400_000,
      Date.now(),
      new URL(config.publicUrl).hostname,
    );
    if (saml) log.info({ saml }, 'SAML signing key rotated on schedule');
  };
  const timer = setInterval(() => {
    rotateIfDue()
      .catch((err) => log.error({ err }, 'scheduled signing key rotation failed'))
      .then(() => refresh())
      .catch((err) => log.error({ err }, 'signing key refresh failed'));
  }, config.keyRefreshInterval * 1000);
  timer.unref();

  return {
    current: () => current,
    refresh,
    onChange: (l) => listeners.push(l),
    stop: () => clearInterval(timer),
  };
}
