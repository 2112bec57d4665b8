// `backup <file>`, `backup verify <file>`, `restore <file>`: SQLite backups (docs/backup.md). They run
// without opening the store through the service's code: a backup reads the live file, a restore
// writes into a stopped service's data directory, and a verification needs no settings at all.
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Config } from '../../config.ts';
import { keyring, loadSecret, PREVIOUS_SECRET_FILE, SECRET_FILE } from '../../crypto.ts';
import { badRequest } from '../../errors.ts';
import { assertSecretMatches } from '../../oauth/keys.ts';
import { appVersion } from '../../package-files.ts';
import { openStore } from '../../store/index.ts';
import { advanceOutboxIds, restoreIdFloor } from '../../store/events.ts';
import {
  BackupError,
  backupSqlite,
  databaseInUse,
  installBackup,
  manifestPath,
  otherEntries,
  unknownMigrations,
  verifyBackup,
} from '../../store/backup.ts';
import { migrationNames } from '../../store/migrations.ts';
import type { BareCommandDef } from '../command.ts';

/** The SQLite file the settings name; PostgreSQL and :memory: are refused with the way to go. */
function sqliteFile(config: Config, what: string): string {
  if (config.dialect === 'postgres')
    throw badRequest(
      `${what} works on SQLite only; back up PostgreSQL with pg_dump or continuous archiving (docs/backup.md)`,
    );
  if (config.databaseUrl === ':memory:') throw badRequest(`DATABASE_URL=:memory: has no file to ${what}`);
  return resolve(config.databaseUrl);
}

/** Where the master secret lives: never in a backup. */
function secretLocation(config: Config): string {
  return config.idpSecret !== undefined
    ? 'the IDP_SECRET environment variable'
    : `the file ${resolve(join(config.dataDir, SECRET_FILE))}`;
}

function damaged(file: string, err: unknown): never {
  if (!existsSync(file)) throw badRequest(`${file} does not exist`);
  if (err instanceof BackupError) throw badRequest(`${file} is damaged: ${err.message}`);
  throw err;
}

export const backupCommands: BareCommandDef[] = [
  {
    bare: true,
    group: 'backup',
    name: '',
    summary:
      'copy the SQLite database while the service runs, with a manifest <file>.json (checksum, schema version); the master secret is not in it',
    args: [{ name: 'file', description: 'the backup to write (must not exist); its manifest is <file>.json' }],
    options: {},
    async run(ctx, _values, [file]) {
      const config = ctx.config();
      const source = sqliteFile(config, 'backup');
      const target = resolve(file!);
      let manifest;
      try {
        manifest = await backupSqlite(source, target, appVersion());
      } catch (err) {
        if (err instanceof BackupError) throw badRequest(err.message);
        throw err;
      }
      const secret = secretLocation(config);
      if (ctx.json)
        return {
          file: target,
          manifest: manifestPath(target),
          schema_version: manifest.schema_version,
          sha256: manifest.sha256,
          bytes: manifest.bytes,
          secret,
        };
      return [
        `backup ${target} (${manifest.bytes} bytes), manifest ${manifestPath(target)}`,
        `schema version ${manifest.schema_version}, sha256 ${manifest.sha256}`,
        `The master secret is NOT in the backup: it is ${secret}. Keep a copy of it apart from the backups;`,
        'without it a restored database cannot be used, and with it anyone holding a backup could read its signing keys.',
      ].join('\n');
    },
  },
  {
    bare: true,
    group: 'backup',
    name: 'verify',
    summary: 'check a backup: its manifest, size, SHA-256, SQLite integrity and schema version (exit 1 when damaged)',
    args: [{ name: 'file', description: 'the backup (its manifest <file>.json beside it)' }],
    options: {},
    async run(ctx, _values, [file]) {
      const path = resolve(file!);
      const verified = await verifyBackup(path).catch((err: unknown) => damaged(path, err));
      const newer = unknownMigrations(verified.migrations);
      const view = {
        file: path,
        schema_version: verified.manifest.schema_version,
        sha256: verified.manifest.sha256,
        bytes: verified.manifest.bytes,
        created_at: new Date(verified.manifest.created_at).toISOString(),
        restorable_by_this_release: newer.length === 0,
      };
      if (ctx.json) return view;
      return [
        `ok: ${path} is intact (schema version ${view.schema_version}, taken ${view.created_at}, sha256 ${view.sha256})`,
        ...(newer.length > 0
          ? [`note: it was taken by a newer release (${newer.join(', ')}); restore it with that one`]
          : []),
      ].join('\n');
    },
  },
  {
    bare: true,
    group: 'restore',
    name: '',
    summary:
      "restore a verified backup as a stopped service's SQLite database (DATABASE_URL / DATA_DIR); refuses a running service",
    args: [{ name: 'file', description: 'the backup (its manifest <file>.json beside it)' }],
    options: {
      force: { type: 'boolean', description: 'replace the database of a data directory that is not empty' },
    },
    async run(ctx, values, [file]) {
      const config = ctx.config();
      const target = sqliteFile(config, 'restore');
      const dir = dirname(target);
      const path = resolve(file!);
      const verified = await verifyBackup(path).catch((err: unknown) => damaged(path, err));
      const newer = unknownMigrations(verified.migrations);
      if (newer.length > 0)
        throw badRequest(
          `the backup's schema (${verified.manifest.schema_version}) is newer than this release's (${migrationNames().at(-1)}): restore it with the release that took it`,
        );
      if (databaseInUse(target))
        throw badRequest(`the database ${target} is open in another process: stop the service (every instance) first`);
      const secretHere =
        config.idpSecret === undefined && resolve(config.dataDir) === dir ? [SECRET_FILE, PREVIOUS_SECRET_FILE] : [];
      const present = await otherEntries(dir, secretHere);
      if (present.length > 0 && values.force !== true)
        throw badRequest(
          `the data directory ${dir} is not empty (${present.slice(0, 3).join(', ')}${present.length > 3 ? ', ...' : ''}); --force replaces its database`,
        );
      let secret: { secret: string; previous?: string } | undefined;
      try {
        secret = loadSecret(config, { generate: false });
      } catch {
        secret = undefined;
      }
      await installBackup(path, target, async (copy) => {
        const store = await openStore(copy, { migrate: false });
        try {
          if (secret !== undefined) {
            try {
              await assertSecretMatches(store, keyring(secret.secret, { previous: secret.previous }));
            } catch {
              throw badRequest(
                `the master secret in ${secretLocation(config)} does not open this backup's signing keys: put the secret kept with the backups there, then restore again`,
              );
            }
          }
          // Receivers of webhooks and SETs saw ids issued after the backup: new ones start above them.
          await advanceOutboxIds(store.db, 'sqlite', restoreIdFloor(Date.now()));
        } finally {
          await store.close();
        }
      });
      const view = {
        file: path,
        database: target,
        schema_version: verified.manifest.schema_version,
        sha256: verified.manifest.sha256,
        secret: secretLocation(config),
        secret_present: secret !== undefined,
      };
      if (ctx.json) return view;
      return [
        `restored ${path} as ${target} (schema version ${view.schema_version})`,
        secret !== undefined
          ? `The master secret in ${view.secret} opens its signing keys; the service can start.`
          : `No master secret is in ${view.secret}: put the one kept with the backups there before starting the service.`,
      ].join('\n');
    },
  },
];
