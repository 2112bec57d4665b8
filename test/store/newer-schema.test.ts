// Upgrading instances one at a time: while some instances already run a newer release, the others
// run this one against the database the newer release migrated. Here this release plays the older
// one: a migration it does not know (an expand step, as docs/architecture.md requires: a new table,
// a new NOT NULL column with a default) is applied and recorded first, and this release must still
// start, sign users in with their passkeys, issue tokens and serve the passkey API.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { registerPasskey, seedSignIns, signIn, type Target } from '../../bench/signin-flow.ts';
import {
  dialects,
  freshDatabase,
  seedClient,
  spawnService,
  TEST_SECRET,
  type ServiceProcess,
  type TestDatabase,
} from '../helpers.ts';

const NEWER = '999_newer_release';

for (const dialect of dialects()) {
  describe(`this release on a database a newer release migrated (${dialect})`, () => {
    let db: TestDatabase;
    let service: ServiceProcess | undefined;
    let store: Store | undefined;

    before(async () => {
      db = await freshDatabase(dialect);
      const first = await openStore(db.url);
      try {
        // What the newer release's migration did: only additions.
        await sql`alter table users add column nickname text not null default ''`.execute(first.db);
        await sql`create table newer_things (id bigint primary key, note text)`.execute(first.db);
        await sql`create index users_nickname on users(nickname)`.execute(first.db);
        await sql`insert into schema_migrations (name, timestamp) values (${NEWER}, ${new Date().toISOString()})`.execute(
          first.db,
        );
      } finally {
        await first.close();
      }
    });
    after(async () => {
      await service?.stop();
      await store?.close();
      await db?.drop();
    });

    it('starts, and signs in, issues tokens and serves the passkey API as before', async () => {
      service = await spawnService({ DATABASE_URL: db.url });
      assert.doesNotMatch(service.stderr(), /corrupted migrations|error/i);
      const target: Target = { url: service.url, publicUrl: service.url };
      store = await openStore(db.url);
      const keys = keyring(TEST_SECRET);
      const { rp, users } = await seedSignIns(store, keys, target.publicUrl, 2);
      for (const { user, recoveryUrl } of users) {
        await registerPasskey(target, user, recoveryUrl);
        const { claims } = await signIn(target, rp, user, 'passkey');
        assert.equal(claims.sub, user.sub);
      }
      const api = await seedClient({ store, keys }, { scopes: ['passkey.read'], orgs: [1] });
      const res = await fetch(`${target.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${api.clientId}:${api.secret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.read',
      });
      assert.equal(res.status, 200);
      const { access_token: token } = (await res.json()) as { access_token: string };
      const jwks = createLocalJWKSet(await (await fetch(`${target.url}/openid/jwks`)).json());
      await jwtVerify(token, jwks, { issuer: target.publicUrl });
      const list = await fetch(`${target.url}/2/passkey/1?eppn=${encodeURIComponent(users[0]!.user.eppn)}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(list.status, 200);
      assert.equal(((await list.json()) as unknown[]).length, 1);
      // Rows this release wrote took the newer column's default.
      const rows = await sql<{ nickname: string }>`select nickname from users`.execute(store.db);
      assert.deepEqual(new Set(rows.rows.map((r) => r.nickname)), new Set(['']));
    });

    it('still refuses a database with an unknown migration among the ones it knows', async () => {
      await service?.stop();
      service = undefined;
      await store?.close();
      store = undefined;
      const other = await openStore(db.url);
      try {
        await sql`insert into schema_migrations (name, timestamp) values ('0155_unknown', ${new Date().toISOString()})`.execute(
          other.db,
        );
      } finally {
        await other.close();
      }
      await assert.rejects(openStore(db.url), /corrupted migrations/);
    });
  });
}
