// The staff console's store functions on both databases: user search (prefixes of eppn, name,
// display name and e-mail, case, wildcards taken literally, limit, order, one organization only),
// the report lists (each kind, keyset continuation), and the report's kept counts (migration 010)
// following every writer of passkeys, a backfill of existing passkeys, and concurrent writers.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, freshDatabase, migratedDatabase, seedOrg, seedUser, type TestDatabase } from '../helpers.ts';
import { passkeyRow } from '../passkey-admin/fixtures.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { migrate } from '../../src/store/migrations.ts';
import { searchUsers } from '../../src/store/user-search.ts';
import {
  passkeyListPage,
  passkeysByModel,
  passkeyTotals,
  userListPage,
  userTotals,
  type PasskeyListKind,
  type UserListKind,
} from '../../src/store/reports.ts';
import {
  deleteOrganizationPasskey,
  deleteUserPasskey,
  deleteUserPasskeys,
  insertPasskeys,
  recordPasskeyUse,
} from '../../src/store/passkeys.ts';
import { deleteUser, insertUsers, updateUser } from '../../src/store/directory.ts';
import type { PasskeySpec } from '../passkey-admin/fixtures.ts';

const DAY = 86_400_000;
const NOW = Date.UTC(2025, 5, 1);
const CUTOFF = NOW - 180 * DAY;
const KEY = 'cb69481e-8ff7-4039-93ec-0a2729a154a8';
const PHONE = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';

/** What every report figure should be, counted from the rows themselves. */
async function recount(store: Store, orgId: number, cutoff: number) {
  const passkeys = await store.db.selectFrom('passkeys').selectAll().where('org_id', '=', orgId).execute();
  const users = await store.db.selectFrom('users').selectAll().where('org_id', '=', orgId).execute();
  const owners = new Set(passkeys.map((p) => p.user_id));
  const byModel = new Map<string, number>();
  for (const p of passkeys) byModel.set(p.aaguid, (byModel.get(p.aaguid) ?? 0) + 1);
  return {
    totals: {
      passkeys: passkeys.length,
      synced: passkeys.filter((p) => p.backup_eligible === 1).length,
      withoutUserVerification: passkeys.filter((p) => p.mfa_verified === 0).length,
      unusedSince: passkeys.filter((p) => (p.last_used_at ?? p.created_at) < cutoff).length,
      usersWithPasskey: owners.size,
    },
    models: [...byModel]
      .map(([aaguid, count]) => ({ aaguid, count }))
      .sort((a, b) => b.count - a.count || (a.aaguid < b.aaguid ? -1 : 1)),
    users: {
      users: users.length,
      noSignInMethod: users.filter((u) => u.password_hash === null && !owners.has(u.id)).length,
    },
    passkeyCount: new Map(users.map((u) => [u.id, passkeys.filter((p) => p.user_id === u.id).length])),
  };
}

async function assertReportMatches(store: Store, orgId: number, cutoff = CUTOFF) {
  const expected = await recount(store, orgId, cutoff);
  assert.deepEqual(await passkeyTotals(store.db, orgId, cutoff), expected.totals);
  assert.deepEqual(await passkeysByModel(store.db, orgId), expected.models);
  assert.deepEqual(await userTotals(store.db, orgId), expected.users);
  const kept = await store.db.selectFrom('users').select(['id', 'passkey_count']).where('org_id', '=', orgId).execute();
  assert.deepEqual(new Map(kept.map((u) => [u.id, Number(u.passkey_count)])), expected.passkeyCount);
}

function row(userId: number, orgId: number, spec: PasskeySpec & { synced?: boolean } = {}) {
  const r = passkeyRow(userId, orgId, spec);
  return spec.synced ? { ...r, backup_eligible: 1, backup_state: 1 } : r;
}

