// The recovery link API (/2/recovery-link/<org_id>): authorized like the passkey API, the same
// functions as `recovery create|list|revoke`, every refusal with its status and message and
// nothing changed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { clientToken, dialects, seedClient, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { openRecoveryLink } from '../../src/webauthn/recovery-links.ts';

for (const dialect of dialects()) {
  describe(`recovery link API (${dialect})`, () => {
    let ctx: TestContext;
    const tokens = { manage: '', reader: '', ungranted: '' };
    let clientId = '';

    const call = (
      method: 'GET' | 'POST' | 'DELETE' | 'PUT',
      url: string,
      body?: unknown,
      token: string | null = tokens.manage,
    ) =>
      ctx.app.inject({
        method,
        url,
        headers: {
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
    const expectError = (res: Awaited<ReturnType<typeof call>>, status: number, message: RegExp) => {
      assert.equal(res.statusCode, status, res.body);
      assert.deepEqual(Object.keys(res.json()).sort(), ['code', 'message']);
      assert.equal(res.json().code, status);
      assert.match(res.json().message, message);
    };
    const links = async () => (await ctx.store.db.selectFrom('recovery_links').select('id').execute()).length;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.org', 'Other');
      await seedUser(ctx, 1, 'ada@example.org');
      await seedUser(ctx, 2, 'olav@other.org');
      const manage = await seedClient(ctx, { scopes: ['recovery.manage'], orgs: [1] });
      clientId = manage.clientId;
      const reader = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
      const ungranted = await seedClient(ctx, { scopes: ['recovery.manage'], orgs: [2] });
      tokens.manage = await clientToken(ctx, manage.clientId, manage.secret, 'recovery.manage');
      tokens.reader = await clientToken(ctx, reader.clientId, reader.secret, 'passkey.read');
      tokens.ungranted = await clientToken(ctx, ungranted.clientId, ungranted.secret, 'recovery.manage');
    });
    after(() => ctx.close());

    it('creates a link shown once, lists it without the secret, revokes it; audited with the client as actor', async () => {
      const res = await call('POST', '/2/recovery-link/1', {
        eppn: 'Ada@Example.org',
        ttl_seconds: 3600,
        delete_others: true,
      });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(res.headers['cache-control'], 'no-store');
      const link = res.json() as { id: number; eppn: string; url: string; expires_at: string; delete_others: boolean };
      assert.equal(link.eppn, 'ada@example.org');
      assert.equal(link.delete_others, true);
      assert.ok(link.url.startsWith(`${ctx.config.publicUrl}/recover/`));
      const expires = Date.parse(link.expires_at) - Date.now();
      assert.ok(expires > 3500_000 && expires <= 3600_000, link.expires_at);
      assert.ok(await openRecoveryLink(ctx.store, link.url.split('/').pop()!, Date.now()));
      const listed = await call('GET', '/2/recovery-link/1?eppn=ada%40example.org');
      assert.equal(listed.statusCode, 200);
      assert.equal(listed.json()[0].state, 'usable');
      assert.equal(listed.json()[0].created_by, `client:${clientId}`);
      assert.ok(!listed.body.includes(link.url.split('/').pop()!));
      assert.deepEqual(
        (await call('GET', '/2/recovery-link/1')).json().map((l: { id: number }) => l.id),
        [link.id],
      );
      const revoked = await call('DELETE', `/2/recovery-link/1/${link.id}`);
      assert.deepEqual(revoked.json(), { id: link.id, revoked: true });
      expectError(await call('DELETE', `/2/recovery-link/1/${link.id}`), 404, /Recovery link does not exist/);
      const audit = await listAuditEvents(ctx.store.db, { action: 'recovery_link.' });
      assert.deepEqual(audit.map((a) => [a.kind, a.actor_type, a.actor]).sort(), [
        ['recovery_link.create', 'client', clientId],
        ['recovery_link.revoke', 'client', clientId],
      ]);
    });

    it('refuses what it must, with the documented status and message, creating nothing', async () => {
      const before = await links();
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org' }, null),
        401,
        /Token missing or invalid/,
      );
      expectError(await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org' }, tokens.reader), 403, /scope/);
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org' }, tokens.ungranted),
        403,
        /not authorized for organization/,
      );
      expectError(
        await call('POST', '/2/recovery-link/9', { eppn: 'ada@example.org' }),
        404,
        /Organization does not exist/,
      );
      expectError(
        await call('POST', '/2/recovery-link/x', { eppn: 'ada@example.org' }),
        404,
        /Organization does not exist/,
      );
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'olav@other.org' }),
        403,
        /realm 'other.org' does not match/,
      );
      expectError(await call('POST', '/2/recovery-link/1', { eppn: 'nobody@example.org' }), 404, /does not exist/);
      expectError(await call('POST', '/2/recovery-link/1', {}), 400, /eppn is required/);
      expectError(await call('POST', '/2/recovery-link/1', { eppn: 'no-at-sign' }), 400, /must contain '@'/);
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org', ttl_seconds: 5 }),
        400,
        /ttl_seconds/,
      );
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org', delete_others: 'yes' }),
        400,
        /delete_others/,
      );
      expectError(
        await call('POST', '/2/recovery-link/1', { eppn: 'ada@example.org', role: 'x' }),
        400,
        /Unknown field 'role'/,
      );
      expectError(await call('POST', '/2/recovery-link/1', '{"eppn":'), 400, /./);
      expectError(
        await call('GET', '/2/recovery-link/1?eppn=a%40example.org&eppn=b%40example.org'),
        400,
        /more than once/,
      );
      expectError(await call('GET', '/2/recovery-link/1?page=2'), 400, /Unknown query parameter 'page'/);
      assert.equal((await call('PUT', '/2/recovery-link/1', {})).statusCode, 405);
      assert.equal(await links(), before);
      assert.deepEqual((await call('GET', '/2/recovery-link/1?eppn=nobody%40example.org')).json(), []);
    });

    it("never touches another organization's links", async () => {
      const olavs = await call('POST', '/2/recovery-link/2', { eppn: 'olav@other.org' }, tokens.ungranted);
      assert.equal(olavs.statusCode, 201);
      const id = olavs.json().id as number;
      expectError(await call('DELETE', `/2/recovery-link/1/${id}`), 404, /Recovery link does not exist/);
      assert.ok(!(await call('GET', '/2/recovery-link/1')).json().some((l: { id: number }) => l.id === id));
      expectError(await call('GET', '/2/recovery-link/2'), 403, /not authorized for organization/);
      const still = await call('GET', '/2/recovery-link/2', undefined, tokens.ungranted);
      assert.equal(still.json()[0].state, 'usable');
    });
  });
}
