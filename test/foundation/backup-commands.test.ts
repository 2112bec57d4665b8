// `backup`, `backup verify` and `restore` refuse what they must: damaged backups (a flipped byte, a
// truncated file, a missing manifest, a file that is not SQLite), PostgreSQL, a backup of a newer
// schema, a secret that does not open the backup's keys; and they say where the master secret is.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { cli, TEST_SECRET } from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';
import { migrationNames } from '../../src/store/migrations.ts';

describe('backup and restore commands', () => {
  const root = mkdtempSync(join(tmpdir(), 'idp-backup-cmd-'));
  const data = join(root, 'data');
  const good = join(root, 'good.sqlite');
  /** the settings of a data directory whose secret lives in a file, as `npm start` leaves it */
  const at = (dir: string) => ({ DATA_DIR: dir, IDP_SECRET: '', DATABASE_URL: '' });
  const run = (args: string[], env: Record<string, string>) => cli('', args, '', env);

  before(async () => {
    mkdirSync(data);
    writeFileSync(join(data, 'idp-secret'), `${TEST_SECRET}\n`, { mode: 0o600 });
    // An organization and signing keys through the CLI: the database, sealed keys, audit records.
    const made = await run(['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example'], at(data));
    assert.equal(made.code, 0, made.err);
    const keys = await run(['keys', 'rotate'], at(data));
    assert.equal(keys.code, 0, keys.err);
    const { code, out, err } = await run(['backup', good], at(data));
    assert.equal(code, 0, err);
    assert.match(out, /The master secret is NOT in the backup: it is the file .*data\/idp-secret/);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it('writes the manifest beside the backup: checksum, schema version, release', () => {
    const manifest = JSON.parse(readFileSync(`${good}.json`, 'utf8')) as Record<string, unknown>;
    assert.equal(manifest.format, 'passkey-idp-sqlite-backup');
    assert.equal(manifest.file, 'good.sqlite');
    assert.equal(manifest.schema_version, migrationNames().at(-1));
    assert.equal(manifest.bytes, readFileSync(good).length);
    assert.match(String(manifest.sha256), /^[0-9a-f]{64}$/);
    assert.equal(manifest.app_version, JSON.parse(readFileSync('package.json', 'utf8')).version);
  });

  it('--version prints the release', async () => {
    const { code, out } = await run(['--version'], {});
    assert.equal(code, 0);
    assert.equal(out, JSON.parse(readFileSync('package.json', 'utf8')).version);
  });

  it('never overwrites a file, and refuses PostgreSQL and :memory: with the way to go', async () => {
    const again = await run(['backup', good], at(data));
    assert.equal(again.code, 1);
    assert.match(again.err, /already exists; a backup never overwrites a file/);
    const pg = await run(['backup', join(root, 'pg.sqlite')], {
      DATABASE_URL: 'postgres://idp@127.0.0.1:1/idp',
      IDP_SECRET: TEST_SECRET,
    });
    assert.equal(pg.code, 1);
    assert.match(pg.err, /SQLite only; back up PostgreSQL with pg_dump or continuous archiving \(docs\/backup\.md\)/);
    const restorePg = await run(['restore', good], {
      DATABASE_URL: 'postgres://idp@127.0.0.1:1/idp',
      IDP_SECRET: TEST_SECRET,
    });
    assert.equal(restorePg.code, 1);
    assert.match(restorePg.err, /docs\/backup\.md/);
    const memory = await run(['backup', join(root, 'm.sqlite')], { DATABASE_URL: ':memory:', IDP_SECRET: TEST_SECRET });
    assert.equal(memory.code, 1);
    assert.match(memory.err, /:memory: has no file/);
  });

  /** A copy of the good backup with its manifest, damaged by `harm`. */
  function damagedCopy(name: string, harm: (file: string) => void): string {
    const file = join(root, name);
    copyFileSync(good, file);
    copyFileSync(`${good}.json`, `${file}.json`);
    harm(file);
    return file;
  }

  const cases: [string, (file: string) => void, RegExp][] = [
    [
      'a flipped byte',
      (file) => {
        const bytes = readFileSync(file);
        bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
        writeFileSync(file, bytes);
      },
      /SHA-256 does not match the manifest/,
    ],
    ['a truncated file', (file) => truncateSync(file, 8192), /has 8192 bytes, its manifest says \d+ \(truncated/],
    ['a missing manifest', (file) => rmSync(`${file}.json`), /its manifest .*\.json is missing/],
    [
      'a manifest that is not one',
      (file) => writeFileSync(`${file}.json`, '{"format":"zip"}'),
      /is not a backup manifest/,
    ],
    [
      'a file that is not SQLite (and a manifest that matches it)',
      (file) => {
        writeFileSync(file, 'not a database at all\n');
        const manifest = JSON.parse(readFileSync(`${good}.json`, 'utf8')) as Record<string, unknown>;
        writeFileSync(
          `${file}.json`,
          JSON.stringify({
            ...manifest,
            bytes: 22,
            sha256: createHash('sha256').update('not a database at all\n').digest('hex'),
          }),
        );
      },
      /not a SQLite database/,
    ],
  ];
  for (const [index, [what, harm, message]] of cases.entries()) {
    it(`verify exits 1 for ${what}, and restore refuses it`, async () => {
      const file = damagedCopy(`bad-${index}.sqlite`, harm);
      const verified = await run(['backup', 'verify', file], {});
      assert.equal(verified.code, 1);
      assert.match(verified.err, /is damaged: /);
      assert.match(verified.err, message);
      const target = join(root, `restore-${index}`);
      mkdirSync(target);
      const restored = await run(['restore', file], at(target));
      assert.equal(restored.code, 1);
      assert.match(restored.err, message);
      assert.deepEqual(readdir(target), []);
    });
  }

  it('verify exits 0 for a good backup, 1 for a file that does not exist', async () => {
    const ok = await run(['backup', 'verify', good, '--json'], {});
    assert.equal(ok.code, 0, ok.err);
    assert.equal(JSON.parse(ok.out).restorable_by_this_release, true);
    const missing = await run(['backup', 'verify', join(root, 'none.sqlite')], {});
    assert.equal(missing.code, 1);
    assert.match(missing.err, /none\.sqlite does not exist/);
  });

  it('restore refuses a backup of a newer schema than this release knows', async () => {
    const newer = join(root, 'newer');
    mkdirSync(newer);
    copyFileSync(join(data, 'idp.sqlite'), join(newer, 'idp.sqlite'));
    const db = new DatabaseSync(join(newer, 'idp.sqlite'));
    db.prepare("insert into schema_migrations (name, timestamp) values ('999_from_the_future', '2030-01-01')").run();
    db.close();
    const file = join(root, 'newer.sqlite');
    assert.equal(
      (await run(['backup', file], { DATABASE_URL: join(newer, 'idp.sqlite'), IDP_SECRET: TEST_SECRET })).code,
      0,
    );
    const verified = await run(['backup', 'verify', file], {});
    assert.equal(verified.code, 0);
    assert.match(verified.out, /taken by a newer release \(999_from_the_future\)/);
    const target = join(root, 'restore-newer');
    mkdirSync(target);
    const restored = await run(['restore', file], at(target));
    assert.equal(restored.code, 1);
    assert.match(restored.err, /schema \(999_from_the_future\) is newer than this release's/);
    assert.deepEqual(readdir(target), []);
  });

  it('restore refuses a secret that does not open the backup, and says when none is there yet', async () => {
    const target = join(root, 'restore-secret');
    mkdirSync(target);
    writeFileSync(join(target, 'idp-secret'), `${'another secret, not the one kept'.padEnd(40, '!')}\n`);
    const wrong = await run(['restore', good], at(target));
    assert.equal(wrong.code, 1);
    assert.match(wrong.err, /does not open this backup's signing keys/);
    assert.deepEqual(readdir(target), ['idp-secret']);
    rmSync(join(target, 'idp-secret'));
    const none = await run(['restore', good], at(target));
    assert.equal(none.code, 0, none.err);
    assert.match(none.out, /No master secret is in the file .*idp-secret: put the one kept with the backups there/);
    writeFileSync(join(target, 'idp-secret'), `${TEST_SECRET}\n`, { mode: 0o600 });
    const store = await openStore(join(target, 'idp.sqlite'));
    try {
      const orgs = await store.db.selectFrom('organizations').select('realm').execute();
      assert.deepEqual(orgs, [{ realm: 'example.org' }]);
    } finally {
      await store.close();
    }
  });
});

function readdir(dir: string): string[] {
  return readdirSync(dir).sort();
}
