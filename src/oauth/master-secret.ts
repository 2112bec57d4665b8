// The keyring of a running service or admin command: derived from the master secret (and, during
// a rotation's transition, the previous one), with the keys kept across rotations opened from the
// database (src/crypto.ts, KEPT_KEYS).
import { KEPT_KEYS, keptKeyAad, keyring, open, type KeptKeyName, type KeptKeys, type Keyring } from '../crypto.ts';
import type { SecretSource } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { listKeptKeys } from '../store/kept-keys.ts';

export async function loadKeyring(store: Store, source: Pick<SecretSource, 'secret' | 'previous'>): Promise<Keyring> {
  const plain = keyring(source.secret, { previous: source.previous });
  const kept: KeptKeys = {};
  for (const row of await listKeptKeys(store.db)) {
    const name = (Object.keys(KEPT_KEYS) as KeptKeyName[]).find((n) => KEPT_KEYS[n] === row.name);
    if (!name) continue;
    const key = open(plain.keyEncryption, row.sealed, keptKeyAad(name));
    if (!key)
      throw new Error(
        'IDP_SECRET does not match the secret this database was set up with (its kept keys cannot be decrypted)',
      );
    kept[name] = key;
  }
  return Object.keys(kept).length === 0 ? plain : keyring(source.secret, { previous: source.previous, kept });
}
