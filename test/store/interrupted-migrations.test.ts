// A first start killed (SIGKILL) in the middle of a migration leaves the schema as it was, and the
// next start migrates and serves. Both databases.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { sql } from 'kysely';
import { dialects, freshDatabase, pickFreePort, spawnService, TEST_SECRET } from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';

const HALT = join(import.meta.dirname, 'halt-at-statement.ts');
// the second statement of migration 011: the first (external_id) has run when the process stops here
const INSIDE_011 = 'alter table users add column given_name';

/** Starts the service with the halting preload; resolves once it has stopped inside the migration. */
async function startAndKillInsideMigration(databaseUrl: string): Promise<void> {
  const port = await pickFreePort();
  const child = spawn(process.execPath, ['--import', HALT, 'src/main.ts', 'serve'], {
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: String(port),
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      IDP_SECRET: TEST_SECRET,
      DATABASE_URL: databaseUrl,
      HALT_AT_SQL: INSIDE_011,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    child.once('exit', (_code, signal) => resolve(signal)),
  );
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes(`HALTED AT ${INSIDE_011}`)) resolve();
    });
    child.once('exit', () => reject(new Error(`the service ended before the migration: ${stderr}`)));
  });
  child.kill('SIGKILL');
  assert.equal(await exited, 'SIGKILL');
}

for (const dialect of dialects()) {
  describe(`a start killed inside a migration (${dialect})`, () => {
    it('leaves no part of the migration behind, and the next start migrates and serves', async () => {
      const database = await freshDatabase(dialect);
      try {
        await startAndKillInsideMigration(database.url);

        // nothing of the interrupted run is left: no migration recorded, no table of the first one
        const store = await openStore(database.url, { migrate: false });
        try {
          const done = await sql<{ name: string }>`select name from schema_migrations`.execute(store.db);
          assert.deepEqual(done.rows, []);
          const tables = (await store.db.introspection.getTables()).map((t) => t.name);
          assert.ok(!tables.includes('users'), `tables after the kill: ${tables.join(', ')}`);
        } finally {
          await store.close();
        }

        const service = await spawnService({ DATABASE_URL: database.url });
        try {
          assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
        } finally {
          await service.stop();
        }
        const migrated = await openStore(database.url, { migrate: false });
        try {
          const done = await sql<{ name: string }>`select name from schema_migrations order by name`.execute(
            migrated.db,
          );
          assert.ok(done.rows.some((r) => r.name === '011_provisioning'));
          const users = await migrated.db.introspection.getTables().then((t) => t.find((x) => x.name === 'users'));
          const columns = users?.columns.map((c) => c.name) ?? [];
          for (const column of ['external_id', 'given_name', 'entitlement'])
            assert.ok(columns.includes(column), column);
        } finally {
          await migrated.close();
        }
      } finally {
        await database.drop();
      }
    });
  });
}
