// Hashes made by independent implementations, for the tests of imported passwords: Debian's
// python3-passlib and python3-bcrypt (test/fixtures/passlib-hashes.py), run with Debian's own
// interpreter. When passlib has no argon2 backend (python3-argon2), the argon2 hashes are made
// with node:crypto instead, and their names say so.
import { spawnSync } from 'node:child_process';
import { argon2Sync, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const PYTHON = process.env.HASH_PYTHON || '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../fixtures/passlib-hashes.py', import.meta.url));

/** Why the independent hashes cannot be made here (a skip reason), or false. */
export const passlibMissing: string | false =
  spawnSync(PYTHON, ['-c', 'import passlib, bcrypt']).status === 0
    ? false
    : 'python3-passlib and python3-bcrypt are not installed';

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

function nodeArgon2(type: 'argon2id' | 'argon2i', password: string): string {
  const nonce = randomBytes(16);
  const p = { memory: 65_536, passes: 3, parallelism: 4 };
  const tag = argon2Sync(type, { message: password, nonce, tagLength: 32, ...p });
  return `$${type}$v=19$m=${p.memory},t=${p.passes},p=${p.parallelism}$${b64(nonce)}$${b64(tag)}`;
}

/** Format name to hash of `password`; argon2 ones made by node:crypto are named `*_node`. */
export function independentHashes(password: string): Record<string, string> {
  const run = spawnSync(PYTHON, [SCRIPT, password], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`passlib-hashes.py failed: ${run.stderr}`);
  const hashes = JSON.parse(run.stdout) as Record<string, string>;
  if (!hashes.argon2id) {
    hashes.argon2id_node = nodeArgon2('argon2id', password);
    hashes.argon2i_node = nodeArgon2('argon2i', password);
  }
  return hashes;
}
