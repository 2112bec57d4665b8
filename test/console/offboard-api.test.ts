// Bulk offboarding (/2/offboard/<org_id>): a dry run changes nothing; the real run deletes each
// listed user's passkeys as the passkey API does (audit record with the reason); a list with a
// junk line among 10,000 is refused whole.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { clientToken, dialects, seedClient, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { passkeyRow } from '../passkey-admin/fixtures.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';

for (const dialect of dialects()) {
  describe(`bulk offboarding API (${dialect})`, () => {
    let ctx: TestContext;
    const tokens = { del: '', read: '' };
    const post = (body: unknown, token = tokens.del, org = 1) =>
      ctx.app.inject({
        method: 'POST',
        url: `/2/offboard/${org}`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const passkeys = async () => (await ctx.store.db.selectFrom('passkeys').select('id').execute()).length;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      const ada = await seedUser(ctx, 1, 'ada@example.org');
      const bo = await seedUser(ctx, 1, 'bo@example.org');
      const olav = await seedUser(ctx, 2, 'olav@other.org');
      await insertPasskeys(ctx.store.db, [
        passkeyRow(ada.id, 1, { label: 'a1' }),
        passkeyRow(ada.id, 1, { label: 'a2' }),
        passkeyRow(bo.id, 1, { label: 'b1' }),
        passkeyRow(olav.id, 2, { label: 'o1' }),
      ]);
      const del = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1] });
      const read = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
      tokens.del = await clientToken(ctx, del.clientId, del.secret, 'passkey.delete');
      tokens.read = await clientToken(ctx, read.clientId, read.secret, 'passkey.read');
    });
    after(() => ctx.close());

    it('previews, then deletes, audited with the reason', async () => {
      const list = ['Ada@example.org', 'nobody@example.org', 'ada@example.org'];
      const dry = await post({ eppns: list, reason: 'left the school', dry_run: true });
      assert.equal(dry.statusCode, 200, dry.body);
      assert.deepEqual(dry.json(), {
        dry_run: true,
        found: [{ eppn: 'ada@example.org', passkeys: 2 }],
        not_found: ['nobody@example.org'],
        passkeys: 2,
      });
      assert.equal(await passkeys(), 4, 'a dry run deletes nothing');
      const real = await post({ eppns: [...list, 'bo@example.org'], reason: 'left the school' });
      assert.deepEqual(real.json(), {
        dry_run: false,
        found: [
          { eppn: 'ada@example.org', passkeys: 2 },
          { eppn: 'bo@example.org', passkeys: 1 },
        ],
        not_found: ['nobody@example.org'],
        passkeys: 3,
      });
      assert.equal(await passkeys(), 1, "only the other organization's passkey is left");
      const audit = await listAuditEvents(ctx.store.db, { action: 'passkey.delete_user' });
      assert.deepEqual(audit.map((a) => [a.eppn, (JSON.parse(a.details) as { reason?: string }).reason]).sort(), [
        ['ada@example.org', 'left the school'],
        ['bo@example.org', 'left the school'],
      ]);
    });

    it('refuses a list with junk lines among 10,000, and other bad input, deleting nothing', async () => {
      const many = Array.from({ length: 10_000 }, (_, i) => `user${i}@example.org`);
      many[17] = 'not an eppn';
      many[4242] = 'olav@other.org';
      const before = await passkeys();
      const junk = await post({ eppns: many, reason: 'x' });
      assert.equal(junk.statusCode, 400);
      assert.match(
        junk.json().message,
        /2 bad line\(s\), nothing done: line 18: eppn .*; line 4243: realm 'other.org'/,
      );
      for (const [body, message] of [
        [{ eppns: [...many, 'one@example.org'], reason: 'x' }, /at most 10000/],
        [{ eppns: [], reason: 'x' }, /non-empty array/],
        [{ eppns: ['ada@example.org'] }, /reason/],
        [{ eppns: ['ada@example.org'], reason: 'x'.repeat(501) }, /reason/],
        [{ eppns: ['ada@example.org'], reason: 'x', dry_run: 'yes' }, /dry_run/],
        [{ eppns: ['ada@example.org'], reason: 'x', force: true }, /Unknown field 'force'/],
        [[1, 2], /JSON object/],
      ] as const) {
        const res = await post(body);
        assert.equal(res.statusCode, 400, JSON.stringify(body).slice(0, 80));
        assert.match(res.json().message, message);
      }
      assert.equal((await post({ eppns: ['ada@example.org'], reason: 'x' }, tokens.read)).statusCode, 403);
      assert.equal((await post({ eppns: ['olav@other.org'], reason: 'x' }, tokens.del, 2)).statusCode, 403);
      assert.equal(await passkeys(), before);
    });
  });
}
