import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  TEST_SECRET,
  type TestContext,
} from '../helpers.ts';
import { sql } from 'kysely';
import { runCli } from '../../src/cli/index.ts';
import { documentServer } from '../../src/http/openapi.ts';
import { seedPasskeys } from './fixtures.ts';

async function cli(ctx: TestContext, argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    argv,
    { out: (l) => out.push(l), err: (l) => err.push(l), readStdin: async () => '' },
    { DATABASE_URL: ctx.config.databaseUrl, IDP_SECRET: TEST_SECRET, LOG_LEVEL: 'silent' },
  );
  return { code, out: out.join('\n'), err: err.join('\n') };
}

for (const dialect of dialects()) {
  describe(`passkey deletions in the audit log (${dialect})`, () => {
    let ctx: TestContext;
    let clientId: string;
    let aliceKeys: number[];
    let bobKeys: number[];
    let otherKeys: number[];

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other');
      const alice = await seedUser(ctx, 1, 'alice@example.org');
      const bob = await seedUser(ctx, 1, 'bob@example.org');
      const carol = await seedUser(ctx, 2, 'carol@other.org');
      aliceKeys = await seedPasskeys(ctx.store, 1, [alice.id], 3);
      bobKeys = await seedPasskeys(ctx.store, 1, [bob.id], 2);
      otherKeys = await seedPasskeys(ctx.store, 2, [carol.id], 1);
      const c = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1, 2] });
      clientId = c.clientId;
      const token = await clientToken(ctx, c.clientId, c.secret, 'passkey.delete');
      const del = (url: string, rid: string) =>
        ctx.app.inject({ method: 'DELETE', url, headers: { authorization: `Bearer ${token}`, 'x-request-id': rid } });
      assert.equal((await del('/2/passkey/1?eppn=alice%40example.org', 'rid-alice')).statusCode, 200);
      assert.equal((await del(`/2/passkey/1/${bobKeys[0]}`, 'rid-bob')).statusCode, 200);
      assert.equal((await del(`/2/passkey/2/${otherKeys[0]}`, 'rid-carol')).statusCode, 200);
      assert.equal((await del(`/2/passkey/1/${otherKeys[0]}`, 'rid-missing')).statusCode, 404);
    });
    after(() => ctx.close());

    it('audit list --json shows every delete with time, client, organization, eppn, passkey ids and request id', async () => {
      const r = await cli(ctx, ['audit', 'list', '--action', 'passkey.', '--json']);
      assert.equal(r.code, 0, r.err);
      const events = JSON.parse(r.out);
      const byRid = Object.fromEntries(events.map((e: { request_id: string }) => [e.request_id, e]));
      assert.deepEqual(Object.keys(byRid).sort(), ['rid-alice', 'rid-bob', 'rid-carol']);
      assert.deepEqual(
        { ...byRid['rid-alice'], id: 0, at: 0 },
        {
          id: 0,
          at: 0,
          action: 'passkey.delete_user',
          actor_type: 'client',
          actor: clientId,
          subject: 'alice@example.org',
          client_id: clientId,
          org_id: 1,
          eppn: 'alice@example.org',
          passkey_ids: aliceKeys,
          source: '127.0.0.1',
          request_id: 'rid-alice',
          details: {},
        },
      );
      assert.deepEqual(byRid['rid-bob'].passkey_ids, [bobKeys[0]]);
      assert.equal(byRid['rid-bob'].action, 'passkey.delete');
      assert.equal(byRid['rid-bob'].eppn, 'bob@example.org');
      assert.match(byRid['rid-alice'].at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00$/);
    });

    it('audit list --org filters by organization', async () => {
      const r = await cli(ctx, ['audit', 'list', '--org', '2', '--action', 'passkey.', '--json']);
      assert.equal(r.code, 0, r.err);
      const events = JSON.parse(r.out);
      assert.deepEqual(
        events.map((e: { request_id: string }) => e.request_id),
        ['rid-carol'],
      );
      assert.deepEqual(events[0].passkey_ids, otherKeys);
    });

    it('audit list --since filters by time', async () => {
      const future = await cli(ctx, [
        'audit',
        'list',
        '--since',
        new Date(Date.now() + 3_600_000).toISOString(),
        '--json',
      ]);
      assert.equal(future.code, 0, future.err);
      assert.deepEqual(JSON.parse(future.out), []);
      const past = await cli(ctx, [
        'audit',
        'list',
        '--since',
        '2020-01-01',
        '--org',
        '1',
        '--action',
        'passkey.',
        '--json',
      ]);
      assert.equal(JSON.parse(past.out).length, 2);
      const bad = await cli(ctx, ['audit', 'list', '--since', 'yesterday']);
      assert.equal(bad.code, 1);
      assert.match(bad.err, /--since/);
    });

    it('deletes nothing when the audit event cannot be written', async () => {
      const keys = await seedPasskeys(ctx.store, 1, [(await seedUser(ctx, 1, 'erin@example.org')).id], 2);
      const c = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
      const token = await clientToken(ctx, c.clientId, c.secret, 'passkey.read passkey.delete');
      const list = async () =>
        (
          await ctx.app.inject({
            method: 'GET',
            url: '/2/passkey/1?eppn=erin%40example.org',
            headers: { authorization: `Bearer ${token}` },
          })
        )
          .json()
          .map((p: { id: number }) => p.id);
      await sql.raw('alter table audit_events rename to audit_events_away').execute(ctx.store.db);
      try {
        for (const url of ['/2/passkey/1?eppn=erin%40example.org', `/2/passkey/1/${keys[0]}`]) {
          const res = await ctx.app.inject({ method: 'DELETE', url, headers: { authorization: `Bearer ${token}` } });
          assert.equal(res.statusCode, 500);
          assert.deepEqual(res.json(), { code: 500, message: 'Internal Server Error' });
        }
      } finally {
        await sql.raw('alter table audit_events_away rename to audit_events').execute(ctx.store.db);
      }
      assert.deepEqual(await list(), keys);
    });

    it('audit list prints a table for people', async () => {
      const r = await cli(ctx, ['audit', 'list', '--org', '1']);
      assert.equal(r.code, 0, r.err);
      const lines = r.out.split('\n');
      assert.match(
        lines[0]!,
        /^id\s+at\s+action\s+actor\s+subject\s+org_id\s+client_id\s+passkey_ids\s+source\s+request_id$/,
      );
      assert.ok(
        lines.some(
          (l) => l.includes('rid-alice') && l.includes(aliceKeys.join(',')) && l.includes('passkey.delete_user'),
        ),
      );
    });
  });

  describe(`OpenAPI document (${dialect})`, () => {
    let ctx: TestContext;
    before(async () => {
      ctx = await startTestApp(dialect);
    });
    after(() => ctx.close());

    it('names PUBLIC_URL as its server, or / when PUBLIC_URL is loopback or a reserved example name', () => {
      for (const url of ['https://idp.uni.example.no', 'https://login.kommune.no', 'https://idp.test.no'])
        assert.equal(documentServer(url), url);
      for (const url of [
        'http://localhost:3000',
        'http://127.0.0.1:8080',
        'http://[::1]:3000',
        'https://idp.example.com',
        'https://example.org',
        'https://idp.example.test',
        'https://a.b.localhost',
      ])
        assert.equal(documentServer(url), '/', url);
    });

    it('is OpenAPI 3.1 and describes the passkey endpoints with their parameters, bodies and errors', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/openapi.json' });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const doc = res.json();
      assert.equal(doc.openapi, '3.1.0');
      // PUBLIC_URL here is a name reserved for testing: the server is the origin the document came from
      assert.deepEqual(doc.servers, [{ url: '/' }]);
      assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
      assert.equal(
        doc.components.securitySchemes.oauth2.flows.clientCredentials.tokenUrl,
        `${ctx.config.publicUrl}/oauth/token`,
      );
      const list = doc.paths['/2/passkey/{org_id}'];
      const one = doc.paths['/2/passkey/{org_id}/{id}'];
      assert.deepEqual(Object.keys(list).sort(), ['delete', 'get']);
      assert.deepEqual(Object.keys(one), ['delete']);
      assert.deepEqual(list.get.parameters.map((p: { in: string; name: string }) => `${p.in}:${p.name}`).sort(), [
        'path:org_id',
        'query:details',
        'query:eppn',
        'query:offset',
        'query:per_page',
      ]);
      assert.deepEqual(list.get.security, [{ oauth2: ['passkey.read'] }]);
      assert.deepEqual(one.delete.security, [{ oauth2: ['passkey.delete'] }]);
      const item = list.get.responses['200'].content['application/json'].schema.items;
      // The contract's fields are the required ones; `authenticator` comes only with details=authenticator.
      assert.deepEqual([...item.required].sort(), [
        'aaguid',
        'created_at',
        'eppn',
        'id',
        'label',
        'last_used_at',
        'mfa_verified',
      ]);
      assert.deepEqual(Object.keys(item.properties).sort(), [
        'aaguid',
        'authenticator',
        'created_at',
        'eppn',
        'id',
        'label',
        'last_used_at',
        'mfa_verified',
      ]);
      assert.deepEqual(item.properties.last_used_at.type, ['string', 'null']);
      assert.ok(list.get.responses['200'].headers.link, 'the Link header is documented');
      for (const status of ['400', '401', '403', '404']) {
        assert.deepEqual(
          list.get.responses[status].content['application/json'].schema.required,
          ['code', 'message'],
          status,
        );
        assert.ok(one.delete.responses[status], status);
      }
      assert.deepEqual(Object.keys(one.delete.responses['200'].content['application/json'].schema.properties).sort(), [
        'deleted',
        'id',
      ]);
      assert.deepEqual(Object.keys(list.delete.responses['200'].content['application/json'].schema.properties).sort(), [
        'deleted_count',
        'eppn',
      ]);
      // oidc-provider's catch-all mounts and the 405 answers are not API operations
      assert.deepEqual(
        Object.keys(doc.paths).filter((p) => p.includes('*')),
        [],
      );
      assert.equal(list.put, undefined);
    });
  });
}
