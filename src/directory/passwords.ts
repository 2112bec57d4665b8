// Password hashes. New ones are argon2id from node:crypto (OWASP's parameters: 19 MiB, 2 passes,
// parallelism 1) as a PHC string, `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>` (unpadded
// base64). Verification dispatches on the stored format, so hashes of other schemes (this
// service's earlier `scrypt$N$r$p$salt$hash`, and those an import brings) keep working; a verdict
// says when the hash is not a current argon2id one, so the caller can replace it after a
// successful sign-in. Every hash and verification runs through one bounded queue per process
// (hashing-queue.ts), off the event loop: node:crypto's on libuv's thread pool, bcrypt in worker
// threads (bcrypt-workers.ts), leaving libuv's other threads to token signing.
//
// The service's own hashes are of the NFKC-normalised password; an imported hash is of the password
// as its source system received it, so it is checked against the password as typed (UTF-8), never
// normalised. An argon2id hash in exactly the service's own shape may still be an import of the
// same parameters: with a password that NFKC changes, it is checked both ways, and a match only as
// typed is reported outdated (so the sign-in replaces it with the service's own).
//
// A check does the same work whether the account exists, has a password or an imported hash of the
// organization's costliest kind (verifyPassword, `costliest`): docs/sign-in.md, Timing.
import { argon2, createHash, pbkdf2, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { bcryptHash, sizeBcryptPool } from './bcrypt-workers.ts';
import { createHashingQueue, type HashingLimits, type HashingQueue } from './hashing-queue.ts';
import { inSpan } from '../http/tracing.ts';

/** The parameters of new hashes: memory in KiB, passes, lanes, and the sizes of salt and tag in bytes. */
export const ARGON2ID = { memory: 19_456, passes: 2, parallelism: 1, saltBytes: 16, tagBytes: 32 } as const;

/** What a stored hash may ask for at most: an imported hash cannot make one check cost more. */
const MAX_MEMORY_KIB = 262_144;
const MAX_PASSES = 16;
const MAX_PARALLELISM = 16;

export const DEFAULT_HASHING: HashingLimits = { concurrency: 2, maxWaiting: 32 };

let queue: HashingQueue = createHashingQueue(DEFAULT_HASHING);

/** Sets the process's bound on hashing at once (PASSWORD_HASH_CONCURRENCY, PASSWORD_HASH_QUEUE). */
export function limitPasswordHashing(limits: HashingLimits): void {
  queue = createHashingQueue(limits);
  sizeBcryptPool(limits.concurrency);
}

/** Derivations computed, by kind (format and parameters): what checks cost, for tests and gauges. */
const work = new Map<string, number>();
export const passwordWork = (): Map<string, number> => new Map(work);

/** The process's hashing queue, for its gauges. */
export const passwordHashing = (): HashingQueue => queue;

interface Argon2Params {
  memory: number;
  passes: number;
  parallelism: number;
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

/** A new argon2id hash of the password, as a PHC string. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(ARGON2ID.saltBytes);
  const { memory, passes, parallelism } = ARGON2ID;
  const key = await inSpan('password hash', { 'password.operation': 'hash' }, () =>
    queue.run(() => deriveArgon2id(password, salt, { memory, passes, parallelism }, ARGON2ID.tagBytes)),
  );
  return `$argon2id$v=19$m=${memory},t=${passes},p=${parallelism}$${b64(salt)}$${b64(key)}`;
}

/** A stored hash, parsed: how to derive the key again, and whether it is a current argon2id hash. */
interface Parsed {
  expected: Buffer;
  /** the key of the password as given (a string: NFKC-normalised first if the format says so) */
  derive(password: string): Promise<Buffer>;
  current: boolean;
  /** the service's own hash, of the NFKC-normalised password; false: imported, of the password as typed */
  own: boolean;
  /** an own-shape hash may be an import of the same parameters: its key of the password as typed */
  asTyped?: (password: string) => Promise<Buffer>;
  /** the format and its parameters, e.g. `bcrypt 12`: derivations of one kind cost the same */
  kind: string;
  /** a rough cost of one derivation, in microseconds of one core (to find the costliest kind) */
  cost: number;
}

/**
 * One format a stored hash may be in: `test` tells whether a hash claims to be in it, `parse` reads
 * it, or says (without the hash) why its parameters are refused.
 */
interface Format {
  name: string;
  test: RegExp;
  parse(stored: string): Parsed | string;
}

/** Bounds of the formats an import brings (docs/user-import.md): what one check may cost at most. */
export const BOUNDS = {
  bcryptCost: 12,
  pbkdf2Iterations: { sha1: 1_000_000, sha256: 1_000_000, sha512: 600_000 },
  /** scrypt: 128·N·r bytes of memory, and N·r·p blocks of work (passlib's default: N 2^16, r 8, p 1) */
  scryptMemory: 64 * 1024 * 1024,
  scryptWork: (1 << 16) * 8,
  /** argon2: memory (KiB) × passes */
  argon2Work: 262_144 * 3,
} as const;

const SCRYPT_MAXMEM = 96 * 1024 * 1024;

const B64 = '[A-Za-z0-9+/]';
/** passlib's "adapted base64": '.' for '+', no padding (its scrypt hashes use '+') */
const AB64 = '[A-Za-z0-9./]';
const AB64_OR_B64 = '[A-Za-z0-9./+]';
const fromAb64 = (s: string) => Buffer.from(s.replace(/\./g, '+'), 'base64');
/** Imported hashes were made of the password as typed, in UTF-8: no normalization. */
const utf8 = (password: string) => Buffer.from(password, 'utf8');

const promised = <T>(run: (done: (err: Error | null, value: T) => void) => void) =>
  new Promise<T>((resolve, reject) => run((err, value) => (err ? reject(err) : resolve(value))));

function deriveArgon2(
  algorithm: 'argon2id' | 'argon2i',
  message: string,
  nonce: Buffer,
  p: Argon2Params,
  tagLength: number,
): Promise<Buffer> {
  return promised((done) => argon2(algorithm, { message, nonce, tagLength, ...p }, done));
}

/** The service's own argon2id: of the NFKC-normalised password. */
function deriveArgon2id(password: string, salt: Buffer, p: Argon2Params, tagLength: number): Promise<Buffer> {
  return deriveArgon2('argon2id', password.normalize('NFKC'), salt, p, tagLength);
}

const deriveScrypt = (password: string | Buffer, salt: Buffer, n: number, r: number, p: number) =>
  promised<Buffer>((done) => scrypt(password, salt, 32, { N: n, r, p, maxmem: SCRYPT_MAXMEM }, done));

type Digest = 'sha1' | 'sha256' | 'sha512';
const DIGEST_BYTES: Record<Digest, number> = { sha1: 20, sha256: 32, sha512: 64 };

const argon2Format: Format = {
  name: 'argon2',
  test: /^\$argon2(id|i)\$/,
  parse(stored) {
    const m = new RegExp(
      `^\\$(argon2id|argon2i)\\$v=(\\d{1,3})\\$m=(\\d{1,7}),t=(\\d{1,3}),p=(\\d{1,2})\\$(${B64}{11,64})\\$(${B64}{16,128})$`,
    ).exec(stored);
    if (!m) return 'malformed argon2 hash (expected $argon2id$v=19$m=..,t=..,p=..$<salt>$<hash>)';
    const algorithm = m[1] as 'argon2id' | 'argon2i';
    if (m[2] !== '19') return `argon2 version ${m[2]} is not supported (only v=19)`;
    const [memory, passes, parallelism] = [Number(m[3]), Number(m[4]), Number(m[5])];
    if (memory > MAX_MEMORY_KIB) return `argon2 memory ${memory} KiB is above ${MAX_MEMORY_KIB}`;
    if (passes < 1 || passes > MAX_PASSES) return `argon2 passes ${passes} is not within 1-${MAX_PASSES}`;
    if (parallelism < 1 || parallelism > MAX_PARALLELISM)
      return `argon2 parallelism ${parallelism} is not within 1-${MAX_PARALLELISM}`;
    if (memory < 8 * parallelism) return `argon2 memory ${memory} KiB is below 8 × parallelism`;
    if (memory * passes > BOUNDS.argon2Work)
      return `argon2 memory × passes (${memory * passes}) is above ${BOUNDS.argon2Work}`;
    const salt = Buffer.from(m[6]!, 'base64');
    const expected = Buffer.from(m[7]!, 'base64');
    const params = { memory, passes, parallelism };
    const kind = `${algorithm} m=${memory},t=${passes},p=${parallelism}`;
    const cost = Math.round(memory * passes * 0.8);
    // what hashPassword writes; anything else was brought by an import
    const ownShape =
      algorithm === 'argon2id' &&
      memory === ARGON2ID.memory &&
      passes === ARGON2ID.passes &&
      parallelism === ARGON2ID.parallelism &&
      salt.length === ARGON2ID.saltBytes &&
      expected.length === ARGON2ID.tagBytes;
    return {
      expected,
      derive: ownShape
        ? (password) => deriveArgon2('argon2id', password.normalize('NFKC'), salt, params, expected.length)
        : (password) => deriveArgon2(algorithm, password, salt, params, expected.length),
      // an imported argon2 hash, whatever its parameters, is replaced by the service's own at the first
      // sign-in: of the normalised password, like every other, and no longer costlier than the rest
      current: ownShape,
      own: ownShape,
      ...(ownShape
        ? { asTyped: (password: string) => deriveArgon2('argon2id', password, salt, params, expected.length) }
        : {}),
      kind,
      cost,
    };
  },
};

/** This service's earlier scheme: `scrypt$N$r$p$salt$hash`, base64url. */
const ownScryptFormat: Format = {
  name: 'scrypt',
  test: /^scrypt\$/,
  parse(stored) {
    const m = /^scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]{11,64})\$([A-Za-z0-9_-]{16,128})$/.exec(stored);
    if (!m) return 'malformed scrypt hash';
    const [n, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
    // what the service wrote: a power of two no larger than its own cost, within scrypt's memory bound
    if (n < 2 || n > 1 << 15 || (n & (n - 1)) !== 0 || r < 1 || r > 16 || p !== 1)
      return 'scrypt parameters out of bounds';
    const salt = Buffer.from(m[4]!, 'base64url');
    const expected = Buffer.from(m[5]!, 'base64url');
    return {
      expected,
      derive: (password) => deriveScrypt(password.normalize('NFKC'), salt, n, r, p),
      current: false,
      own: true,
      kind: `scrypt N=${n},r=${r},p=${p}`,
      cost: Math.round(n * r * p * 0.4),
    };
  },
};

/** passlib's scrypt: `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<ab64 salt>$<ab64 hash>`. */
const passlibScryptFormat: Format = {
  name: 'scrypt',
  test: /^\$scrypt\$/,
  parse(stored) {
    const m = new RegExp(
      `^\\$scrypt\\$ln=(\\d{1,2}),r=(\\d{1,3}),p=(\\d{1,3})\\$(${AB64_OR_B64}{1,128})\\$(${AB64_OR_B64}{43})$`,
    ).exec(stored);
    if (!m) return 'malformed scrypt hash (expected $scrypt$ln=..,r=..,p=..$<salt>$<hash>)';
    const [ln, r, p] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (ln < 1 || r < 1 || p < 1) return 'scrypt ln, r and p must be at least 1';
    const n = 2 ** ln;
    if (128 * n * r > BOUNDS.scryptMemory) return `scrypt memory 128·N·r is above ${BOUNDS.scryptMemory} bytes`;
    if (n * r * p > BOUNDS.scryptWork) return `scrypt work N·r·p is above ${BOUNDS.scryptWork}`;
    const salt = fromAb64(m[4]!);
    const expected = fromAb64(m[5]!);
    return {
      expected,
      derive: (password) => deriveScrypt(utf8(password), salt, n, r, p),
      current: false,
      own: false,
      kind: `scrypt ln=${ln},r=${r},p=${p}`,
      cost: Math.round(n * r * p * 0.4),
    };
  },
};

/** bcrypt (`$2a$`, `$2b$`, `$2y$`), checked by bcryptjs in a worker thread: the same hash made again and compared. */
const bcryptFormat: Format = {
  name: 'bcrypt',
  test: /^\$2[abxy]?\$/,
  parse(stored) {
    const m = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/.exec(stored);
    if (!m) return 'malformed bcrypt hash (expected $2a$, $2b$ or $2y$, a two-digit cost and 53 characters)';
    const cost = Number(m[1]);
    if (cost < 4 || cost > BOUNDS.bcryptCost) return `bcrypt cost ${cost} is not within 4-${BOUNDS.bcryptCost}`;
    const salt = stored.slice(0, 29);
    return {
      expected: Buffer.from(stored),
      derive: async (password) => Buffer.from(await bcryptHash(password, salt)),
      current: false,
      own: false,
      kind: `bcrypt ${cost}`,
      cost: 2 ** cost * 80,
    };
  },
};

function pbkdf2Parsed(digest: Digest, iterations: number, salt: Buffer, expected: Buffer): Parsed | string {
  const bound = BOUNDS.pbkdf2Iterations[digest];
  if (iterations < 1 || iterations > bound) return `PBKDF2-${digest} iterations ${iterations} is not within 1-${bound}`;
  if (salt.length === 0) return 'PBKDF2 salt is empty';
  if (expected.length < 16 || expected.length > 64) return 'PBKDF2 hash must be 16 to 64 bytes';
  return {
    expected,
    derive: (password) =>
      promised<Buffer>((done) => pbkdf2(utf8(password), salt, iterations, expected.length, digest, done)),
    current: false,
    own: false,
    kind: `pbkdf2-${digest} ${iterations}`,
    cost: Math.round(iterations * (digest === 'sha512' ? 1.2 : 0.6)),
  };
}

/** Django: `pbkdf2_sha256$<iterations>$<salt>$<base64 hash>` (and pbkdf2_sha1); the salt is text. */
const djangoPbkdf2Format: Format = {
  name: 'pbkdf2',
  test: /^pbkdf2_sha(1|256)\$/,
  parse(stored) {
    const m = new RegExp(`^pbkdf2_(sha1|sha256)\\$(\\d{1,9})\\$([^$]{1,128})\\$(${B64}{20,88}={0,2})$`).exec(stored);
    if (!m) return 'malformed Django PBKDF2 hash (expected pbkdf2_sha256$<iterations>$<salt>$<hash>)';
    const digest = m[1] as Digest;
    const expected = Buffer.from(m[4]!, 'base64');
    if (expected.length !== DIGEST_BYTES[digest]) return `Django PBKDF2 hash must be ${DIGEST_BYTES[digest]} bytes`;
    return pbkdf2Parsed(digest, Number(m[2]), Buffer.from(m[3]!, 'utf8'), expected);
  },
};

/**
 * passlib: `$pbkdf2-sha256$<iterations>$<ab64 salt>$<ab64 hash>` (and -sha512; SHA-1 as `$pbkdf2$`
 * or `$pbkdf2-sha1$`). Keycloak's credentials are imported in this form, with their 64-byte hash.
 */
const passlibPbkdf2Format: Format = {
  name: 'pbkdf2',
  test: /^\$pbkdf2(-sha1|-sha256|-sha512)?\$/,
  parse(stored) {
    const m = new RegExp(`^\\$pbkdf2(-sha1|-sha256|-sha512)?\\$(\\d{1,9})\\$(${AB64}{1,172})\\$(${AB64}{22,86})$`).exec(
      stored,
    );
    if (!m) return 'malformed PBKDF2 hash (expected $pbkdf2-sha256$<iterations>$<salt>$<hash>)';
    const digest = (m[1]?.slice(1) ?? 'sha1') as Digest;
    return pbkdf2Parsed(digest, Number(m[2]), fromAb64(m[3]!), fromAb64(m[4]!));
  },
};

const LDAP_DIGESTS: Record<string, { digest: Digest; salted: boolean }> = {
  SHA: { digest: 'sha1', salted: false },
  SSHA: { digest: 'sha1', salted: true },
  SHA256: { digest: 'sha256', salted: false },
  SSHA256: { digest: 'sha256', salted: true },
  SHA512: { digest: 'sha512', salted: false },
  SSHA512: { digest: 'sha512', salted: true },
};

/** LDAP userPassword: `{SSHA}` base64(SHA-1(password ‖ salt) ‖ salt), and its SHA-2 and unsalted kin. */
const ldapFormat: Format = {
  name: 'ldap',
  test: /^\{S?SHA(256|512)?\}/i,
  parse(stored) {
    const m = new RegExp(`^\\{(S?SHA(?:256|512)?)\\}(${B64}{27,}={0,2})$`, 'i').exec(stored);
    if (!m || m[2]!.length > 200) return 'malformed LDAP hash (expected {SSHA} and base64)';
    const scheme = m[1]!.toUpperCase();
    const { digest, salted } = LDAP_DIGESTS[scheme]!;
    const bytes = Buffer.from(m[2]!, 'base64');
    const size = DIGEST_BYTES[digest];
    if (salted ? bytes.length < size + 4 || bytes.length > size + 64 : bytes.length !== size)
      return `{${scheme}} value has the wrong length`;
    const expected = bytes.subarray(0, size);
    const salt = bytes.subarray(size);
    return {
      expected,
      derive: async (password) => createHash(digest).update(utf8(password)).update(salt).digest(),
      current: false,
      own: false,
      kind: `{${scheme}}`,
      cost: 1,
    };
  },
};

/** The formats a stored hash may be in, tried in turn. */
const FORMATS: Format[] = [
  argon2Format,
  ownScryptFormat,
  passlibScryptFormat,
  bcryptFormat,
  djangoPbkdf2Format,
  passlibPbkdf2Format,
  ldapFormat,
];

/** The longest hash string accepted. */
const MAX_HASH_LENGTH = 512;

function read(stored: string): Parsed | string {
  if (stored.length > MAX_HASH_LENGTH) return `is longer than ${MAX_HASH_LENGTH} characters`;
  const format = FORMATS.find((f) => f.test.test(stored));
  if (!format) return 'is in no accepted format (bcrypt, PBKDF2, argon2, scrypt, LDAP {SSHA})';
  return format.parse(stored);
}

function parse(stored: string): Parsed | undefined {
  const parsed = read(stored);
  return typeof parsed === 'string' ? undefined : parsed;
}

/**
 * Why an existing hash brought by an import cannot be kept (an unknown or malformed format,
 * parameters beyond the bounds), or undefined when it can. The reason never includes the hash.
 */
export function passwordHashProblem(stored: string): string | undefined {
  const parsed = read(stored);
  return typeof parsed === 'string' ? parsed : undefined;
}

/** A rough cost of checking the hash (microseconds of one core); undefined when it is unreadable. */
export function passwordCheckCost(stored: string): number | undefined {
  return parse(stored)?.cost;
}

// A fixed hash of the service's own kind to verify against when the account does not exist, has no
// password or a hash in no known format.
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

export interface CheckOptions {
  /**
   * A hash of the costliest kind the organization still holds among imported hashes
   * (password-profile.ts): every check also does one derivation of that kind (against this hash
   * when the user's own is of another), so an account with an imported hash costs what any other
   * does.
   */
  costliest?: string | null;
}

/** One derivation of a check: the hash it is compared with, and the password as given to it. */
interface Step {
  target: Parsed;
  password: string;
  /** a match here counts (false: a decoy's) */
  real: boolean;
  /** a match here means the hash must be replaced */
  outdated: boolean;
}

/**
 * The derivations of the service's own kind: the password normalised (the service's own hashes),
 * and when NFKC changes it, as typed too (an import in the same shape). An unknown account does the
 * same two against the decoy.
 */
function ownSteps(target: Parsed, password: string, real: boolean): Step[] {
  const steps = [{ target, password, real, outdated: !target.current }];
  if (target.asTyped && password.normalize('NFKC') !== password)
    steps.push({ target: { ...target, derive: target.asTyped }, password, real, outdated: true });
  return steps;
}

export async function verifyPassword(
  password: string,
  stored: string | null | undefined,
  options: CheckOptions = {},
): Promise<PasswordVerdict> {
  const parsed = stored ? parse(stored) : undefined;
  const costliest = options.costliest ? parse(options.costliest) : undefined;
  // the decoy (made once per process) only where the user has no hash of the service's own
  const steps: Step[] = parsed?.own ? ownSteps(parsed, password, true) : ownSteps(await decoyHash(), password, false);
  if (parsed && !parsed.own) steps.push({ target: parsed, password, real: true, outdated: !parsed.current });
  else if (costliest && !costliest.own) steps.push({ target: costliest, password, real: false, outdated: false });
  const matches = await inSpan('password hash', { 'password.operation': 'verify' }, () =>
    queue.run(async () => {
      const found: boolean[] = [];
      // every step runs, whatever an earlier one found: the work does not depend on the answer
      for (const step of steps) {
        const actual = await step.target.derive(step.password);
        work.set(step.target.kind, (work.get(step.target.kind) ?? 0) + 1);
        const equal = actual.length === step.target.expected.length && timingSafeEqual(actual, step.target.expected);
        found.push(equal && step.real);
      }
      return found;
    }),
  );
  const matched = steps.filter((_, i) => matches[i]);
  const valid = matched.length > 0;
  return { valid, outdated: valid && matched.every((m) => m.outdated) };
}

export function validatePassword(password: string): string | undefined {
  if (password.length < 8) return 'password must be at least 8 characters';
  if (password.length > 1024) return 'password must be at most 1024 characters';
  return undefined;
}
