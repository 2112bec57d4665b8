// Staff roles through the admin CLI: grant, revoke and list, with every refusal changing nothing;
// staffAccess() is what the console and its API will check.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { staffAccess, canHelp } from '../../src/directory/roles.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import type { User } from '../../src/store/directory.ts';

for (const dialect of dialects()) {
  describe(`staff roles (${dialect})`, () => {
    let ctx: TestContext;
    let hana: User;
    let olav: User;
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);
    const count = async () => (await ctx.store.db.selectFrom('roles').select('id').execute()).length;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      hana = await seedUser(ctx, 1, 'hana@example.org');
      olav = await seedUser(ctx, 2, 'olav@other.org');
    });
    after(() => ctx.close());

    it('grants helpdesk and org-admin in an organization and operator in all; lists them', async () => {
      assert.equal(
        (await run('role', 'grant', 'hana@example.org', 'helpdesk', '--org', '1')).out,
        'granted helpdesk for hana@example.org in organization 1',
      );
      const admin = JSON.parse((await run('role', 'grant', 'olav@other.org', 'org-admin', '--org', '2', '--json')).out);
      assert.deepEqual(admin, { eppn: 'olav@other.org', role: 'org-admin', org_id: 2, granted: true });
      assert.equal((await run('role', 'grant', 'Olav@Other.org', 'operator')).code, 0);
      const all = JSON.parse((await run('role', 'list', '--json')).out) as {
        eppn: string;
        role: string;
        org_id: number | null;
      }[];
      assert.deepEqual(
        all.map((g) => [g.eppn, g.role, g.org_id]),
        [
          ['olav@other.org', 'operator', null],
          ['hana@example.org', 'helpdesk', 1],
          ['olav@other.org', 'org-admin', 2],
        ],
      );
      const one = JSON.parse((await run('role', 'list', '--org', '1', '--json')).out) as { eppn: string }[];
      assert.deepEqual(
        one.map((g) => g.eppn),
        ['hana@example.org'],
      );
      assert.match((await run('role', 'list')).out, /hana@example\.org\s+helpdesk\s+1/);
      const access = await staffAccess(ctx.store, olav.id);
      assert.deepEqual(access, { operator: true, helpdesk: [2], orgAdmin: [2] });
      const hanas = await staffAccess(ctx.store, hana.id);
      assert.equal(canHelp(hanas, 1), true);
      assert.equal(canHelp(hanas, 2), false, "no role ever reaches another organization's users");
      assert.equal((await listAuditEvents(ctx.store.db, { action: 'role.grant' })).length, 3);
    });

    it('refuses bad grants with a clear message and changes nothing', async () => {
      const before = await count();
      for (const [args, message] of [
        [
          ['role', 'grant', 'hana@example.org', 'admin', '--org', '1'],
          /role must be one of helpdesk, org-admin, operator/,
        ],
        [['role', 'grant', 'hana@example.org', 'helpdesk'], /helpdesk needs --org/],
        [['role', 'grant', 'hana@example.org', 'operator', '--org', '1'], /operator is granted without --org/],
        [['role', 'grant', 'hana@example.org', 'helpdesk', '--org', '2'], /is not in organization 2/],
        [['role', 'grant', 'hana@example.org', 'helpdesk', '--org', '9'], /organization 9 not found/],
        [['role', 'grant', 'nobody@example.org', 'helpdesk', '--org', '1'], /does not exist/],
        [['role', 'grant', 'hana@example.org', 'helpdesk', '--org', '1'], /already has helpdesk in organization 1/],
        [['role', 'grant', 'hana@example.org', 'helpdesk', '--org', 'x'], /org/],
        [
          ['role', 'revoke', 'hana@example.org', 'org-admin', '--org', '1'],
          /does not have org-admin in organization 1/,
        ],
      ] as const) {
        const res = await run(...args);
        assert.equal(res.code, 1, `${args.join(' ')}: ${res.err}`);
        assert.match(res.err, message);
      }
      assert.equal(await count(), before);
    });

    it('revokes, audited; a removed user takes their roles along', async () => {
      assert.equal(
        (await run('role', 'revoke', 'hana@example.org', 'helpdesk', '--org', '1')).out,
        'revoked helpdesk for hana@example.org in organization 1',
      );
      assert.deepEqual(await staffAccess(ctx.store, hana.id), { operator: false, helpdesk: [], orgAdmin: [] });
      assert.equal((await listAuditEvents(ctx.store.db, { action: 'role.revoke' })).length, 1);
      assert.equal((await run('user', 'remove', 'olav@other.org')).code, 0);
      assert.equal(await count(), 0);
    });
  });
}
