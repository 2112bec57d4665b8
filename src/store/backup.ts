// Backups of a SQLite database: an online, consistent copy with a manifest beside it, its
// verification, and its restoration into a stopped service's data directory (docs/backup.md).
import { DatabaseSync } from 'node:sqlite';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, openSync, readSync, statSync } from 'node:fs';
import { copyFile, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { migrationNames } from './migrations.ts';

/** What `<backup>.json` holds. */
export interface BackupManifest {
  format: 'passkey-idp-sqlite-backup';
  /** the backup file's name, without its directory (the manifest sits beside it) */
  file: string;
  bytes: number;
  sha256: string;
  /** the last migration applied to the copied database */
  schema_version: string;
  /** when the copy was taken, epoch milliseconds */
  created_at: number;
  /** the release that took it */
  app_version: string;
}

const FORMAT = 'passkey-idp-sqlite-backup';
const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** A refusal or a damaged backup: one line for the operator. */
export class BackupError extends Error {}

export function manifestPath(file: string): string {
  return `${file}.json`;
}

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  const handle = await open(file, 'r');
  try {
    for await (const chunk of handle.createReadStream()) hash.update(chunk as Buffer);
  } finally {
    await handle.close();
  }
  return hash.digest('hex');
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function temporaryName(target: string, purpose: string): string {
  return join(dirname(target), `.${basename(target)}.${purpose}-${randomBytes(6).toString('hex')}`);
}

/** The migrations recorded in a database file (opened read-only), in order. */
function appliedMigrations(db: DatabaseSync): string[] {
  const table = db.prepare("select name from sqlite_master where type = 'table' and name = 'schema_migrations'").get();
  if (!table) throw new BackupError('it holds no schema_migrations table: not a database of this service');
  return db
    .prepare('select name from schema_migrations order by name')
    .all()
    .map((r) => String(r.name));
}

function startsLikeSqlite(file: string): boolean {
  const fd = openSync(file, 'r');
  try {
    const head = Buffer.alloc(SQLITE_HEADER.length);
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(SQLITE_HEADER);
  } finally {
    closeSync(fd);
  }
}

/** Opens a copy read-only, checks every page and index, and reads its migrations. */
function inspect(file: string): { migrations: string[] } {
  if (!startsLikeSqlite(file)) throw new BackupError('it is not a SQLite database (its header is wrong)');
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(file, { readOnly: true });
    const problems = db
      .prepare('pragma integrity_check')
      .all()
      .map((r) => String(Object.values(r)[0]));
    if (problems.length !== 1 || problems[0] !== 'ok')
      throw new BackupError(`SQLite's integrity check fails: ${problems.slice(0, 3).join('; ')}`);
    return { migrations: appliedMigrations(db) };
  } catch (err) {
    if (err instanceof BackupError) throw err;
    throw new BackupError(`SQLite cannot read it: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    db?.close();
  }
}

/**
 * Copies the live database at `source` into `target` with VACUUM INTO: one read transaction, so a
 * consistent copy while the service goes on writing (WAL: readers and writers do not block each
 * other). Written under a temporary name and renamed, the manifest last: a backup without its
 * manifest is incomplete. Refuses an existing target.
 */
export async function backupSqlite(source: string, target: string, appVersion: string): Promise<BackupManifest> {
  if (!existsSync(source)) throw new BackupError(`there is no database at ${source}`);
  if (existsSync(target) || existsSync(manifestPath(target)))
    throw new BackupError(`${target} already exists; a backup never overwrites a file`);
  const dir = dirname(target);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new BackupError(`the directory ${dir} does not exist`);
  const partial = temporaryName(target, 'partial');
  const db = new DatabaseSync(source, { readOnly: true, timeout: 5000 });
  try {
    // created empty and private first: the copy holds password hashes and sealed secrets, and must
    // never be readable by others, not even while it is being written (SQLite fills an empty file)
    closeSync(openSync(partial, 'wx', 0o600));
    db.prepare('vacuum into ?').run(partial);
  } catch (err) {
    await rm(partial, { force: true });
    throw new BackupError(`cannot copy the database: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    db.close();
  }
  try {
    chmodSync(partial, 0o600);
    const { migrations } = inspect(partial);
    fsyncPath(partial);
    const manifest: BackupManifest = {
      format: FORMAT,
      file: basename(target),
      bytes: (await stat(partial)).size,
      sha256: await sha256(partial),
      schema_version: migrations.at(-1) ?? '',
      created_at: Date.now(),
      app_version: appVersion,
    };
    await rename(partial, target);
    const manifestPartial = temporaryName(target, 'manifest');
    await writeFile(manifestPartial, `${JSON.stringify(manifest, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
    fsyncPath(manifestPartial);
    await rename(manifestPartial, manifestPath(target));
    fsyncPath(dir);
    return manifest;
  } finally {
    for (const suffix of ['', '-wal', '-shm']) await rm(`${partial}${suffix}`, { force: true });
  }
}

function readManifestText(text: string, file: string): BackupManifest {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    throw new BackupError(`its manifest ${manifestPath(file)} is not JSON`);
  }
  const v = m as Record<string, unknown>;
  const ok =
    typeof m === 'object' &&
    m !== null &&
    v.format === FORMAT &&
    typeof v.file === 'string' &&
    Number.isSafeInteger(v.bytes) &&
    typeof v.sha256 === 'string' &&
    /^[0-9a-f]{64}$/.test(v.sha256) &&
    typeof v.schema_version === 'string' &&
    Number.isSafeInteger(v.created_at);
  if (!ok) throw new BackupError(`its manifest ${manifestPath(file)} is not a backup manifest of this service`);
  return m as BackupManifest;
}

export interface VerifiedBackup {
  manifest: BackupManifest;
  migrations: string[];
}

/** Throws BackupError naming the first thing wrong with a backup; else its manifest and migrations. */
export async function verifyBackup(file: string): Promise<VerifiedBackup> {
  if (!existsSync(file)) throw new BackupError(`${file} does not exist`);
  if (!statSync(file).isFile()) throw new BackupError(`${file} is not a file`);
  let text: string;
  try {
    text = await readFile(manifestPath(file), 'utf8');
  } catch {
    throw new BackupError(`its manifest ${manifestPath(file)} is missing (a backup is the file and its manifest)`);
  }
  const manifest = readManifestText(text, file);
  const bytes = (await stat(file)).size;
  if (bytes !== manifest.bytes)
    throw new BackupError(`it has ${bytes} bytes, its manifest says ${manifest.bytes} (truncated or changed)`);
  const digest = await sha256(file);
  if (digest !== manifest.sha256) throw new BackupError('its SHA-256 does not match the manifest (changed or damaged)');
  const { migrations } = inspect(file);
  if ((migrations.at(-1) ?? '') !== manifest.schema_version)
    throw new BackupError(
      `its schema version ${migrations.at(-1) ?? '(none)'} is not the manifest's ${manifest.schema_version}`,
    );
  return { manifest, migrations };
}

/** Migrations in the backup this code does not know: a backup of a newer release. */
export function unknownMigrations(migrations: string[]): string[] {
  const known = new Set(migrationNames());
  return migrations.filter((m) => !known.has(m));
}

/**
 * True when another process has the database open (a running service, a worker, an admin
 * command): such a connection keeps a shared lock in WAL mode, so an exclusive lock is refused at once.
 */
export function databaseInUse(file: string): boolean {
  if (!existsSync(file)) return false;
  const db = new DatabaseSync(file, { timeout: 0 });
  try {
    db.exec('pragma locking_mode = exclusive');
    db.exec('begin exclusive');
    db.exec('commit');
    return false;
  } catch (err) {
    const e = err as { errcode?: unknown };
    if (typeof e.errcode === 'number' && [5, 6].includes(e.errcode & 0xff)) return true;
    throw new BackupError(`cannot open the database ${file}: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    db.close();
  }
}

/** The directory's entries other than those named in `keep` (the secret file). */
export async function otherEntries(dir: string, keep: string[]): Promise<string[]> {
  return (await readdir(dir)).filter((name) => !keep.includes(name));
}

/**
 * Copies a verified backup into place as `target`: under a temporary name in the same directory,
 * flushed, then renamed over the target, after the target's WAL and shared-memory files are removed
 * (they belong to the database being replaced). `check` runs on the copy before it takes the place.
 */
export async function installBackup(file: string, target: string, check: (copy: string) => Promise<void>) {
  const partial = temporaryName(target, 'restore');
  try {
    await copyFile(file, partial);
    chmodSync(partial, 0o600);
    fsyncPath(partial);
    if ((await sha256(partial)) !== (await verifyBackup(file)).manifest.sha256)
      throw new BackupError('the copy differs from the backup (the disk changed it while copying)');
    await check(partial);
    for (const suffix of ['-wal', '-shm', '-journal']) await rm(`${target}${suffix}`, { force: true });
    await rename(partial, target);
    fsyncPath(dirname(target));
  } finally {
    for (const suffix of ['', '-wal', '-shm']) await rm(`${partial}${suffix}`, { force: true });
  }
}
