// Trusting a federation: `saml federation add|list|show|refresh|remove` against an aggregate served
// by a loopback HTTP server, on SQLite and PostgreSQL; refresh (conditional GET, a newer aggregate,
// failures), the stale state past validUntil, and one refresh at a time across instances.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, migratedDatabase, testConfig, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import {
  federationSettings,
  refreshFederation,
  type FederationSettings,
} from '../../src/service-providers/federations.ts';
import { refreshDueFederations, startFederationRefresh } from '../../src/service-providers/federation-refresh.ts';
import { findFederatedEntities, findFederation, claimFederationRefresh } from '../../src/store/saml-federations.ts';
import { party } from '../saml/saml-fixtures.ts';
import {
  inDays,
  metadataServer,
  RS,
  signedAggregate,
  spEntity,
  type MetadataServer,
} from '../saml/federation-fixtures.ts';

const LOCAL = { PUBLIC_URL: 'http://localhost:8080' };
const federation = await party('federation.example.org');
const attacker = await party('attacker.example.org');
const WIKI = 'https://wiki.example.edu/shibboleth';
const STRICT = 'https://strict.example.net/sp';
const JOURNAL = 'https://journal.example.com/sp';
const TIMER = 'https://timer.example.edu/sp';

interface Log {
  lines: { level: string; obj: Record<string, unknown>; msg: string }[];
}
function captureLog(): Log & import('fastify').FastifyBaseLogger {
  const lines: Log['lines'] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push({ level, obj, msg });
  const log = {
    lines,
    level: 'info',
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    debug: at('debug'),
    trace: at('trace'),
    fatal: at('fatal'),
    silent: () => undefined,
    child: () => log,
  };
  return log as unknown as Log & import('fastify').FastifyBaseLogger;
}

