// Password hashes. New ones are argon2id from node:crypto (OWASP's parameters: 19 MiB, 2 passes,
// parallelism 1) as a PHC string, `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>` (unpadded
// base64). Verification dispatches on the stored format, so hashes of other schemes (this
// service's earlier `scrypt$N$r$p$salt$hash`, and those an import brings) keep working; a verdict
// says when the hash is not a current argon2id one, so the caller can replace it after a
// successful sign-in. Every hash and verification runs through one bounded queue per process
// (hashing-queue.ts), off the event loop, leaving libuv's other threads to token signing.
import { argon2, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { createHashingQueue, type HashingLimits, type HashingQueue } from './hashing-queue.ts';

/** The parameters of new hashes: memory in KiB, passes, lanes, and the sizes of salt and tag in bytes. */
export const ARGON2ID = { memory: 19_456, passes: 2, parallelism: 1, saltBytes: 16, tagBytes: 32 } as const;

/** What a stored hash may ask for at most: an imported hash cannot make one check cost more. */
const MAX_MEMORY_KIB = 262_144;
const MAX_PASSES = 16;
const MAX_PARALLELISM = 4;

export const DEFAULT_HASHING: HashingLimits = { concurrency: 2, maxWaiting: 32 };

let queue: HashingQueue = createHashingQueue(DEFAULT_HASHING);

/** Sets the process's bound on hashing at once (PASSWORD_HASH_CONCURRENCY, PASSWORD_HASH_QUEUE). */
export function limitPasswordHashing(limits: HashingLimits): void {
  queue = createHashingQueue(limits);
}

/** The process's hashing queue, for its gauges. */
export const passwordHashing = (): HashingQueue => queue;

interface Argon2Params {
  memory: number;
  passes: number;
  parallelism: number;
}

function deriveArgon2id(password: string, salt: Buffer, p: Argon2Params, tagLength: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    argon2('argon2id', { message: password.normalize('NFKC'), nonce: salt, tagLength, ...p }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

function deriveScrypt(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, 32, { N: n, r, p, maxmem: 64 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

/** A new argon2id hash of the password, as a PHC string. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(ARGON2ID.saltBytes);
  const { memory, passes, parallelism } = ARGON2ID;
  const key = await queue.run(() => deriveArgon2id(password, salt, { memory, passes, parallelism }, ARGON2ID.tagBytes));
  return `$argon2id$v=19$m=${memory},t=${passes},p=${parallelism}$${b64(salt)}$${b64(key)}`;
}

/** A stored hash, parsed: how to derive the key again, and whether it is a current argon2id hash. */
interface Parsed {
  expected: Buffer;
  derive(password: string): Promise<Buffer>;
  current: boolean;
}

const PHC_ARGON2ID =
  /^\$argon2id\$v=19\$m=(\d{1,7}),t=(\d{1,3}),p=(\d{1,2})\$([A-Za-z0-9+/]{11,64})\$([A-Za-z0-9+/]{16,128})$/;
const SCRYPT = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]{11,64})\$([A-Za-z0-9_-]{16,128})$/;

function parseArgon2id(stored: string): Parsed | undefined {
  const m = PHC_ARGON2ID.exec(stored);
  if (!m) return undefined;
  const [memory, passes, parallelism] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (memory > MAX_MEMORY_KIB || passes < 1 || passes > MAX_PASSES || parallelism < 1 || parallelism > MAX_PARALLELISM)
    return undefined;
  if (memory < 8 * parallelism) return undefined;
  const salt = Buffer.from(m[4]!, 'base64');
  const expected = Buffer.from(m[5]!, 'base64');
  return {
    expected,
    derive: (password) => deriveArgon2id(password, salt, { memory, passes, parallelism }, expected.length),
    current: memory >= ARGON2ID.memory && passes >= ARGON2ID.passes,
  };
}

function parseScrypt(stored: string): Parsed | undefined {
  const m = SCRYPT.exec(stored);
  if (!m) return undefined;
  const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
  // what the service wrote: a power of two no larger than its own cost, within scrypt's memory bound
  if (n < 2 || n > 1 << 15 || (n & (n - 1)) !== 0 || r < 1 || r > 16 || p !== 1) return undefined;
  const salt = Buffer.from(m[4]!, 'base64url');
  const expected = Buffer.from(m[5]!, 'base64url');
  return { expected, derive: (password) => deriveScrypt(password, salt, n, r, p), current: false };
}

/** The formats a stored hash may be in, tried in turn. */
const FORMATS: ((stored: string) => Parsed | undefined)[] = [parseArgon2id, parseScrypt];

function parse(stored: string): Parsed | undefined {
  for (const format of FORMATS) {
    const parsed = format(stored);
    if (parsed) return parsed;
  }
  return undefined;
}

// A fixed hash to verify against when the account does not exist, has no password or a hash in no
// known format, so every case costs one argon2id.
let decoy: Promise<Parsed> | undefined;
// A decoy refused by a full queue is made again next time, not kept as a refusal.
const decoyHash = () =>
  (decoy ??= hashPassword(randomBytes(16).toString('hex')).then(
    (h) => parse(h)!,
    (err: unknown) => {
      decoy = undefined;
      throw err;
    },
  ));

export interface PasswordVerdict {
  valid: boolean;
  /** the stored hash is not a current argon2id one: hash the password again and store that */
  outdated: boolean;
}

export async function verifyPassword(password: string, stored: string | null | undefined): Promise<PasswordVerdict> {
  const parsed = stored ? parse(stored) : undefined;
  const target = parsed ?? (await decoyHash());
  const actual = await queue.run(() => target.derive(password));
  const valid =
    parsed !== undefined && actual.length === target.expected.length && timingSafeEqual(actual, target.expected);
  return { valid, outdated: valid && !target.current };
}

export function validatePassword(password: string): string | undefined {
  if (password.length < 8) return 'password must be at least 8 characters';
  if (password.length > 1024) return 'password must be at most 1024 characters';
  return undefined;
}
