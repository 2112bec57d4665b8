// The audit API (/2/audit/<org_id>): one organization's trail, newest first, keyset pages with a
// Link, filters, CSV; refusals with their status and message.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cli,
  clientToken,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';

for (const dialect of dialects()) {
  describe(`audit API (${dialect})`, () => {
    let ctx: TestContext;
    const tokens = { read: '', other: '', wrongScope: '' };
    const call = (url: string, token: string | null = tokens.read) =>
      ctx.app.inject({ method: 'GET', url, headers: token === null ? {} : { authorization: `Bearer ${token}` } });
    const expectError = (res: Awaited<ReturnType<typeof call>>, status: number, message: RegExp) => {
      assert.equal(res.statusCode, status, res.body);
      assert.equal(res.json().code, status);
      assert.match(res.json().message, message);
    };

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      await seedUser(ctx, 1, 'ada@example.org');
      await seedUser(ctx, 1, '=cmd@example.org', { name: '=HYPERLINK("x")' });
      await seedUser(ctx, 2, 'olav@other.org');
      for (const eppn of ['ada@example.org', 'ada@example.org', '=cmd@example.org'])
        assert.equal((await cli(ctx.config.databaseUrl, ['recovery', 'create', eppn])).code, 0);
      const reader = await seedClient(ctx, { scopes: ['audit.read'], orgs: [1] });
      const other = await seedClient(ctx, { scopes: ['audit.read'], orgs: [2] });
      const wrong = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
      tokens.read = await clientToken(ctx, reader.clientId, reader.secret, 'audit.read');
      tokens.other = await clientToken(ctx, other.clientId, other.secret, 'audit.read');
      tokens.wrongScope = await clientToken(ctx, wrong.clientId, wrong.secret, 'passkey.read');
    });
    after(() => ctx.close());

    it("lists the organization's records newest first, in pages linked by before, never another organization's", async () => {
      const all = (await call('/2/audit/1?limit=1000')).json() as { id: number; org_id: number; action: string }[];
      assert.ok(all.length >= 6, 'user.add and recovery_link.create records');
      assert.ok(all.every((r) => r.org_id === 1));
      assert.deepEqual(
        all.map((r) => r.id),
        [...all.map((r) => r.id)].sort((a, b) => b - a),
      );
      const first = await call('/2/audit/1?limit=2&action=recovery_link.');
      assert.equal(first.headers['cache-control'], 'no-store');
      assert.equal(first.json().length, 2);
      const next = /^<([^>]+)>; rel="next"$/.exec(String(first.headers.link))![1]!;
      assert.ok(next.startsWith(`${ctx.config.publicUrl}/2/audit/1?`) && next.includes('action=recovery_link.'));
      const second = await call(new URL(next).pathname + new URL(next).search);
      assert.equal(second.json().length, 1);
      assert.equal(second.headers.link, undefined, 'the last page has no Link');
      const ids = [...first.json(), ...second.json()].map((r: { id: number }) => r.id);
      assert.equal(new Set(ids).size, 3);
      const ada = (await call('/2/audit/1?eppn=ada%40example.org&action=recovery_link.create')).json();
      assert.equal(ada.length, 2);
      const none = (await call('/2/audit/1?since=2999-01-01T00:00:00Z')).json();
      assert.deepEqual(none, []);
      const olav = (await call('/2/audit/2', tokens.other)).json() as { eppn: string }[];
      assert.ok(olav.every((r) => r.eppn !== 'ada@example.org'));
    });

    it('exports CSV with spreadsheet formulas defused', async () => {
      const res = await call('/2/audit/1?format=csv&action=recovery_link.create&eppn=%3Dcmd%40example.org');
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^text\/csv/);
      assert.match(String(res.headers['content-disposition']), /attachment; filename="audit-1.csv"/);
      const [header, row, end] = res.body.split('\r\n');
      assert.equal(header, 'id,at,action,actor_type,actor,subject,eppn,client_id,source,details');
      assert.match(row!, /,'=cmd@example\.org,'=cmd@example\.org,/);
      assert.match(row!, /"\{""recovery_link"":\d+/);
      assert.equal(end, '');
    });

    it('refuses bad requests with the documented status and message', async () => {
      expectError(await call('/2/audit/1', null), 401, /Token missing or invalid/);
      expectError(await call('/2/audit/1', tokens.wrongScope), 403, /scope/);
      expectError(await call('/2/audit/1', tokens.other), 403, /not authorized for organization/);
      expectError(await call('/2/audit/7'), 404, /Organization does not exist/);
      expectError(await call('/2/audit/1?eppn=olav%40other.org'), 403, /realm 'other.org' does not match/);
      expectError(await call('/2/audit/1?eppn=nope'), 400, /must contain '@'/);
      expectError(await call('/2/audit/1?action=nothing.real'), 400, /not an audit action/);
      expectError(await call('/2/audit/1?since=yesterday'), 400, /since/);
      expectError(await call('/2/audit/1?limit=0'), 400, /limit/);
      expectError(await call('/2/audit/1?limit=1001'), 400, /limit/);
      expectError(await call('/2/audit/1?before=-1'), 400, /before/);
      expectError(await call('/2/audit/1?format=xml'), 400, /format/);
      expectError(await call('/2/audit/1?sort=asc'), 400, /Unknown query parameter 'sort'/);
      expectError(await call('/2/audit/1?limit=1&limit=2'), 400, /more than once/);
      const post = await ctx.app.inject({
        method: 'POST',
        url: '/2/audit/1',
        headers: { authorization: `Bearer ${tokens.read}` },
      });
      assert.equal(post.statusCode, 405);
    });
  });
}
