// The new users of a sync's batch are written together (provisionUsers, multi-row statements): the
// same rows, audit records, events and deliveries as one at a time, each entry that is refused
// rejected alone with the message it gets one at a time, and a write that fails because a user was
// written meanwhile rolled back and done one at a time, leaving nothing half-written.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { dialects, migratedDatabase, seedClient, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { hashPassword } from '../../src/directory/passwords.ts';
import { provisionUser, provisionUsers, type ProvisionedUser } from '../../src/directory/provisioning.ts';
import { addLdapDirectory } from '../../src/directory/ldap-directories.ts';
import { formatGuid } from '../../src/directory/ldap-client.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { insertStream, insertWebhook, PUSH, type StreamRow } from '../../src/store/events.ts';
import { grantOrganizations } from '../../src/store/clients.ts';
import { listLdapEntries } from '../../src/store/ldap.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { SSF_EVENT_TYPES } from '../../src/audit/events.ts';
import type { Actor } from '../../src/audit/index.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

const keys = keyring(TEST_SECRET);

/** A database with organization 1, two webhooks (one for every event, one for another type) and a push stream. */
async function database(dialect: 'sqlite' | 'postgres') {
  const db = await migratedDatabase(dialect);
  const store = await openStore(db.url);
  await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
  const at = Date.now();
  await insertWebhook(store.db, { orgId: 1, url: 'https://hooks.example.org/a', eventTypes: [], secret: 's', at });
  await insertWebhook(store.db, {
    ...{ orgId: 1, url: 'https://hooks.example.org/b', eventTypes: ['user.deleted'], secret: 's', at },
  });
  const { clientId } = await seedClient({ store, keys });
  await grantOrganizations(store.db, clientId, [1], 'admin');
  const stream = {
    ...{ id: 'stream-1', client_id: clientId, delivery_method: PUSH, endpoint_url: 'https://rx.example.org/ssf' },
    ...{ authorization_header: null, events_requested: JSON.stringify(Object.values(SSF_EVENT_TYPES)) },
    ...{ description: null, status: 'enabled', reason: null, all_subjects: 1, created_at: at, updated_at: at },
  };
  await insertStream(store.db, stream as StreamRow);
  return { db, store };
}

/** What creating users left in the database, without ids and subs (each sub named by its user's eppn). */
async function written(store: Store) {
  const users = await store.db.selectFrom('users').selectAll().orderBy('eppn').execute();
  const eppnOf = new Map(users.map((u) => [u.sub, u.eppn]));
  const events = await store.db.selectFrom('events').selectAll().orderBy('id').execute();
  const eventAt = new Map(events.map((e, i) => [Number(e.id), i]));
  const deliveries = await store.db.selectFrom('event_deliveries').selectAll().orderBy('id').execute();
  const audit = store.db
    .selectFrom('audit_events')
    .selectAll()
    .where('kind', 'in', ['user.add', 'password.set'])
    .orderBy('id');
  return {
    users: users.map(({ id: _id, sub, ...u }) => ({ ...u, sub: eppnOf.get(sub) })),
    audit: (await audit.execute()).map(({ id: _id, ...a }) => a),
    events: events.map(({ id: _id, data, ...e }) => {
      const d = JSON.parse(data) as { sub: string };
      return { ...e, data: { ...d, sub: eppnOf.get(d.sub) } };
    }),
    deliveries: deliveries.map(({ id: _id, event_id, ...d }) => ({ ...d, event: eventAt.get(Number(event_id)) })),
  };
}