for (const dialect of dialects()) {
  describe(`console store: user search (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    const ctx = () => ({ store });
    const eppns = (hits: { eppn: string }[]) => hits.map((h) => h.eppn);
    const search = async (q: string, limit = 50) => eppns(await searchUsers(store.db, 1, q, limit));

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
      await seedOrg(ctx());
      await seedOrg(ctx(), 2, 'other.org', 'Other');
      const ada = await seedUser(ctx(), 1, 'ada@example.org', {
        name: 'Ada Lovelace',
        email: 'Ada.Lovelace@Mail.Example.com',
        password: 'correct horse battery',
      });
      await seedUser(ctx(), 1, 'adam@example.org', { name: 'Adam Smith', email: 'a.smith@example.org' });
      const bea = await seedUser(ctx(), 1, 'bea@example.org', { name: 'Beatrice Østby', email: 'bea@example.org' });
      await updateUser(store.db, bea.id, { display_name: 'Bea Østby' });
      await seedUser(ctx(), 1, 'zed@example.org', { name: 'Ada Zedd' });
      await seedUser(ctx(), 1, 'a_b@example.org', { name: 'Underscore' });
      await seedUser(ctx(), 1, 'axb@example.org', { name: 'Ex' });
      await seedUser(ctx(), 1, '100%@example.org', { name: '100% Sure' });
      await seedUser(ctx(), 1, '1000@example.org', { name: 'Thousand' });
      await seedUser(ctx(), 1, 'back@example.org', { name: 'Back\\slash' });
      await seedUser(ctx(), 1, 'backup@example.org', { name: 'Backup' });
      const off = await seedUser(ctx(), 1, 'off@example.org', { name: 'Offboarded' });
      await updateUser(store.db, off.id, { disabled_at: NOW });
      await seedUser(ctx(), 2, 'ada@other.org', { name: 'Ada Other', email: 'ada@example.org' });
      await insertPasskeys(store.db, [row(ada.id, 1), row(ada.id, 1, { synced: true }), row(bea.id, 1)]);
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    it('finds prefixes of eppn, name and e-mail, sorted by eppn, with passkey count and state', async () => {
      const hits = await searchUsers(store.db, 1, 'ada', 50);
      assert.deepEqual(eppns(hits), ['ada@example.org', 'adam@example.org', 'zed@example.org']);
      const [ada, adam] = hits;
      assert.equal(typeof ada!.id, 'number');
      assert.match(ada!.sub, /^[0-9a-f-]{36}$/);
      assert.deepEqual(
        { ...ada, id: 0, sub: '' },
        {
          id: 0,
          sub: '',
          eppn: 'ada@example.org',
          name: 'Ada Lovelace',
          display_name: null,
          email: 'ada.lovelace@mail.example.com',
          disabled_at: null,
          passkeys: 2,
        },
      );
      assert.equal(adam!.passkeys, 0);
      assert.deepEqual(await search('a.smith'), ['adam@example.org'], 'e-mail prefix');
      assert.deepEqual(await search('ada.love'), ['ada@example.org'], 'e-mail prefix');
      assert.deepEqual(await search('Ada Z'), ['zed@example.org'], 'name prefix, space included');
      assert.deepEqual(await search('beatrice'), ['bea@example.org'], 'name');
      assert.deepEqual(await search('bea ø'.toUpperCase()), ['bea@example.org'], 'display name');
      assert.deepEqual((await searchUsers(store.db, 1, 'off', 5))[0]!.disabled_at, NOW);
    });

    it('matches a prefix only, not a word inside', async () => {
      assert.deepEqual(await search('lovelace'), []);
      assert.deepEqual(await search('smith'), []);
      assert.deepEqual(await search('example'), []);
    });

    it('ignores case (and the spaces around the query)', async () => {
      for (const q of ['ADA', 'Ada', 'aDa', '  ada  '])
        assert.deepEqual(await search(q), ['ada@example.org', 'adam@example.org', 'zed@example.org'], q);
      assert.deepEqual(await search('ADA.LOVELACE@MAIL'), ['ada@example.org']);
      assert.deepEqual(await search('BEATRICE Ø'), ['bea@example.org']);
    });

    it('never returns users of another organization', async () => {
      assert.deepEqual(await search('ada@other'), []);
      assert.deepEqual(await search('ada other'), []);
      assert.deepEqual(eppns(await searchUsers(store.db, 2, 'ada', 50)), ['ada@other.org']);
      assert.deepEqual(eppns(await searchUsers(store.db, 3, 'ada', 50)), []);
    });

    it('takes LIKE wildcards and backslashes literally', async () => {
      assert.deepEqual(await search('a_'), ['a_b@example.org']);
      assert.deepEqual(await search('_'), []);
      assert.deepEqual(await search('%'), []);
      assert.deepEqual(await search('100%'), ['100%@example.org']);
      assert.deepEqual(await search('10%'), []);
      assert.deepEqual(await search('back\\'), ['back@example.org']);
      assert.deepEqual(await search('back'), ['back@example.org', 'backup@example.org']);
      assert.deepEqual(await search("'"), []);
    });

    it('returns at most limit, the first by eppn of all that match', async () => {
      assert.deepEqual(await search('a', 2), ['a_b@example.org', 'ada@example.org']);
      assert.deepEqual(await search('a', 3), ['a_b@example.org', 'ada@example.org', 'adam@example.org']);
      assert.deepEqual(await search('a', 50), [
        'a_b@example.org',
        'ada@example.org',
        'adam@example.org',
        'axb@example.org',
        'zed@example.org',
      ]);
      assert.deepEqual(await search('a', 0), []);
    });

    it('gives nothing for an empty or blank query, or one PostgreSQL could not store', async () => {
      assert.deepEqual(await search(''), []);
      assert.deepEqual(await search('   '), []);
      assert.deepEqual(await search('ada\u0000'), []);
      assert.deepEqual(await search('\u{10FFFF}'), []);
    });
  });

  describe(`console store: report lists and kept counts (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    const ctx = () => ({ store });
    const ids: Record<string, number> = {};
    let passkeys: { id: number; user: string; uv: boolean; synced: boolean; unused: boolean }[] = [];

    before(async () => {
      database = await migratedDatabase(dialect);
      store = await openStore(database.url);
      await seedOrg(ctx());
      await seedOrg(ctx(), 2, 'other.org', 'Other');
      for (const [eppn, password] of [
        ['ada@example.org', true],
        ['bea@example.org', false],
        ['cara@example.org', true],
        ['dan@example.org', false],
        ['eve@example.org', false],
      ] as const) {
        const u = await seedUser(ctx(), 1, eppn, password ? { password: 'correct horse battery' } : {});
        ids[eppn] = u.id;
      }
      const olav = await seedUser(ctx(), 2, 'olav@other.org');
      const specs = [
        { user: 'ada@example.org', uv: true, synced: true, lastUsed: NOW - DAY },
        { user: 'ada@example.org', uv: false, synced: false, lastUsed: NOW - 200 * DAY },
        { user: 'bea@example.org', uv: true, synced: false, lastUsed: null },
        { user: 'ada@example.org', uv: false, synced: true, lastUsed: NOW - 10 * DAY },
        { user: 'dan@example.org', uv: true, synced: true, lastUsed: NOW - 181 * DAY },
      ];
      for (const s of specs) {
        const [id] = await insertPasskeys(store.db, [
          row(ids[s.user]!, 1, {
            aaguid: s.synced ? PHONE : KEY,
            mfaVerified: s.uv,
            synced: s.synced,
            createdAt: NOW - 400 * DAY,
            lastUsedAt: s.lastUsed,
          }),
        ]);
        passkeys.push({ id: id!, user: s.user, uv: s.uv, synced: s.synced, unused: (s.lastUsed ?? 0) < CUTOFF });
      }
      // another organization's, made in between: never listed
      await insertPasskeys(store.db, [row(olav.id, 2, { mfaVerified: false, lastUsedAt: null }), row(olav.id, 2)]);
      const [late] = await insertPasskeys(store.db, [row(ids['eve@example.org']!, 1, { createdAt: NOW - DAY })]);
      passkeys.push({ id: late!, user: 'eve@example.org', uv: true, synced: false, unused: false });
    });
    after(async () => {
      await store.close();
      await database.drop();
    });

    async function walkPasskeys(kind: PasskeyListKind, limit: number) {
      const seen = [];
      let afterId = 0;
      for (;;) {
        const page = await passkeyListPage(store.db, 1, kind, { afterId, limit, cutoff: CUTOFF });
        assert.ok(page.length <= limit);
        seen.push(...page);
        if (page.length < limit) return seen;
        afterId = page.at(-1)!.id;
      }
    }

    it('lists each kind of passkey of the organization, by id, in keyset pages', async () => {
      const expected: Record<PasskeyListKind, typeof passkeys> = {
        all: passkeys,
        'without-uv': passkeys.filter((p) => !p.uv),
        unused: passkeys.filter((p) => p.unused),
        synced: passkeys.filter((p) => p.synced),
        'device-bound': passkeys.filter((p) => !p.synced),
      };
      for (const [kind, want] of Object.entries(expected) as [PasskeyListKind, typeof passkeys][]) {
        const whole = await walkPasskeys(kind, 100);
        assert.deepEqual(
          whole.map((p) => [p.id, p.eppn]),
          want.map((p) => [p.id, p.user]),
          kind,
        );
        for (const limit of [1, 2]) assert.deepEqual(await walkPasskeys(kind, limit), whole, `${kind} by ${limit}`);
      }
      const [first] = await passkeyListPage(store.db, 1, 'all', { afterId: 0, limit: 1, cutoff: CUTOFF });
      assert.deepEqual(
        { ...first },
        {
          id: passkeys[0]!.id,
          eppn: 'ada@example.org',
          label: 'Passkey',
          aaguid: PHONE,
          created_at: NOW - 400 * DAY,
          last_used_at: NOW - DAY,
          mfa_verified: 1,
          backup_eligible: 1,
        },
      );
      const last = passkeys.at(-1)!.id;
      assert.deepEqual(await passkeyListPage(store.db, 1, 'all', { afterId: last, limit: 10, cutoff: CUTOFF }), []);
      assert.deepEqual(await passkeyListPage(store.db, 3, 'all', { afterId: 0, limit: 10, cutoff: CUTOFF }), []);
    });

    it('counts a passkey never used as unused from when it was made', async () => {
      const page = await passkeyListPage(store.db, 1, 'unused', { afterId: 0, limit: 10, cutoff: NOW });
      assert.ok(page.some((p) => p.eppn === 'bea@example.org' && p.last_used_at === null));
      const early = await passkeyListPage(store.db, 1, 'unused', { afterId: 0, limit: 10, cutoff: NOW - 500 * DAY });
      assert.deepEqual(early, []);
    });

    it('lists users without a passkey and users with no way to sign in, in keyset pages', async () => {
      const walk = async (kind: UserListKind, limit: number) => {
        const seen = [];
        let afterId = 0;
        for (;;) {
          const page = await userListPage(store.db, 1, kind, { afterId, limit });
          seen.push(...page);
          if (page.length < limit) return seen;
          afterId = page.at(-1)!.id;
        }
      };
      const without = await walk('without-passkey', 1);
      assert.deepEqual(
        without.map((u) => u.eppn),
        ['cara@example.org'],
      );
      assert.deepEqual(
        { ...without[0] },
        { id: ids['cara@example.org'], eppn: 'cara@example.org', name: 'cara', email: null },
      );
      assert.deepEqual(await walk('no-sign-in-method', 1), []);
      // dan's only passkey goes: dan has no password, so no way to sign in either
      await deleteUserPasskeys(store.db, ids['dan@example.org']!);
      passkeys = passkeys.filter((p) => p.user !== 'dan@example.org');
      assert.deepEqual(
        (await walk('without-passkey', 1)).map((u) => u.eppn),
        ['cara@example.org', 'dan@example.org'],
      );
      assert.deepEqual(
        (await walk('no-sign-in-method', 1)).map((u) => u.eppn),
        ['dan@example.org'],
      );
      assert.deepEqual(await walk('without-passkey', 10), await walk('without-passkey', 1));
      assert.deepEqual(await userListPage(store.db, 2, 'no-sign-in-method', { afterId: 0, limit: 10 }), []);
    });

    it("keeps the report's counts through every writer of passkeys", async () => {
      await assertReportMatches(store, 1);
      await assertReportMatches(store, 2);
      const ada = ids['ada@example.org']!;
      const cara = ids['cara@example.org']!;
      // insert, one and many in one statement
      const added = await insertPasskeys(store.db, [
        row(cara, 1, { aaguid: KEY }),
        row(cara, 1, { aaguid: PHONE, synced: true }),
        row(cara, 1, { aaguid: 'a1a1a1a1-0000-4000-8000-00000000000a', mfaVerified: false }),
      ]);
      await assertReportMatches(store, 1);
      // a sign-in that finds the authenticator now backs up its passkeys (and one that changes nothing)
      assert.ok(await recordPasskeyUse(store.db, added[0]!, 0, true, NOW, true));
      await assertReportMatches(store, 1);
      assert.ok(await recordPasskeyUse(store.db, added[0]!, 0, true, NOW, true));
      assert.ok(await recordPasskeyUse(store.db, added[1]!, 0, true, NOW));
      await assertReportMatches(store, 1);
      // the deletions of the passkey API, the account page and offboarding
      assert.ok(await deleteOrganizationPasskey(store.db, 1, added[1]!));
      assert.equal(await deleteOrganizationPasskey(store.db, 2, added[2]!), undefined);
      await assertReportMatches(store, 1);
      assert.ok(await deleteUserPasskey(store.db, cara, added[2]!));
      await assertReportMatches(store, 1);
      await deleteUserPasskeys(store.db, cara);
      await assertReportMatches(store, 1);
      // in a transaction that rolls back: nothing counted
      await assert.rejects(
        store.db.transaction().execute(async (trx) => {
          await insertPasskeys(trx, [row(cara, 1), row(ada, 1)]);
          await deleteUserPasskeys(trx, ada);
          throw new Error('rolled back');
        }),
        /rolled back/,
      );
      await assertReportMatches(store, 1);
      // a user removed takes their passkeys along (a foreign key cascade)
      assert.ok(await deleteUser(store.db, ada));
      await assertReportMatches(store, 1);
      await assertReportMatches(store, 2);
      for (const cutoff of [0, NOW - 100 * DAY, NOW + DAY]) await assertReportMatches(store, 1, cutoff);
    });

    it('keeps the counts exact under concurrent writers', async () => {
      const eve = ids['eve@example.org']!;
      const bea = ids['bea@example.org']!;
      const made = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          store.db
            .transaction()
            .execute((trx) =>
              insertPasskeys(trx, [
                row(i % 2 ? eve : bea, 1, { aaguid: i % 3 ? KEY : PHONE, synced: i % 3 === 0 }),
                row(i % 2 ? bea : eve, 1, { aaguid: i % 3 ? PHONE : KEY }),
              ]),
            ),
        ),
      );
      await assertReportMatches(store, 1);
      await Promise.all([
        ...made.slice(0, 12).map(([a, b]) =>
          store.db.transaction().execute(async (trx) => {
            await deleteOrganizationPasskey(trx, 1, b!);
            await deleteOrganizationPasskey(trx, 1, a!);
          }),
        ),
        deleteUserPasskeys(store.db, eve),
      ]);
      await assertReportMatches(store, 1);
    });
  });

  describe(`console store: migration 010 counts the passkeys already there (${dialect})`, () => {
    it('backfills passkey_counts and each user’s passkey count', async () => {
      const database = await freshDatabase(dialect);
      const store = await openStore(database.url, { migrate: false });
      try {
        await migrate(store.db, dialect, '009_roles');
        await store.db
          .insertInto('organizations')
          .values({ id: 1, realm: 'example.org', name: 'Example', created_at: NOW })
          .execute();
        const people = ['ada', 'bea', 'cara'].map((n) => ({
          sub: `sub-${n}`,
          org_id: 1,
          eppn: `${n}@example.org`,
          name: n,
          email: null,
          nin: null,
          password_hash: n === 'cara' ? 'x' : null,
          photo_handle: null,
          created_at: NOW,
          updated_at: NOW,
        }));
        const [ada, bea] = await insertUsers(store.db, people);
        // before 010 there is no passkey_count column to read back: insert as the old schema had it
        await insertPasskeys(store.db, [
          row(ada!, 1, { aaguid: KEY }),
          row(ada!, 1, { aaguid: PHONE, synced: true, lastUsedAt: NOW }),
          row(bea!, 1, { aaguid: PHONE, synced: true, mfaVerified: false }),
        ]);
        assert.ok((await migrate(store.db, dialect)).includes('010_console'));
        await assertReportMatches(store, 1);
        assert.deepEqual(await passkeysByModel(store.db, 1), [
          { aaguid: PHONE, count: 2 },
          { aaguid: KEY, count: 1 },
        ]);
        assert.deepEqual(await userTotals(store.db, 1), { users: 3, noSignInMethod: 0 });
        assert.deepEqual(
          (await searchUsers(store.db, 1, 'a', 10)).map((h) => [h.eppn, h.passkeys]),
          [['ada@example.org', 2]],
        );
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}