for (const dialect of dialects()) {
  describe(`saml federation (${dialect})`, () => {
    let db: TestDatabase;
    let server: MetadataServer;
    let dir: string;
    let certFile: string;
    let store: Store;
    let settings: FederationSettings;
    const run = (args: string[]) => cli(db.url, args, '', LOCAL);

    before(async () => {
      db = await migratedDatabase(dialect);
      server = await metadataServer();
      dir = mkdtempSync(join(tmpdir(), 'fed-'));
      certFile = join(dir, 'federation.pem');
      writeFileSync(certFile, federation.certificate);
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [spEntity({ entityId: WIKI, categories: [RS] }), spEntity({ entityId: JOURNAL })],
        }),
      );
      store = await openStore(db.url);
      settings = federationSettings(testConfig(db.url, LOCAL));
    });
    after(async () => {
      await store.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
      await db.drop();
    });

    it('refuses what may not be a federation, and adds nothing', async () => {
      const cases: [string[], RegExp][] = [
        [['--url', 'http://fed.example.org/fed.xml', '--cert', certFile], /must be https/],
        [['--url', `${server.url}/fed.xml`, '--cert', join(dir, 'missing.pem')], /no such file/],
        [
          ['--url', `${server.url}/fed.xml`, '--cert', certFile, '--release', 'everything'],
          /not one of research-and-scholarship/,
        ],
        [
          ['--url', `${server.url}/fed.xml`, '--cert', certFile, '--max-validity', '30s'],
          /--max-validity must be between/,
        ],
        [['--url', `${server.url}/missing.xml`, '--cert', certFile], /answered HTTP 404; nothing was added/],
      ];
      for (const [args, message] of cases) {
        const result = await run(['saml', 'federation', 'add', ...args, '--json']);
        assert.equal(result.code, 1, args.join(' '));
        assert.match(result.err, message);
      }
      const notPem = join(dir, 'not.pem');
      writeFileSync(notPem, 'hello');
      assert.match(
        (await run(['saml', 'federation', 'add', '--url', `${server.url}/fed.xml`, '--cert', notPem])).err,
        /PEM certificate/,
      );
      // served over plain http while PUBLIC_URL is not on localhost: refused
      const remote = await cli(db.url, [
        'saml',
        'federation',
        'add',
        '--url',
        `${server.url}/fed.xml`,
        '--cert',
        certFile,
      ]);
      assert.match(remote.err, /must be https/);
      assert.equal((await run(['saml', 'federation', 'list', '--json'])).out, '[]');
    });

    it('refuses an aggregate the pinned certificate did not sign', async () => {
      server.documents.set(
        '/forged.xml',
        signedAggregate(attacker, { entities: [spEntity({ entityId: 'https://evil.example.net/sp' })] }),
      );
      const result = await run(['saml', 'federation', 'add', '--url', `${server.url}/forged.xml`, '--cert', certFile]);
      assert.equal(result.code, 1);
      assert.match(result.err, /does not verify with the expected key; nothing was added/);
      assert.deepEqual(await findFederatedEntities(store.db, 'https://evil.example.net/sp', Date.now()), []);
    });

    let id: number;
    it('adds a federation: prints its id and the number of SPs, which are then known', async () => {
      const result = await run([
        'saml',
        'federation',
        'add',
        '--url',
        `${server.url}/fed.xml`,
        '--cert',
        certFile,
        '--release',
        'research-and-scholarship',
        '--refresh',
        '30m',
        '--json',
      ]);
      assert.equal(result.code, 0, result.err);
      const summary = JSON.parse(result.out) as { id: number; entities: number };
      assert.equal(summary.entities, 2);
      assert.equal(typeof summary.id, 'number');
      id = summary.id;
      const [wiki] = await findFederatedEntities(store.db, WIKI, Date.now());
      assert.ok(wiki);
      assert.deepEqual(JSON.parse(wiki.categories), [RS]);
      assert.deepEqual(JSON.parse(wiki.releases), ['research-and-scholarship']);
      const again = await run(['saml', 'federation', 'add', '--url', `${server.url}/fed.xml`, '--cert', certFile]);
      assert.match(again.err, /already trusted/);
      const list = JSON.parse((await run(['saml', 'federation', 'list', '--json'])).out) as {
        id: number;
        state: string;
        refresh_seconds: number;
      }[];
      assert.deepEqual(
        list.map((f) => [f.id, f.state, f.refresh_seconds]),
        [[id, 'fresh', 1800]],
      );
      const shown = JSON.parse((await run(['saml', 'federation', 'show', String(id), '--json'])).out) as {
        service_providers: { entity_id: string }[];
      };
      assert.deepEqual(shown.service_providers.map((e) => e.entity_id).sort(), [JOURNAL, WIKI]);
      const audit = await store.db
        .selectFrom('audit_events')
        .select(['kind', 'subject'])
        .where('kind', 'like', 'saml_federation.%')
        .execute();
      assert.deepEqual(audit, [{ kind: 'saml_federation.add', subject: `saml-federation:${id}` }]);
    });

    it('refreshes with a conditional GET: an unchanged aggregate is a 304', async () => {
      server.requests.length = 0;
      const result = await run(['saml', 'federation', 'refresh', String(id), '--json']);
      assert.equal(result.code, 0, result.err);
      assert.equal((JSON.parse(result.out) as { outcome: string }).outcome, 'unchanged');
      assert.ok(server.requests[0]!.headers['if-none-match']);
    });

    it('--require-signed-requests is kept with the federation (add and update), shown, audited, and read with its SPs', async () => {
      const signed = async () => (await findFederatedEntities(store.db, WIKI, Date.now()))[0]!.require_signed_requests;
      assert.equal(Number(await signed()), 0);
      const updated = await run(['saml', 'federation', 'update', String(id), '--require-signed-requests', '--json']);
      assert.equal(updated.code, 0, updated.err);
      assert.equal((JSON.parse(updated.out) as { require_signed_requests: boolean }).require_signed_requests, true);
      assert.equal(Number(await signed()), 1);
      const shown = await run(['saml', 'federation', 'show', String(id)]);
      assert.match(shown.out, /require_signed_requests\s+true/);
      for (const [args, message] of [
        [['--require-signed-requests', '--no-require-signed-requests'], /not both/],
        [[], /nothing to change/],
      ] as const) {
        const result = await run(['saml', 'federation', 'update', String(id), ...args]);
        assert.equal(result.code, 1);
        assert.match(result.err, message);
      }
      assert.match(
        (await run(['saml', 'federation', 'update', '999', '--require-signed-requests'])).err,
        /no federation 999/,
      );
      assert.equal((await run(['saml', 'federation', 'update', String(id), '--no-require-signed-requests'])).code, 0);
      assert.equal(Number(await signed()), 0);
      const audit = await store.db
        .selectFrom('audit_events')
        .select(['kind', 'details'])
        .where('kind', '=', 'saml_federation.update')
        .orderBy('id')
        .execute();
      assert.deepEqual(
        audit.map((a) => (JSON.parse(a.details!) as { require_signed_requests: boolean }).require_signed_requests),
        [true, false],
      );
      server.documents.set('/strict.xml', signedAggregate(federation, { entities: [spEntity({ entityId: STRICT })] }));
      const added = await run([
        'saml',
        'federation',
        'add',
        '--url',
        `${server.url}/strict.xml`,
        '--cert',
        certFile,
        '--require-signed-requests',
        '--json',
      ]);
      assert.equal(added.code, 0, added.err);
      const strictId = (JSON.parse(added.out) as { id: number }).id;
      const [strict] = await findFederatedEntities(store.db, STRICT, Date.now());
      assert.equal(Number(strict?.require_signed_requests), 1);
      const view = JSON.parse((await run(['saml', 'federation', 'show', String(strictId), '--json'])).out) as {
        require_signed_requests: boolean;
      };
      assert.equal(view.require_signed_requests, true);
      assert.equal((await run(['saml', 'federation', 'remove', String(strictId)])).code, 0);
    });

    it('a newer aggregate replaces the SPs', async () => {
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, { entities: [spEntity({ entityId: WIKI, categories: [RS] })] }),
      );
      const result = JSON.parse((await run(['saml', 'federation', 'refresh', String(id), '--json'])).out) as {
        outcome: string;
        entities: number;
      };
      assert.deepEqual([result.outcome, result.entities], ['updated', 1]);
      assert.deepEqual(await findFederatedEntities(store.db, JOURNAL, Date.now()), []);
    });

    it('a refresh that fails keeps the last verified SPs, with the error, a warning and a retry soon', async () => {
      server.down = true;
      const log = captureLog();
      const now = Date.now();
      const outcome = await refreshFederation(store, settings, id, { force: true, log, now });
      server.down = false;
      assert.equal(outcome.outcome, 'failed');
      const row = (await findFederation(store.db, id))!;
      assert.match(row.last_error ?? '', /HTTP 503/);
      assert.equal(row.state, 'fresh');
      assert.ok(Number(row.next_refresh_at) <= now + 5 * 60_000);
      assert.equal((await findFederatedEntities(store.db, WIKI, now)).length, 1);
      assert.ok(log.lines.some((l) => l.level === 'warn' && /refresh failed/.test(l.msg)));
      // a tampered aggregate is a failure too: the SPs stay as verified before
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, { entities: [spEntity({ entityId: WIKI })] }).replace(
          'wiki.example.edu/Shibboleth.sso',
          'evil.example.net/x',
        ),
      );
      assert.equal((await refreshFederation(store, settings, id, { force: true })).outcome, 'failed');
      const [wiki] = await findFederatedEntities(store.db, WIKI, Date.now());
      assert.match(wiki!.descriptor, /wiki.example.edu\/Shibboleth.sso/);
    });

    it('past validUntil the SPs are not served, the federation turns stale with an error log', async () => {
      server.down = true;
      const row = (await findFederation(store.db, id))!;
      const later = Number(row.valid_until) + 1000;
      assert.deepEqual(await findFederatedEntities(store.db, WIKI, later), []);
      const log = captureLog();
      await refreshDueFederations(store, settings, log, later);
      const stale = (await findFederation(store.db, id))!;
      assert.equal(stale.state, 'stale');
      assert.ok(log.lines.some((l) => l.level === 'error' && /expired/.test(l.msg) && l.obj.federation === id));
      // reported once: the next pass finds nothing to mark
      const again = captureLog();
      await refreshDueFederations(store, settings, again, later + 1);
      assert.ok(!again.lines.some((l) => l.level === 'error'));
      server.down = false;
      // a fresh aggregate brings it back
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [spEntity({ entityId: WIKI, categories: [RS] })],
          validUntil: inDays(10),
        }),
      );
      assert.equal((await refreshFederation(store, settings, id, { force: true })).outcome, 'updated');
      assert.equal((await findFederation(store.db, id))!.state, 'fresh');
    });

    it('one refresh at a time: a held lease is not claimed again until it ends', async () => {
      const now = Date.now();
      assert.equal(await claimFederationRefresh(store.db, id, now, now + 60_000, false), true);
      assert.equal(await claimFederationRefresh(store.db, id, now + 1, now + 60_000, false), false);
      assert.deepEqual(await refreshFederation(store, settings, id, { force: true, now: now + 2 }), {
        outcome: 'busy',
      });
      assert.equal(await claimFederationRefresh(store.db, id, now + 60_001, now + 120_000, false), true);
      await store.db.updateTable('saml_federations').set({ lease_until: null }).execute();
      // of concurrent claims exactly one succeeds
      const claims = await Promise.all(
        Array.from({ length: 5 }, () => claimFederationRefresh(store.db, id, now, now + 60_000, false)),
      );
      assert.equal(claims.filter(Boolean).length, 1);
      await store.db.updateTable('saml_federations').set({ lease_until: null }).execute();
      // two instances' jobs finding the refresh due at once: one fetches, the other stands aside
      await store.db
        .updateTable('saml_federations')
        .set({ next_refresh_at: now - 1 })
        .execute();
      const other = await openStore(db.url);
      try {
        server.requests.length = 0;
        const outcomes = await Promise.all([
          refreshFederation(store, settings, id, { now }),
          refreshFederation(other, settings, id, { now }),
        ]);
        assert.deepEqual(outcomes.map((o) => o.outcome).sort(), ['busy', 'unchanged']);
        assert.equal(server.requests.length, 1);
        const row = (await findFederation(store.db, id))!;
        assert.equal(row.lease_until, null);
        assert.ok(Number(row.next_refresh_at) > now);
      } finally {
        await other.close();
      }
    });

    it('above the size threshold the aggregate is verified in a child process, refusals included', async () => {
      const isolated = { ...settings, isolateAboveBytes: 0 };
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, { entities: [spEntity({ entityId: WIKI }), spEntity({ entityId: JOURNAL })] }),
      );
      const updated = await refreshFederation(store, isolated, id, { force: true });
      assert.deepEqual([updated.outcome, 'entities' in updated && updated.entities], ['updated', 2]);
      assert.equal((await findFederatedEntities(store.db, JOURNAL, Date.now())).length, 1);
      server.documents.set(
        '/fed.xml',
        signedAggregate(attacker, { entities: [spEntity({ entityId: 'https://evil.example.net/sp' })] }),
      );
      const refused = await refreshFederation(store, isolated, id, { force: true });
      assert.equal(refused.outcome, 'failed');
      assert.match('error' in refused ? refused.error : '', /does not verify with the expected key/);
      assert.deepEqual(await findFederatedEntities(store.db, 'https://evil.example.net/sp', Date.now()), []);
    });

    it("the service's timer refreshes a due federation, and stops", async () => {
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, { entities: [spEntity({ entityId: TIMER })], validUntil: inDays(9) }),
      );
      await store.db
        .updateTable('saml_federations')
        .set({ next_refresh_at: Date.now() - 1, lease_until: null })
        .execute();
      const stop = startFederationRefresh(store, settings, captureLog(), { intervalMs: 20 });
      try {
        for (let i = 0; i < 200 && (await findFederatedEntities(store.db, TIMER, Date.now())).length === 0; i++) {
          await new Promise((r) => setTimeout(r, 25));
        }
      } finally {
        stop();
      }
      assert.equal((await findFederatedEntities(store.db, TIMER, Date.now())).length, 1);
      assert.deepEqual(await findFederatedEntities(store.db, JOURNAL, Date.now()), []);
    });

    it('removes a federation and its SPs', async () => {
      const result = await run(['saml', 'federation', 'remove', String(id)]);
      assert.equal(result.code, 0, result.err);
      assert.deepEqual(await findFederatedEntities(store.db, WIKI, Date.now()), []);
      assert.match((await run(['saml', 'federation', 'show', String(id)])).err, /no federation/);
    });
  });
}
