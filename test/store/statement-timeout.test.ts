// A statement that runs out of time is answered as every other database outage, on every surface:
// 503 with Retry-After: 1 (the JSON API, SCIM, the sign-in pages, the authorization server with
// `temporarily_unavailable`), never a 500 and never the driver's message. On PostgreSQL a real
// statement_timeout (SQLSTATE 57014, DATABASE_STATEMENT_TIMEOUT_MS) fires while another session
// holds the tables locked; on SQLite, which has no statement timeout, the same answers come for a
// write lock held by another connection past the busy wait.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { buildApp } from '../../src/app.ts';
import { databaseTimeouts } from '../../src/config.ts';
import { keyring } from '../../src/crypto.ts';
import { createScimToken } from '../../src/directory/provisioning.ts';
import { openStore } from '../../src/store/index.ts';
import {
  basicAuth,
  clientToken,
  dialects,
  migratedDatabase,
  seedClient,
  seedOrg,
  seedUser,
  testConfig,
  TEST_SECRET,
} from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';

for (const dialect of dialects()) {
  describe(`a statement out of time or a database locked too long (${dialect})`, () => {
    it('is 503 with Retry-After: 1 on the JSON API, SCIM, the pages and the token endpoint', async () => {
      const database = await migratedDatabase(dialect);
      const config = testConfig(database.url, { DATABASE_STATEMENT_TIMEOUT_MS: '200' });
      const store = await openStore(config.databaseUrl, { timeouts: databaseTimeouts(config) });
      const keys = keyring(TEST_SECRET);
      let logged = '';
      const logStream = new PassThrough();
      logStream.on('data', (chunk) => (logged += chunk));
      const built = await buildApp({ config: { ...config, logLevel: 'warn' }, store, keys, logStream });
      let release = async () => {};
      try {
        await built.app.ready();
        await seedOrg({ store });
        const ada = await seedUser({ store }, 1, 'ada@example.org');
        const [passkey] = await seedPasskeys(store, 1, [ada.id], 1);
        const api = await seedClient({ store, keys }, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
        const token = await clientToken(built, api.clientId, api.secret, 'passkey.read passkey.delete');
        const scim = (await createScimToken(store, 1, 'hr')).token;
        // a client the service has not looked up yet (a looked-up one is cached)
        const fresh = await seedClient({ store, keys }, { name: 'Fresh', scopes: ['passkey.read'], orgs: [1] });

        // Another session holds what the requests need.
        if (dialect === 'postgres') {
          const other = new pg.Client({ connectionString: database.url });
          await other.connect();
          await other.query('begin');
          await other.query(
            'lock table users, passkeys, organizations, clients, scim_tokens, recovery_links in access exclusive mode',
          );
          release = async () => {
            await other.query('rollback');
            await other.end();
          };
        } else {
          const other = new DatabaseSync(database.url);
          other.exec('begin immediate');
          release = async () => {
            other.exec('rollback');
            other.close();
          };
        }

        const requests = {
          'passkey API': () =>
            built.app.inject({
              method: 'DELETE',
              url: `/2/passkey/1/${passkey}`,
              headers: { authorization: `Bearer ${token}` },
            }),
          SCIM: () =>
            built.app.inject({
              method: 'POST',
              url: '/scim/v2/Users',
              headers: { authorization: `Bearer ${scim}`, 'content-type': 'application/scim+json' },
              payload: {
                schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
                userName: 'bob@example.org',
                name: { givenName: 'Bob', familyName: 'B' },
                emails: [{ value: 'bob@example.org', primary: true }],
              },
            }),
          ...(dialect === 'postgres'
            ? {
                'recovery page': () =>
                  built.app.inject({ method: 'GET', url: '/recover/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }),
                'token endpoint': () =>
                  built.app.inject({
                    method: 'POST',
                    url: '/oauth/token',
                    headers: {
                      authorization: basicAuth(fresh.clientId, fresh.secret),
                      'content-type': 'application/x-www-form-urlencoded',
                    },
                    payload: 'grant_type=client_credentials&scope=passkey.read',
                  }),
              }
            : {}),
        };
        for (const [surface, send] of Object.entries(requests)) {
          const started = Date.now();
          const res = await send();
          assert.equal(res.statusCode, 503, `${surface}: ${res.statusCode} ${res.body}`);
          assert.equal(res.headers['retry-after'], '1', surface);
          assert.doesNotMatch(res.body, /statement timeout|canceling statement|database is locked|SQLITE/i, surface);
          assert.ok(Date.now() - started < 8000, `${surface} answered within the bound`);
          if (surface === 'token endpoint') assert.equal(res.json().error, 'temporarily_unavailable');
        }
        if (dialect === 'postgres')
          assert.ok(logged.includes('database statement timeout'), 'the log names the statement timeout');
        await release();
        release = async () => {};
        // and once the lock is gone, the same requests succeed
        const after = await requests['passkey API']();
        assert.equal(after.statusCode, 200, after.body);
      } finally {
        await release();
        await built.app.close();
        await store.close();
        await database.drop();
      }
    });
  });
}
