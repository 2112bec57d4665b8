// Removal reaches what provisioning made: a removed user leaves their groups; removing an
// organization removes its groups and provisioning tokens (PostgreSQL's foreign keys would refuse
// otherwise). The admin CLI's scim token commands: create, list, revoke, audited.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects } from '../helpers.ts';
import { GROUP, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { removeOrganization } from '../../src/oauth/account-lifecycle.ts';
import { listAuditEvents } from '../../src/store/audit.ts';

for (const dialect of dialects()) {
  describe(`SCIM removal and the scim token commands (${dialect})`, () => {
    let k: ScimKit;
    before(async () => {
      k = await scimKit(dialect);
    });
    after(() => k.close());

    it('a removed user leaves their groups; the organization goes with its groups and tokens', async () => {
      const a = await k.call('POST', '/Users', newUser('gone'));
      const b = await k.call('POST', '/Users', newUser('stays'));
      const g = await k.call('POST', '/Groups', {
        schemas: [GROUP],
        displayName: 'G',
        members: [{ value: a.body.id }, { value: b.body.id }],
      });
      assert.equal((await k.call('DELETE', `/Users/${a.body.id}`)).status, 204);
      const after = await k.call('GET', `/Groups/${g.body.id}`);
      assert.deepEqual(
        after.body.members.map((m: { value: string }) => m.value),
        [b.body.id],
      );
      const removed = await removeOrganization(k.ctx.store, 1, { force: true });
      assert.equal(removed.users, 1);
      assert.equal((await k.call('GET', '/Users')).status, 401, 'the token went with the organization');
    });

    it('scim token create prints the token once; list shows it without; revoke stops it', async () => {
      const db = k.ctx.config.databaseUrl;
      const made = await cli(db, ['scim', 'token', 'create', '--org', '2', '--name', 'Okta', '--json']);
      assert.equal(made.code, 0, made.err);
      const { id, token } = JSON.parse(made.out) as { id: number; token: string };
      assert.match(token, /^scim_[A-Za-z0-9_-]{43}$/);
      assert.equal((await k.call('GET', '/Users', undefined, {}, token)).status, 200);
      const listed = await cli(db, ['scim', 'token', 'list', '--org', '2', '--json']);
      assert.ok(!listed.out.includes(token));
      const mine = (JSON.parse(listed.out) as { id: number; name: string; last_used_at: string | null }[]).find(
        (t) => t.id === id,
      );
      assert.equal(mine?.name, 'Okta');
      assert.ok(mine?.last_used_at);
      assert.equal((await cli(db, ['scim', 'token', 'revoke', String(id)])).code, 0);
      assert.equal((await k.call('GET', '/Users', undefined, {}, token)).status, 401);
      const again = await cli(db, ['scim', 'token', 'revoke', String(id)]);
      assert.equal(again.code, 1);
      assert.match(again.err, /already revoked/);
      assert.match((await cli(db, ['scim', 'token', 'create'])).err, /--org is required/);
      assert.match((await cli(db, ['scim', 'token', 'create', '--org', '9'])).err, /organization 9 does not exist/);
      const kinds = (await listAuditEvents(k.ctx.store.db, { action: 'scim_token.' })).map((e) => e.kind);
      assert.ok(kinds.includes('scim_token.create') && kinds.includes('scim_token.revoke'), kinds.join(','));
      const help = await cli(db, ['scim', '--help']);
      assert.match(help.out + help.err, /scim token create/);
    });
  });
}