for (const dialect of dialects()) {
  describe(`a sync's new users written together (${dialect})`, () => {
    it('writes the rows, audit records, events and deliveries that writing them one at a time writes', async () => {
      const now = Date.now();
      const change = { actor: { type: 'provisioning', id: 'ldap:1' } satisfies Actor, now };
      const hash = await hashPassword('a long enough passphrase 1');
      const inputs: ProvisionedUser[] = [
        {
          ...{ eppn: 'Ada@Example.org', name: 'Ada Lovelace' },
          columns: { name: 'Ada Lovelace', external_id: 'x-1', given_name: 'Ada', email: 'ada@example.org' },
        },
        {
          ...{ eppn: 'bob@example.org', name: 'Bob', passwordHash: hash },
          columns: { name: 'Bob', external_id: 'x-2', affiliation: 'staff member', email_primary: 1, title: 'Dr' },
        },
        { eppn: 'cy@example.org', name: 'Cy', columns: { name: 'Cy' } },
        // refused alone, as one at a time: an external id an input before it took, a realm of another organization
        { eppn: 'dee@example.org', name: 'Dee', columns: { name: 'Dee', external_id: 'x-1' } },
        { eppn: 'eve@elsewhere.org', name: 'Eve', columns: { name: 'Eve' } },
      ];
      const one = await database(dialect);
      const together = await database(dialect);
      try {
        const single: string[] = [];
        for (const input of inputs)
          await provisionUser(one.store, 1, input, change).then(
            (u) => single.push(u.eppn),
            (err: Error) => single.push(err.message),
          );
        const results = await together.store.db.transaction().execute((trx) => provisionUsers(trx, 1, inputs, change));
        assert.deepEqual(
          results.map((r) => (r instanceof Error ? r.message : r.eppn)),
          single,
        );
        assert.equal(single.filter((s) => s.endsWith('@example.org')).length, 3, JSON.stringify(single));
        const expected = await written(one.store);
        assert.equal(expected.audit.length, 4, 'user.add three times, password.set once');
        assert.equal(expected.deliveries.length, 4 + 1, 'the webhook for every event, and the stream for one');
        assert.deepEqual(await written(together.store), expected);
      } finally {
        for (const d of [one, together]) {
          await d.store.close();
          await d.db.drop();
        }
      }
    });
  });

  describe(`LDAP sync: a batch's new users (${dialect})`, () => {
    let slapd: Slapd;
    let db: TestDatabase;
    let store: Store;
    let users: ReturnType<typeof testUsers>;
    const COUNT = 60;
    before(async () => {
      users = testUsers(COUNT, true);
      slapd = await startSlapd({ users });
    });
    after(() => slapd.stop());

    const fresh = async () => {
      ({ db, store } = await database(dialect));
      const d = await addLdapDirectory(store, keys, {
        ...{ orgId: 1, url: slapd.url, bindDn: SERVICE_DN, bindPassword: SERVICE_PASSWORD, baseDn: PEOPLE },
        ...{ filter: '(objectClass=inetOrgPerson)', map: ['affiliation=employeeType', 'eppn=userPrincipalName'] },
      });
      return d.id;
    };
    const close = async () => {
      await store.close();
      await db.drop();
    };

    it('rejects alone an entry whose eppn is another user’s and one whose external id is taken; creates the rest', async () => {
      const id = await fresh();
      try {
        await provisionUser(store, 1, {
          eppn: 'user00010@example.org',
          name: 'Other',
          columns: { external_id: 'o-1' },
        });
        const taken = formatGuid(users[19]!.guid!);
        await provisionUser(store, 1, { eppn: 'holder@example.org', name: 'Holder', columns: { external_id: taken } });
        const s = await syncLdapDirectory(store, keys, id);
        assert.equal(s.created, COUNT - 2);
        assert.equal(s.rejected, 2);
        assert.deepEqual(
          s.rejections.map((r) => [r.dn, r.error]),
          [
            [`uid=user00010,${PEOPLE}`, "'user00010@example.org' already belongs to a user with another external id"],
            [`uid=user00020,${PEOPLE}`, `externalId '${taken}' already belongs to a user`],
          ],
        );
        assert.equal((await listLdapEntries(store.db, id)).length, COUNT - 2);
        assert.equal((await findUserByEppn(store.db, 'user00020@example.org')) ?? null, null);
        assert.equal((await findUserByEppn(store.db, 'user00010@example.org'))?.name, 'Other');
        const added = await store.db.selectFrom('audit_events').select('eppn').where('kind', '=', 'user.add').execute();
        assert.equal(added.length, COUNT - 2 + 2, 'one record per user created, none for the rejected entries');
      } finally {
        await close();
      }
    });

    it('gives each user it creates the records one at a time gives: audit record, event, deliveries, entry link', async () => {
      const id = await fresh();
      try {
        const s = await syncLdapDirectory(store, keys, id);
        assert.equal(s.created, COUNT);
        // the same user's records as provisionUser makes them, in another database
        const ldapUser = (await findUserByEppn(store.db, 'user00007@example.org'))!;
        const batch = await written(store);
        const other = await database(dialect);
        try {
          const fields = (
            JSON.parse(batch.audit.find((a) => a.eppn === ldapUser.eppn)!.details) as { fields: string[] }
          ).fields;
          assert.ok(fields.includes('external_id') && fields.includes('affiliation'), fields.join());
          const columns = Object.fromEntries([
            ['name', ldapUser.name],
            ...fields.map((f) => [f, ldapUser[f as keyof typeof ldapUser]]),
          ]) as ProvisionedUser['columns'];
          const change = {
            actor: { type: 'provisioning', id: `ldap:${id}` } satisfies Actor,
            now: Number(ldapUser.created_at),
          };
          await provisionUser(other.store, 1, { eppn: ldapUser.eppn, name: ldapUser.name, columns }, change);
          const single = await written(other.store);
          const of = (w: typeof single) => ({
            user: w.users.find((u) => u.eppn === ldapUser.eppn),
            audit: w.audit.filter((a) => a.eppn === ldapUser.eppn),
            events: w.events.filter((e) => e.subject === ldapUser.eppn),
            deliveries: w.deliveries
              .filter((d) => d.subject === ldapUser.eppn)
              .map(({ event: _e, ...d }) => d)
              .sort((a, b) => a.destination.localeCompare(b.destination)),
          });
          const expected = of(single);
          assert.equal(expected.audit.length, 1);
          assert.equal(expected.events.length, 1);
          assert.equal(expected.deliveries.length, 1, 'the webhook for every event only');
          assert.deepEqual(of(batch), expected);
        } finally {
          await other.store.close();
          await other.db.drop();
        }
        const entries = await listLdapEntries(store.db, id);
        assert.equal(entries.length, COUNT);
        assert.ok(entries.every((e) => e.digest !== null && e.disabled_by_directory === 0));
        const again = await syncLdapDirectory(store, keys, id, { full: true });
        assert.equal(again.unchanged, COUNT, 'the digests are those of the users as written');
      } finally {
        await close();
      }
    });

    /** every entry but the rejected one has its audit record, event, delivery and link, each once */
    async function writtenOnceEach(w: Awaited<ReturnType<typeof written>>, id: number) {
      assert.equal(w.audit.filter((a) => a.kind === 'user.add').length, COUNT - 1);
      assert.equal(new Set(w.audit.map((a) => a.eppn)).size, COUNT - 1);
      assert.equal(w.events.length, COUNT - 1);
      assert.equal(w.deliveries.length, COUNT - 1);
      const entries = await listLdapEntries(store.db, id);
      assert.equal(entries.length, COUNT - 1);
      assert.equal(new Set(entries.map((e) => e.user_id)).size, COUNT - 1);
    }

    it('a user written meanwhile fails the write together: rolled back, the entries written one at a time', async (t) => {
      // SQLite's transactions take the write lock as they begin: no one writes between the check and the write
      if (dialect !== 'postgres') return t.skip('PostgreSQL only');
      const id = await fresh();
      const other = await openStore(db.url);
      try {
        // another instance creates user00030 and has not committed when the sync checks and writes
        const trx = await other.db.startTransaction().execute();
        const row = { sub: randomUUID(), org_id: 1, eppn: 'user00030@example.org', name: 'Meanwhile' };
        await trx
          .insertInto('users')
          .values({
            ...row,
            email: null,
            nin: null,
            password_hash: null,
            photo_handle: null,
            created_at: 1,
            updated_at: 1,
          })
          .execute();
        const running = syncLdapDirectory(store, keys, id);
        // the sync's insert waits for that transaction on the eppn's unique index
        for (let i = 0; ; i++) {
          const { rows } = await sqlWaiting(other);
          if (rows[0]!.n > 0) break;
          assert.ok(i < 500, 'the sync never waited for the other writer');
          await new Promise((r) => setTimeout(r, 20));
        }
        await trx.commit().execute();
        const s = await running;
        assert.equal(s.created, COUNT - 1);
        assert.equal(s.rejected, 1);
        assert.deepEqual(s.rejections, [
          { dn: `uid=user00030,${PEOPLE}`, error: "user 'user00030@example.org' already exists" },
        ]);
        // nothing of the rolled-back write is left, nothing is written twice
        const w = await written(store);
        assert.equal(w.users.length, COUNT);
        assert.equal(w.users.find((u) => u.eppn === 'user00030@example.org')?.name, 'Meanwhile');
        await writtenOnceEach(w, id);
      } finally {
        await other.close();
        await close();
      }
    });

    it('a write together that the database refuses is rolled back, the entries written one at a time', async (t) => {
      if (dialect !== 'sqlite') return t.skip('SQLite only (a temporary trigger of the connection)');
      const id = await fresh();
      try {
        // a user with the eppn appears in the statement that writes user00030: the write fails on the unique eppn
        await sql`create temp trigger meanwhile before insert on users when new.eppn = 'user00030@example.org'
          begin
            insert into users (sub, org_id, eppn, name, created_at, updated_at)
              values ('meanwhile', 1, new.eppn, 'Meanwhile', 1, 1);
          end`.execute(store.db);
        const s = await syncLdapDirectory(store, keys, id);
        await sql`drop trigger temp.meanwhile`.execute(store.db);
        assert.equal(s.created, COUNT - 1);
        assert.deepEqual(s.rejections, [
          { dn: `uid=user00030,${PEOPLE}`, error: "user 'user00030@example.org' already exists" },
        ]);
        const w = await written(store);
        assert.equal(w.users.length, COUNT - 1);
        await writtenOnceEach(w, id);
      } finally {
        await close();
      }
    });
  });
}

/** Sessions of this database waiting for a lock. */
function sqlWaiting(store: Store) {
  return sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock'`.execute(store.db);
}
