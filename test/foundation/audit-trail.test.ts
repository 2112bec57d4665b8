// The audit trail: every security event is exactly one record with who acted (actor type and
// id), what it was done to, the organization, the time, the source address (IPv6 as /64) and the
// request id; a change that is rolled back leaves none; `audit list` filters and pages, `audit
// export` writes JSON lines; old records are pruned. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import sharp from 'sharp';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken, basicAuth, cli } from '../helpers.ts';
import type { TestContext } from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { insertAuditEvent, listAuditEvents, type AuditRow } from '../../src/store/audit.ts';
import { saveConsent } from '../../src/store/consents.ts';
import { findUserByEppn, findOrganization } from '../../src/store/directory.ts';
import { giveConsent } from '../../src/clients/consents.ts';
import { setPassword } from '../../src/directory/index.ts';
import { sweepExpired } from '../../src/store/housekeeping.ts';

const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'a different long passphrase';
const V6 = '2001:db8:1:2:3:4:5:6';
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

interface Expected {
  actor_type: string;
  actor: string | RegExp | null;
  subject: string | null;
  org_id: number | null;
  client_id?: string | null;
  source?: string | null;
  request_id?: RegExp;
  details?: Record<string, unknown>;
}

for (const dialect of dialects()) {
  describe(`audit trail (${dialect})`, () => {
    let ctx: TestContext;
    let rp: { clientId: string; secret: string };
    let api: { clientId: string; secret: string };
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);
    const lastId = async () => (await listAuditEvents(ctx.store.db, { limit: 1 }))[0]?.id ?? 0;

    function browser(remoteAddress = V6) {
      const jar = new Map<string, string>();
      const keep = (res: LightMyRequestResponse) => {
        for (const c of res.cookies) jar.set(c.name, c.value);
        return res;
      };
      const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      return {
        get: async (url: string) =>
          keep(await ctx.app.inject({ method: 'GET', url, remoteAddress, headers: { cookie: cookie() } })),
        post: async (url: string, form: Record<string, string>) =>
          keep(
            await ctx.app.inject({
              method: 'POST',
              url,
              remoteAddress,
              headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
              payload: new URLSearchParams(form).toString(),
            }),
          ),
      };
    }

    /** a new passkey of the user's, as if registered */
    async function passkeyOf(eppn: string): Promise<number> {
      const [id] = await seedPasskeys(ctx.store, 1, [(await findUserByEppn(ctx.store.db, eppn))!.id], 1);
      return id!;
    }

    async function signedIn(eppn: string, password = PASSWORD) {
      const b = browser();
      const form = csrfOf((await b.get('/account')).body);
      const res = await b.post('/account/login', { _csrf: form, username: eppn, password });
      assert.equal(res.statusCode, 303, res.body);
      return { b, csrf: csrfOf((await b.get('/account')).body) };
    }

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org');
      rp = await seedClient(ctx, { redirectUris: ['https://app.example.test/cb'], groups: ['userinfo-name'] });
      api = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
    });
    after(() => ctx.close());

    const cliActor = /^cli/;
    const rows: [string, () => Promise<unknown>, Expected][] = [
      [
        'signin.succeeded',
        () => signedIn('ada@example.org'),
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          client_id: null,
          source: '2001:db8:1:2::/64',
          request_id: /./,
          details: { method: 'password', amr: ['pwd'] },
        },
      ],
      [
        'signin.failed',
        async () => {
          const b = browser('192.0.2.7');
          const form = csrfOf((await b.get('/account')).body);
          await b.post('/account/login', { _csrf: form, username: 'ada@example.org', password: 'wrong password!!' });
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          source: '192.0.2.7',
          request_id: /./,
          details: { method: 'password', reason: 'credentials' },
        },
      ],
      [
        'passkey.rename',
        async () => {
          const { b, csrf } = await signedIn('ada@example.org');
          const id = await passkeyOf('ada@example.org');
          assert.equal(
            (await b.post(`/account/passkeys/${id}/rename`, { _csrf: csrf, label: 'Work key' })).statusCode,
            303,
          );
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          source: '2001:db8:1:2::/64',
          request_id: /./,
        },
      ],
      [
        'passkey.delete_by_user',
        async () => {
          const { b, csrf } = await signedIn('ada@example.org');
          const id = await passkeyOf('ada@example.org');
          assert.equal(
            (await b.post(`/account/passkeys/${id}/delete`, { _csrf: csrf, confirm: 'yes' })).statusCode,
            303,
          );
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          source: '2001:db8:1:2::/64',
        },
      ],
      [
        'consent.given',
        async () => {
          const ada = (await findUserByEppn(ctx.store.db, 'ada@example.org'))!;
          const actor = { type: 'user' as const, id: ada.eppn, requestId: 'req-consent', ip: V6 };
          await giveConsent(ctx.store, ada, rp.clientId, ['openid', 'userinfo-name'], { actor });
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          source: '2001:db8:1:2::/64',
          details: { scopes: ['openid', 'userinfo-name'] },
        },
      ],
      [
        'consent.withdrawn',
        async () => {
          const { b, csrf } = await signedIn('ada@example.org');
          const res = await b.post('/account/consents/withdraw', { _csrf: csrf, client_id: rp.clientId });
          assert.equal(res.statusCode, 303, res.body);
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          client_id: 'RP',
          source: '2001:db8:1:2::/64',
        },
      ],
      [
        'password.change',
        async () => {
          const { b, csrf } = await signedIn('ada@example.org');
          const wrong = await b.post('/account/password', {
            _csrf: csrf,
            current: 'not it at all',
            password: 'another long one',
          });
          assert.equal(wrong.statusCode, 400);
          assert.match(wrong.body, /current password is wrong/);
          const short = await b.post('/account/password', { _csrf: csrf, current: PASSWORD, password: 'short' });
          assert.equal(short.statusCode, 400);
          const ok = await b.post('/account/password', { _csrf: csrf, current: PASSWORD, password: NEW_PASSWORD });
          assert.equal(ok.statusCode, 303, ok.body);
          assert.equal(ok.headers.location, '/account?done=password');
          // the new password signs in; put the old one back for the rows after this one
          const again = await signedIn('ada@example.org', NEW_PASSWORD);
          await setPassword(ctx.store, 'ada@example.org', PASSWORD);
          return again;
        },
        {
          actor_type: 'user',
          actor: 'ada@example.org',
          subject: 'ada@example.org',
          org_id: 1,
          source: '2001:db8:1:2::/64',
          request_id: /./,
        },
      ],
      [
        'client.auth_failed',
        () =>
          ctx.app.inject({
            method: 'POST',
            url: '/oauth/token',
            remoteAddress: '198.51.100.9',
            headers: {
              authorization: basicAuth(api.clientId, 'wrong'),
              'content-type': 'application/x-www-form-urlencoded',
            },
            payload: 'grant_type=client_credentials&scope=passkey.read',
          }),
        {
          actor_type: 'client',
          actor: 'API',
          subject: 'API',
          org_id: null,
          source: '198.51.100.9',
          request_id: /./,
        },
      ],
      [
        'passkey.delete',
        async () => {
          const id = await passkeyOf('ada@example.org');
          const token = await clientToken(ctx, api.clientId, api.secret, 'passkey.delete');
          const headers = { authorization: `Bearer ${token}`, 'x-request-id': 'req-api-delete' };
          assert.equal(
            (await ctx.app.inject({ method: 'DELETE', url: `/2/passkey/1/${id}`, headers })).statusCode,
            200,
          );
        },
        {
          actor_type: 'client',
          actor: 'API',
          subject: 'ada@example.org',
          org_id: 1,
          client_id: 'API',
          source: '127.0.0.1',
          request_id: /^req-api-delete$/,
        },
      ],
      [
        'user.add',
        () => run('user', 'add', '--org', '1', '--eppn', 'bo@example.org', '--name', 'Bo'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.update',
        () => run('user', 'set', 'bo@example.org', '--name', 'Bo B'),
        {
          actor_type: 'operator',
          actor: cliActor,
          subject: 'bo@example.org',
          org_id: 1,
          details: { fields: ['name'] },
        },
      ],
      [
        'user.id_add',
        () => run('user', 'add-id', '--eppn', 'bo@example.org', '--id', 'edugain:bo@edu.example'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.id_remove',
        () => run('user', 'remove-id', '--eppn', 'bo@example.org', '--id', 'edugain:bo@edu.example'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'password.set',
        () =>
          cli(
            ctx.config.databaseUrl,
            ['user', 'set-password', '--eppn', 'bo@example.org', '--password-stdin'],
            `${PASSWORD}\n`,
          ),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.photo_set',
        async () => {
          const file = join(mkdtempSync(join(tmpdir(), 'audit-photo-')), 'p.png');
          writeFileSync(
            file,
            await sharp({ create: { width: 8, height: 8, channels: 3, background: '#3366cc' } })
              .png()
              .toBuffer(),
          );
          return run('user', 'set-photo', '--eppn', 'bo@example.org', '--file', file);
        },
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.photo_remove',
        () => run('user', 'remove-photo', '--eppn', 'bo@example.org'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.disable',
        () => run('user', 'disable', 'bo@example.org'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.enable',
        () => run('user', 'enable', 'bo@example.org'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'user.remove',
        () => run('user', 'remove', 'bo@example.org'),
        { actor_type: 'operator', actor: cliActor, subject: 'bo@example.org', org_id: 1 },
      ],
      [
        'org.add',
        () => run('org', 'add', '--id', '7', '--realm', 'seven.org', '--name', 'Seven'),
        { actor_type: 'operator', actor: cliActor, subject: '7', org_id: 7 },
      ],
      [
        'org.brand',
        () => run('org', 'brand', '7', '--name', 'Seven University', '--color', '#0b6e4f'),
        {
          actor_type: 'operator',
          actor: cliActor,
          subject: '7',
          org_id: 7,
          details: { set: ['color', 'name'], cleared: false },
        },
      ],
      [
        'client.grant',
        () => run('client', 'grant-orgs', api.clientId, '--orgs', '7'),
        {
          actor_type: 'operator',
          actor: cliActor,
          subject: 'API',
          org_id: null,
          details: { kind: 'admin', orgs: [7] },
        },
      ],
      [
        'client.revoke',
        () => run('client', 'revoke-orgs', api.clientId, '--orgs', '7'),
        { actor_type: 'operator', actor: cliActor, subject: 'API', org_id: null },
      ],
      [
        'org.remove',
        () => run('org', 'remove', '7'),
        { actor_type: 'operator', actor: cliActor, subject: '7', org_id: 7 },
      ],
      [
        'client.update',
        () => run('client', 'update', rp.clientId, '--groups', 'userinfo-name email'),
        {
          actor_type: 'operator',
          actor: cliActor,
          subject: 'RP',
          org_id: null,
          details: { fields: ['groups'] },
        },
      ],
      [
        'client.secret_rotate',
        () => run('client', 'secret', 'rotate', api.clientId),
        {
          actor_type: 'operator',
          actor: cliActor,
          subject: 'API',
          org_id: null,
          details: { overlap_seconds: 86400 },
        },
      ],
      [
        'client.disable',
        () => run('client', 'disable', rp.clientId),
        { actor_type: 'operator', actor: cliActor, subject: 'RP', org_id: null },
      ],
      [
        'client.enable',
        () => run('client', 'enable', rp.clientId),
        { actor_type: 'operator', actor: cliActor, subject: 'RP', org_id: null },
      ],
      [
        'keys.rotate',
        () => run('keys', 'rotate'),
        { actor_type: 'operator', actor: cliActor, subject: /./ as unknown as string, org_id: null },
      ],
    ];

    before(async () => {
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      await saveConsent(
        ctx.store.db,
        (await findUserByEppn(ctx.store.db, 'ada@example.org'))!.id,
        rp.clientId,
        ['openid'],
        Date.now(),
      );
    });

    /** The client ids are known once the clients exist: the table names them API and RP. */
    const resolve = <T>(value: T): T => (value === 'API' ? api.clientId : value === 'RP' ? rp.clientId : value) as T;

    for (const [action, act, table] of rows) {
      it(`${action}: exactly one record, with actor, subject, organization, time, source and request id`, async () => {
        const from = await lastId();
        const started = Date.now();
        await act();
        const expected = Object.fromEntries(Object.entries(table).map(([k, v]) => [k, resolve(v)])) as Expected;
        // A failed client authentication is recorded from the authorization server's error event,
        // which may finish just after the answer: wait for it briefly, then count.
        const read = async () =>
          (await listAuditEvents(ctx.store.db, { after: from })).filter((r) => r.kind === action);
        for (let i = 0; i < 40 && (await read()).length === 0; i++) await new Promise((r) => setTimeout(r, 25));
        await new Promise((r) => setTimeout(r, 25));
        const records = await read();
        assert.equal(records.length, 1, `${action}: ${records.length} records`);
        const r = records[0]!;
        assert.equal(r.actor_type, expected.actor_type);
        if (expected.actor instanceof RegExp) assert.match(r.actor ?? '', expected.actor);
        else assert.equal(r.actor, expected.actor);
        if ((expected.subject as unknown) instanceof RegExp)
          assert.match(r.subject ?? '', expected.subject as unknown as RegExp);
        else assert.equal(r.subject, expected.subject);
        assert.equal(r.org_id === null ? null : Number(r.org_id), expected.org_id);
        if (expected.client_id !== undefined) assert.equal(r.client_id, expected.client_id);
        if (expected.source !== undefined) assert.equal(r.source, expected.source);
        if (expected.request_id) assert.match(r.request_id ?? '', expected.request_id);
        if (expected.details)
          assert.deepEqual(pick(JSON.parse(r.details) as Record<string, unknown>, expected.details), expected.details);
        assert.ok(r.at >= started - 1000 && r.at <= Date.now() + 1000, 'time of the change');
      });
    }

    it('a change that is rolled back leaves no record', async () => {
      await seedOrg(ctx, 8, 'eight.org', 'Eight');
      const u = await seedUser(ctx, 8, 'eve@eight.org');
      await seedPasskeys(ctx.store, 8, [u.id], 2);
      // The organization's own row cannot be deleted: the removal fails after its users went.
      if (dialect === 'sqlite')
        await sql`create trigger keep_eight before delete on organizations when old.id = 8 begin select raise(abort, 'kept'); end`.execute(
          ctx.store.db,
        );
      else {
        await sql`create function keep_eight() returns trigger language plpgsql as $$ begin raise exception 'kept'; end $$`.execute(
          ctx.store.db,
        );
        await sql`create trigger keep_eight before delete on organizations for each row when (old.id = 8) execute function keep_eight()`.execute(
          ctx.store.db,
        );
      }
      const from = await lastId();
      const r = await run('org', 'remove', '8', '--force', '--yes');
      assert.equal(r.code, 1);
      assert.deepEqual(await listAuditEvents(ctx.store.db, { after: from }), []);
      assert.ok(await findUserByEppn(ctx.store.db, 'eve@eight.org'), 'the user is still there');
      assert.ok(await findOrganization(ctx.store.db, 8));
    });

    it('audit list filters by actor, subject, action family, organization and time, and pages newest first', async () => {
      const list = async (...args: string[]) => {
        const r = await run('audit', 'list', ...args, '--json');
        assert.equal(r.code, 0, r.err);
        return JSON.parse(r.out) as { id: number; action: string; actor: string; subject: string; org_id: number }[];
      };
      const byAda = await list('--actor', 'ada@example.org');
      assert.ok(byAda.length >= 5 && byAda.every((e) => e.actor === 'ada@example.org'));
      assert.ok((await list('--subject', rp.clientId)).every((e) => e.subject === rp.clientId));
      const family = await list('--action', 'client.');
      assert.ok(family.length >= 6 && family.every((e) => e.action.startsWith('client.')));
      assert.ok((await list('--org', '1', '--action', 'user.disable')).every((e) => e.org_id === 1));
      assert.deepEqual(await list('--until', '2000-01-01'), []);
      const all = await list('--limit', '1000');
      assert.deepEqual(
        all.map((e) => e.id),
        [...all.map((e) => e.id)].sort((a, b) => b - a),
        'newest first',
      );
      const first = await list('--limit', '3');
      const second = await list('--limit', '3', '--before', String(first[2]!.id));
      assert.deepEqual(
        [...first, ...second].map((e) => e.id),
        all.slice(0, 6).map((e) => e.id),
      );
      const human = await run('audit', 'list', '--limit', '2');
      assert.match(human.out, new RegExp(`more: --before ${all[1]!.id}$`));
      for (const [args, message] of [
        [['--action', 'nonsense'], /is not an audit action/],
        [['--since', 'yesterday'], /--since/],
        [['--limit', '5000'], /at most 1000/],
        [['--before', 'x'], /--before must be a positive integer/],
      ] as [string[], RegExp][]) {
        const r = await run('audit', 'list', ...args);
        assert.equal(r.code, 1, args.join(' '));
        assert.match(r.err, message);
      }
    });

    it('audit export writes the selection as JSON lines, oldest first, to a new file', async () => {
      const file = join(mkdtempSync(join(tmpdir(), 'audit-export-')), 'audit.jsonl');
      const r = await run('audit', 'export', '--action', 'user.', '--output', file, '--json');
      assert.equal(r.code, 0, r.err);
      const lines = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { id: number; action: string });
      assert.equal(JSON.parse(r.out).exported, lines.length);
      assert.ok(lines.length >= 7 && lines.every((l) => l.action.startsWith('user.')));
      assert.deepEqual(
        lines.map((l) => l.id),
        [...lines.map((l) => l.id)].sort((a, b) => a - b),
      );
      const again = await run('audit', 'export', '--output', file);
      assert.equal(again.code, 1, 'never overwrites');
      const stdout = await run('audit', 'export', '--action', 'org.');
      assert.ok(stdout.out.split('\n').every((l) => (JSON.parse(l) as { action: string }).action.startsWith('org.')));
    });

    it('prunes records older than AUDIT_RETENTION_DAYS', async () => {
      const day = 24 * 3600 * 1000;
      await insertAuditEvent(ctx.store.db, { at: Date.now() - 401 * day, kind: 'user.add', eppn: 'old@example.org' });
      await insertAuditEvent(ctx.store.db, {
        at: Date.now() - 399 * day,
        kind: 'user.add',
        eppn: 'recent@example.org',
      });
      const { audit } = await sweepExpired(ctx.store, Date.now(), 400);
      assert.equal(audit, 1);
      const left: AuditRow[] = await listAuditEvents(ctx.store.db, { subject: 'recent@example.org' });
      assert.equal(left.length, 1);
      assert.deepEqual(await listAuditEvents(ctx.store.db, { subject: 'old@example.org' }), []);
    });
  });
}

function pick(from: Record<string, unknown>, like: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(like).map((k) => [k, from[k]]));
}
