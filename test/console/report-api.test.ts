// The organization report (/2/report/<org_id>): counts checked against a known organization, none
// of another organization's rows counted; refusals.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  clientToken,
  coseP256PublicKey,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import type { User } from '../../src/store/directory.ts';

const GOOGLE_PM = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';
const YUBIKEY = 'cb69481e-8ff7-4039-93ec-0a2729a154a8';
const DAY = 86_400_000;

for (const dialect of dialects()) {
  describe(`organization report API (${dialect})`, () => {
    let ctx: TestContext;
    const tokens = { read: '', other: '', wrong: '' };
    const call = (url: string, token: string | null = tokens.read) =>
      ctx.app.inject({ method: 'GET', url, headers: token === null ? {} : { authorization: `Bearer ${token}` } });

    async function passkey(
      user: User,
      aaguid: string,
      extra: { synced?: boolean; uv?: boolean; lastUsed?: number | null },
    ) {
      await insertPasskeys(ctx.store.db, [
        {
          user_id: user.id,
          org_id: user.org_id,
          credential_id: Buffer.from(`${user.eppn}-${aaguid}-${Math.random()}`),
          public_key: await coseP256PublicKey(),
          sign_count: 0,
          transports: '[]',
          label: 'Key',
          aaguid,
          backup_eligible: extra.synced ? 1 : 0,
          backup_state: extra.synced ? 1 : 0,
          mfa_verified: extra.uv === false ? 0 : 1,
          created_at: Date.now() - 400 * DAY,
          last_used_at: extra.lastUsed === undefined ? Date.now() : extra.lastUsed,
        },
      ]);
    }

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      const ada = await seedUser(ctx, 1, 'ada@example.org', { password: 'correct horse battery' });
      await seedUser(ctx, 1, 'bea@example.org');
      await seedUser(ctx, 1, 'cara@example.org', { password: 'correct horse battery' });
      const dan = await seedUser(ctx, 1, 'dan@example.org');
      const olav = await seedUser(ctx, 2, 'olav@other.org');
      await passkey(ada, GOOGLE_PM, { synced: true });
      await passkey(ada, YUBIKEY, { uv: false, lastUsed: Date.now() - 60 * DAY });
      await passkey(dan, GOOGLE_PM, { synced: true, lastUsed: null });
      await passkey(olav, YUBIKEY, {});
      const reader = await seedClient(ctx, { scopes: ['report.read'], orgs: [1] });
      const other = await seedClient(ctx, { scopes: ['report.read'], orgs: [2] });
      const wrong = await seedClient(ctx, { scopes: ['audit.read'], orgs: [1] });
      tokens.read = await clientToken(ctx, reader.clientId, reader.secret, 'report.read');
      tokens.other = await clientToken(ctx, other.clientId, other.secret, 'report.read');
      tokens.wrong = await clientToken(ctx, wrong.clientId, wrong.secret, 'audit.read');
    });
    after(() => ctx.close());

    it("counts the organization's users and passkeys, and nothing of another organization", async () => {
      const res = await call('/2/report/1?unused_days=30');
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), {
        org_id: 1,
        users: 4,
        users_with_passkey: 2,
        coverage_percent: 50,
        users_without_sign_in_method: 1,
        passkeys: 3,
        synced: 2,
        device_bound: 1,
        without_user_verification: 1,
        unused_days: 30,
        unused: 2,
        by_model: [
          { aaguid: GOOGLE_PM, name: 'Google Password Manager', passkeys: 2 },
          { aaguid: YUBIKEY, name: 'YubiKey 5 Series', passkeys: 1 },
        ],
        adoption: { users: 4, invited: 0, signed_in: 0, with_passkey: 2, passkey_only: 1 },
        adoption_history: [
          {
            day: new Date().toISOString().slice(0, 10),
            users: 4,
            invited: 0,
            signed_in: 0,
            with_passkey: 2,
            passkey_only: 1,
          },
        ],
      });
      assert.equal(
        (await call('/2/report/1')).json().unused,
        1,
        'default 180 days: only the never-used one made 400 days ago',
      );
      assert.equal((await call('/2/report/2', tokens.other)).json().passkeys, 1);
    });

    it('refuses with the documented status and message', async () => {
      for (const [url, token, status, message] of [
        ['/2/report/1', null, 401, /Token missing or invalid/],
        ['/2/report/1', tokens.wrong, 403, /scope/],
        ['/2/report/1', tokens.other, 403, /not authorized for organization/],
        ['/2/report/9', tokens.read, 404, /Organization does not exist/],
        ['/2/report/1?unused_days=0', tokens.read, 400, /unused_days/],
        ['/2/report/1?unused_days=abc', tokens.read, 400, /unused_days/],
        ['/2/report/1?days=3', tokens.read, 400, /Unknown query parameter 'days'/],
      ] as const) {
        const res = await call(url, token);
        assert.equal(res.statusCode, status, `${url}: ${res.body}`);
        assert.match(res.json().message, message);
      }
    });
  });
}
