// "exists" and "does not exist" must not be told apart by the work done: the same SQL statements,
// in the same order, whatever the answer.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import {
  dialects,
  migratedDatabase,
  testConfig,
  TEST_SECRET,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  type TestDatabase,
} from '../helpers.ts';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { sqliteDialect } from '../../src/store/sqlite.ts';
import type { DB } from '../../src/store/schema.ts';
import { buildApp, type App } from '../../src/app.ts';
import { grantOrganizations } from '../../src/clients/index.ts';
import { insertUserId } from '../../src/store/directory.ts';

for (const dialect of dialects()) {
  describe(`user-existence checks do the same work for present and absent users (${dialect})`, () => {
    let database: TestDatabase;
    let migrated: Store;
    let store: Store;
    let built: App;
    let statements: string[] = [];
    let current: string;
    let legacy: string;

    before(async () => {
      database = await migratedDatabase(dialect);
      migrated = await openStore(database.url);
      // The background jobs (event delivery, cache invalidation, SAML federation refresh) query on their own
      // clock: not the request's work. (A job's transaction shows as begin and commit around its statements,
      // and the delivery claim's as its set_config too.)
      const background =
        /"event_deliveries"|"invalidations"|"saml_federations"|^select set_config\('enable_sort'|^(begin( immediate)?|commit|rollback)$/;
      const log = (event: { level: string; query: { sql: string } }) =>
        void (background.test(event.query.sql) || statements.push(event.query.sql));
      const pgPool = () => {
        const pool = new pg.Pool({ connectionString: database.url, max: 2 });
        pool.on('error', () => {}); // as openStore does: the database is dropped with (force) at the end
        return pool;
      };
      const db = new Kysely<DB>({
        dialect: dialect === 'postgres' ? new PostgresDialect({ pool: pgPool() }) : sqliteDialect(database.url),
        log,
      });
      store = { db, dialect, ping: async () => true, close: () => db.destroy() };
      const config = testConfig(database.url);
      const keys = keyring(TEST_SECRET);
      built = await buildApp({ config, store, keys });
      await built.app.ready();
      const ctx = { store, keys };
      await seedOrg(ctx, 1, 'example.org');
      const alice = await seedUser(ctx, 1, 'alice@example.org', { email: 'alice@example.org', nin: '01017012345' });
      await insertUserId(store.db, alice.id, 'edugain', 'alice@edu.example');
      const client = await seedClient(ctx, {
        scopes: ['system-check-user-existence', 'gk_checkuser', 'gk_checkuser_systemlookup'],
      });
      await grantOrganizations(store, client.clientId, [1], 'checkuser');
      current = await clientToken(built, client.clientId, client.secret, 'system-check-user-existence');
      legacy = await clientToken(built, client.clientId, client.secret, 'gk_checkuser gk_checkuser_systemlookup');
    });
    after(async () => {
      await built.app.close();
      await store.close();
      await migrated.close();
      await database.drop();
    });

    async function work(url: string, token: string): Promise<{ exists: boolean; statements: string[] }> {
      statements = [];
      const res = await built.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.statusCode, 200, res.body);
      return { exists: res.json().exists, statements };
    }

    const pairs: [string, string, string, 'current' | 'legacy'][] = [
      [
        'eppn',
        `/userinfo/v1/exists/${encodeURIComponent('idp:alice@example.org')}`,
        `/userinfo/v1/exists/${encodeURIComponent('idp:nobody@example.org')}`,
        'current',
      ],
      ['nin', '/userinfo/v1/exists/nin%3A01017012345', '/userinfo/v1/exists/nin%3A99999999999', 'current'],
      [
        'secondary id',
        `/userinfo/v1/exists/${encodeURIComponent('edugain:alice@edu.example')}`,
        `/userinfo/v1/exists/${encodeURIComponent('edugain:x@edu.example')}`,
        'current',
      ],
      [
        'mail',
        '/userinfo/v1/exists-by-mail/example.org/alice%40example.org',
        '/userinfo/v1/exists-by-mail/example.org/nobody%40example.org',
        'current',
      ],
      ['legacy eppn', '/check_single/alice%40example.org', '/check_single/nobody%40example.org', 'legacy'],
    ];
    for (const [name, present, absent, kind] of pairs) {
      it(name, async () => {
        const token = kind === 'current' ? current : legacy;
        const yes = await work(present, token);
        const no = await work(absent, token);
        assert.equal(yes.exists, true);
        assert.equal(no.exists, false);
        // the client still enabled, the rate limit, the organizations, the lookup
        assert.equal(yes.statements.length, 4, yes.statements.join('\n'));
        assert.match(yes.statements[0]!, /from "clients"/);
        assert.deepEqual(no.statements, yes.statements);
      });
    }
  });
}
