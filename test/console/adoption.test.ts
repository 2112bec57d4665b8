// The adoption funnel of an organization's move (the report's `adoption` and `adoption_history`,
// the console's chart, the `idp_adoption_users` metric): a first sign-in is noted once, the day's
// figures are recorded as one row per organization and day however often they are recorded, the
// history covers 90 days, and migration 024 fills in who had signed in before it.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  clientToken,
  cookieBrowser,
  dialects,
  freshDatabase,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { passkeyRow } from '../passkey-admin/fixtures.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { insertRecoveryLink } from '../../src/store/recovery-links.ts';
import { insertInvitation } from '../../src/store/mail.ts';
import { findUserByEppn, insertUsers, type User } from '../../src/store/directory.ts';
import { adoptionHistory, dayOf, latestAdoption, recordAdoptionDay } from '../../src/store/adoption.ts';
import { openStore } from '../../src/store/index.ts';
import { migrate } from '../../src/store/migrations.ts';
import { recordAudit } from '../../src/audit/index.ts';
import { insertLdapDirectory, saveLdapEntry } from '../../src/store/ldap.ts';
import { grantRole } from '../../src/directory/roles.ts';

const PASSWORD = 'correct horse battery staple';
const DAY = 86_400_000;
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

for (const dialect of dialects()) {
  describe(`adoption funnel (${dialect})`, () => {
    let ctx: TestContext;
    let token = '';
    let ada: User, bea: User, cara: User, dan: User;
    const report = async (org = 1) => {
      const res = await ctx.app.inject({
        method: 'GET',
        url: `/2/report/${org}`,
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json();
    };
    async function signIn(eppn: string) {
      const b = cookieBrowser(ctx.app);
      const res = await b.post('/account/login', {
        _csrf: csrfOf((await b.get('/account')).body),
        username: eppn,
        password: PASSWORD,
      });
      assert.equal(res.statusCode, 303, res.body);
    }

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      ada = await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      bea = await seedUser(ctx, 1, 'bea@example.org', { password: PASSWORD });
      cara = await seedUser(ctx, 1, 'cara@example.org');
      dan = await seedUser(ctx, 1, 'dan@example.org');
      const olav = await seedUser(ctx, 2, 'olav@other.org', { password: PASSWORD });
      await insertPasskeys(ctx.store.db, [
        passkeyRow(ada.id, 1),
        passkeyRow(cara.id, 1),
        passkeyRow(cara.id, 1),
        passkeyRow(olav.id, 2),
      ]);
      // dan invited twice (a second invitation), bea once; a helpdesk's recovery link for cara is no invitation
      for (const user of [dan, dan, bea, cara]) {
        const linkId = await insertRecoveryLink(ctx.store.db, {
          token_hash: `hash-${user.eppn}-${Math.random()}`,
          user_id: user.id,
          org_id: 1,
          created_at: Date.now(),
          expires_at: Date.now() + 14 * DAY,
          used_at: null,
          revoked_at: null,
          created_by: 'operator:cli',
          delete_others: 0,
        });
        if (user !== cara)
          await insertInvitation(ctx.store.db, {
            org_id: 1,
            user_id: user.id,
            recovery_link_id: linkId,
            invited_at: Date.now(),
            invited_by: 'operator:cli',
            remind_after_ms: null,
            reminded_at: null,
          });
      }
      const reader = await seedClient(ctx, { scopes: ['report.read'], orgs: [1, 2] });
      token = await clientToken(ctx, reader.clientId, reader.secret, 'report.read');
    });
    after(() => ctx.close());

    it('notes the first sign-in once, and counts each stage of the organization only', async () => {
      assert.deepEqual((await report()).adoption, {
        users: 4,
        invited: 2,
        signed_in: 0,
        with_passkey: 2,
        passkey_only: 1,
      });
      await signIn(ada.eppn);
      const first = (await findUserByEppn(ctx.store.db, ada.eppn))!.first_sign_in_at;
      assert.ok(first !== null && Math.abs(first - Date.now()) < 60_000, `first sign-in noted: ${String(first)}`);
      await new Promise((r) => setTimeout(r, 5));
      await signIn(ada.eppn);
      assert.equal(
        (await findUserByEppn(ctx.store.db, ada.eppn))!.first_sign_in_at,
        first,
        'a later one changes nothing',
      );
      await signIn(bea.eppn);
      const r = await report();
      assert.deepEqual(r.adoption, { users: 4, invited: 2, signed_in: 2, with_passkey: 2, passkey_only: 1 });
      assert.deepEqual((await report(2)).adoption, {
        users: 1,
        invited: 0,
        signed_in: 0,
        with_passkey: 1,
        passkey_only: 0,
      });
      assert.deepEqual(
        r.adoption_history,
        [{ day: dayOf(Date.now()), ...r.adoption }],
        'nothing recorded yet: today only',
      );
    });

    it('records one row per organization and day, and reports the last 90 days with today as it is now', async () => {
      const now = Date.now();
      await recordAdoptionDay(ctx.store.db, now - 100 * DAY); // outside the 90 days
      await recordAdoptionDay(ctx.store.db, now - 2 * DAY);
      await recordAdoptionDay(ctx.store.db, now - 2 * DAY); // again: the same row
      await recordAdoptionDay(ctx.store.db, now - DAY);
      const recorded = await adoptionHistory(ctx.store.db, 1, dayOf(now - 200 * DAY));
      assert.deepEqual(
        recorded.map((d) => d.day),
        [dayOf(now - 100 * DAY), dayOf(now - 2 * DAY), dayOf(now - DAY)],
      );
      await insertPasskeys(ctx.store.db, [passkeyRow(dan.id, 1)]);
      const r = await report();
      assert.deepEqual(
        r.adoption_history.map((d: { day: string }) => d.day),
        [dayOf(now - 2 * DAY), dayOf(now - DAY), dayOf(now)],
      );
      assert.equal(r.adoption_history.at(-1).passkey_only, 2, 'today is counted now, not as last recorded');
      assert.equal(r.adoption_history.at(-2).passkey_only, 1);
    });

    it('exposes the last recorded figures as a metric per organization and stage', async () => {
      await recordAdoptionDay(ctx.store.db, Date.now());
      const latest = await latestAdoption(ctx.store.db);
      assert.deepEqual(
        latest.map((l) => [l.org_id, l.day]),
        [
          [1, dayOf(Date.now())],
          [2, dayOf(Date.now())],
        ],
      );
      const res = await ctx.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /idp_adoption_users\{org_id="1",stage="users"\} 4\n/);
      assert.match(res.body, /idp_adoption_users\{org_id="1",stage="passkey_only"\} 2\n/);
      assert.match(res.body, /idp_adoption_users\{org_id="2",stage="with_passkey"\} 1\n/);
    });
    it('counts a user who signs in with their LDAP directory password as having a password, not passkey-only', async () => {
      const before = (await report()).adoption;
      const directory = async (passwordCheck: 0 | 1) =>
        insertLdapDirectory(ctx.store.db, {
          org_id: 1,
          url: 'ldap://127.0.0.1:1',
          starttls: 0,
          ca_pem: null,
          bind_dn: 'cn=idp,dc=example,dc=org',
          bind_password: '',
          base_dn: 'dc=example,dc=org',
          filter: '(objectClass=person)',
          mapping: '{}',
          groups_base_dn: null,
          sync_every_ms: null,
          on_missing: 'disable',
          password_check: passwordCheck,
          created_at: Date.now(),
          created_by: 'operator:cli',
          runs_since_full: 0,
        });
      const checking = await directory(1);
      const syncOnly = await directory(0);
      // eve: the directory checks her password; fay: synced, but her directory checks none;
      // gus: staff, who never sign in with a directory's password
      const [eve, fay, gus] = [
        await seedUser(ctx, 1, 'eve@example.org'),
        await seedUser(ctx, 1, 'fay@example.org'),
        await seedUser(ctx, 1, 'gus@example.org'),
      ];
      await insertPasskeys(ctx.store.db, [passkeyRow(eve.id, 1), passkeyRow(fay.id, 1), passkeyRow(gus.id, 1)]);
      for (const [user, directoryId] of [
        [eve, checking],
        [fay, syncOnly],
        [gus, checking],
      ] as const)
        await saveLdapEntry(ctx.store.db, {
          directory_id: directoryId,
          external_id: `x-${user.eppn}`,
          user_id: user.id,
          dn: `uid=${user.eppn},dc=example,dc=org`,
          disabled_by_directory: 0,
          digest: null,
        });
      await grantRole(ctx.store, { eppn: gus.eppn, role: 'helpdesk', orgId: 1 });
      const after = (await report()).adoption;
      assert.equal(after.with_passkey, before.with_passkey + 3);
      assert.equal(after.passkey_only, before.passkey_only + 2, 'fay and gus; eve has her directory password');
      await recordAdoptionDay(ctx.store.db, Date.now());
      const [recorded] = await adoptionHistory(ctx.store.db, 1, dayOf(Date.now()));
      assert.equal(recorded!.passkey_only, after.passkey_only, 'the recorded day counts the same');
    });
  });

  describe(`adoption funnel: migration 024 notes who had signed in before it (${dialect})`, () => {
    it('from the audit trail, else from a passkey used', async () => {
      const database = await freshDatabase(dialect);
      const store = await openStore(database.url, { migrate: false });
      try {
        await migrate(store.db, dialect, '021_federation_signed_requests');
        const at = Date.UTC(2026, 0, 5);
        await store.db
          .insertInto('organizations')
          .values({ id: 1, realm: 'example.org', name: 'Ex', created_at: at })
          .execute();
        const [ada, bea, cara] = await insertUsers(
          store.db,
          ['ada', 'bea', 'cara'].map((n) => ({
            sub: `sub-${n}`,
            org_id: 1,
            eppn: `${n}@example.org`,
            name: n,
            email: null,
            nin: null,
            password_hash: null,
            photo_handle: null,
            created_at: at,
            updated_at: at,
          })),
        );
        for (const when of [at + 3 * DAY, at + DAY, at + 2 * DAY])
          await recordAudit(store.db, {
            action: 'signin.succeeded',
            actor: { type: 'user', id: 'ada@example.org' },
            at: when,
            orgId: 1,
            eppn: 'ada@example.org',
          });
        await recordAudit(store.db, {
          action: 'signin.failed',
          actor: { type: 'user', id: 'cara@example.org' },
          at,
          orgId: 1,
          eppn: 'cara@example.org',
        });
        await insertPasskeys(store.db, [passkeyRow(bea!, 1, { lastUsedAt: at + 5 * DAY }), passkeyRow(cara!, 1)]);
        assert.ok((await migrate(store.db, dialect)).includes('024_adoption'));
        const first = async (id: number) =>
          (await store.db.selectFrom('users').select('first_sign_in_at').where('id', '=', id).executeTakeFirstOrThrow())
            .first_sign_in_at;
        assert.equal(await first(ada!), at + DAY, 'the earliest successful sign-in');
        assert.equal(await first(bea!), at + 5 * DAY, 'no record: the passkey used');
        assert.equal(await first(cara!), null, 'a failed sign-in and an unused passkey: never signed in');
      } finally {
        await store.close();
        await database.drop();
      }
    });
  });
}
