// Events to webhooks: the outbox written with the change, delivery to a real receiver, Standard
// Webhooks signatures checked by an independent implementation (the `standardwebhooks` package),
// retries after failures, dead letters and replay, the CLI. Both databases.
import { describe, it, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken, cli } from '../helpers.ts';
import type { TestContext } from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { startReceiver, type Receiver, type Received } from './receiver.ts';
import { twoStepBacklog } from './backlog.ts';
import { addWebhook, rotateWebhookSecret } from '../../src/events/webhooks.ts';
import { targetPolicy } from '../../src/events/targets.ts';
import { recordAudit, SYSTEM } from '../../src/audit/index.ts';
import { disableUser, removeUser } from '../../src/oauth/account-lifecycle.ts';
import { insertEvents, listDeliveries } from '../../src/store/events.ts';
import { retryDelay } from '../../src/events/delivery.ts';

// The receivers are on loopback over plain http: allowed while PUBLIC_URL is on localhost.
const ALLOW = { PUBLIC_URL: 'http://localhost:8080' };

interface Payload {
  type: string;
  timestamp: string;
  data: { id?: number; eppn: string; org_id: number; sub: string; actor: { type: string; id: string } };
}

const payload = (r: Received) => JSON.parse(r.body) as Payload;

for (const dialect of dialects()) {
  describe(`webhooks (${dialect})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let admin: string;
    let secret: string;
    let hook: number;
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args, '', ALLOW);
    const del = (path: string) =>
      ctx.app.inject({ method: 'DELETE', url: path, headers: { authorization: `Bearer ${admin}` } });

    before(async () => {
      ctx = await startTestApp(dialect, { ...ALLOW, EVENTS_RETRY_BASE_MS: '40' });
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other');
      receiver = await startReceiver();
      const c = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
      admin = await clientToken(ctx, c.clientId, c.secret, 'passkey.read passkey.delete');
      const created = await addWebhook(ctx.store, ctx.keys, targetPolicy(ctx.config), {
        orgId: 1,
        url: `${receiver.url}/hook`,
      });
      secret = created.secret;
      hook = created.id;
    });
    after(async () => {
      await ctx.close();
      await receiver.close();
    });
    beforeEach(() => {
      receiver.received.length = 0;
      receiver.answer = () => 200;
    });

    it('delivers a passkey deletion through the API, signed (verified by standardwebhooks)', async () => {
      const user = await seedUser(ctx, 1, 'ada@example.org');
      const [id] = await seedPasskeys(ctx.store, 1, [user.id], 1);
      assert.equal((await del(`/2/passkey/1/${id}`)).statusCode, 200);
      const [got] = await receiver.waitFor(1, (r) => payload(r).type === 'passkey.deleted');
      const verified = new Webhook(secret).verify(got!.body, got!.headers as Record<string, string>) as Payload;
      assert.equal(verified.type, 'passkey.deleted');
      assert.equal(verified.data.id, id);
      assert.equal(verified.data.eppn, 'ada@example.org');
      assert.equal(verified.data.org_id, 1);
      assert.equal(verified.data.sub, user.sub);
      assert.equal(verified.data.actor.type, 'client');
      assert.match(String(got!.headers['webhook-id']), /^msg_\d+$/);
      // a wrong secret does not verify
      assert.throws(() =>
        new Webhook(`whsec_${Buffer.alloc(32, 7).toString('base64')}`).verify(
          got!.body,
          got!.headers as Record<string, string>,
        ),
      );
    });

    it('writes events in the transaction of the change: a rolled-back change leaves none', async () => {
      await seedUser(ctx, 1, 'rollback@example.org');
      const before = (await listDeliveries(ctx.store.db, { limit: 1000 })).length;
      await assert.rejects(
        ctx.store.db.transaction().execute(async (trx) => {
          await recordAudit(trx, {
            action: 'user.disable',
            actor: SYSTEM,
            at: Date.now(),
            orgId: 1,
            eppn: 'rollback@example.org',
          });
          throw new Error('rolled back');
        }),
        /rolled back/,
      );
      assert.equal((await listDeliveries(ctx.store.db, { limit: 1000 })).length, before);
    });

    it('sends user lifecycle events in order per user, and only for the organization of the webhook', async () => {
      await seedUser(ctx, 1, 'bo@example.org', { password: 'correct horse battery staple' });
      await seedUser(ctx, 2, 'stranger@other.org');
      await disableUser(ctx.store, 'bo@example.org');
      await removeUser(ctx.store, 'bo@example.org');
      await receiver
        .waitFor(5, (r) => payload(r).data.eppn === 'bo@example.org')
        .catch((err: Error) => {
          throw new Error(`${err.message}: ${receiver.received.map((r) => r.body).join('\n')}`);
        });
      const types = receiver.received
        .filter((r) => payload(r).data.eppn === 'bo@example.org')
        .map((r) => payload(r).type);
      assert.deepEqual(types, ['user.created', 'password.changed', 'user.disabled', 'session.revoked', 'user.deleted']);
      assert.ok(!receiver.received.some((r) => payload(r).data.eppn === 'stranger@other.org'));
    });

    it('retries a receiver that fails for a while: every event arrives, exactly once after deduplication', async () => {
      let failures = 0;
      receiver.answer = () => (failures++ < 4 ? 500 : 200);
      const user = await seedUser(ctx, 1, 'cy@example.org');
      const ids = await seedPasskeys(ctx.store, 1, [user.id], 5);
      for (const id of ids) assert.equal((await del(`/2/passkey/1/${id}`)).statusCode, 200);
      await receiver.waitFor(
        5,
        (r) => payload(r).data.eppn === 'cy@example.org' && payload(r).type === 'passkey.deleted',
      );
      const mine = receiver.received.filter(
        (r) => payload(r).data.eppn === 'cy@example.org' && payload(r).type === 'passkey.deleted',
      );
      const unique = new Map(mine.map((r) => [r.headers['webhook-id'], payload(r).data.id]));
      assert.deepEqual([...unique.values()].sort(), [...ids].sort());
      // in order per subject: the passkeys arrive in the order they were deleted
      assert.deepEqual([...unique.values()], ids);
      assert.ok(failures >= 4);
      const rows = await listDeliveries(ctx.store.db, { destination: `webhook:${hook}`, limit: 1000 });
      assert.ok(
        rows.some((d) => d.attempts > 1 && d.state === 'delivered'),
        'a delivery needed several attempts',
      );
    });

    it('gives up after EVENTS_DEAD_LETTER_SECONDS, and `events replay` sends it again', async () => {
      const short = await startTestApp(dialect, {
        ...ALLOW,
        EVENTS_RETRY_BASE_MS: '40',
        EVENTS_DEAD_LETTER_SECONDS: '1',
      });
      const down = await startReceiver();
      try {
        await seedOrg(short, 1, 'example.org');
        down.answer = () => 503;
        await addWebhook(short.store, short.keys, targetPolicy(short.config), { orgId: 1, url: `${down.url}/x` });
        await seedUser(short, 1, 'dee@example.org');
        let dead: Awaited<ReturnType<typeof listDeliveries>> = [];
        for (let i = 0; i < 100 && dead.length === 0; i++) {
          await new Promise((r) => setTimeout(r, 50));
          dead = await listDeliveries(short.store.db, { state: 'dead' });
        }
        assert.equal(dead.length, 1);
        // delivery is not readiness: the receiver is down, the service is ready
        assert.equal((await short.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
        assert.match(dead[0]!.last_error ?? '', /HTTP 503/);
        assert.equal(dead[0]!.last_status, 503);
        down.answer = () => 200;
        const shown = await cli(short.config.databaseUrl, ['events', 'show', String(dead[0]!.id), '--json']);
        assert.equal(JSON.parse(shown.out).state, 'dead');
        const replay = await cli(short.config.databaseUrl, ['events', 'replay', String(dead[0]!.id), '--json']);
        assert.equal(replay.code, 0, replay.err);
        await down.waitFor(1);
        assert.equal(payload(down.received[0]!).type, 'user.created');
        const missing = await cli(short.config.databaseUrl, ['events', 'replay', '999999']);
        assert.notEqual(missing.code, 0);
        assert.match(missing.err, /delivery 999999 does not exist/);
      } finally {
        await short.close();
        await down.close();
      }
    });

    it('delivers a burst about many users once each, in order per user, without waiting for leases', async () => {
      const users = Array.from({ length: 100 }, (_, i) => `many${i}@example.org`);
      for (const eppn of users) await seedUser(ctx, 1, eppn);
      for (const eppn of users) await disableUser(ctx.store, eppn);
      const mine = (r: Received) => payload(r).data.eppn.startsWith('many');
      // created, disabled, session revoked: 300 events, long before a lease (15 s) could end
      const got = await receiver.waitFor(300, mine, 10_000);
      await new Promise((r) => setTimeout(r, 200));
      const all = receiver.received.filter(mine);
      assert.equal(all.length, 300, 'nothing sent twice');
      assert.equal(new Set(all.map((r) => r.headers['webhook-id'])).size, 300);
      for (const eppn of users)
        assert.deepEqual(
          got.filter((r) => payload(r).data.eppn === eppn).map((r) => payload(r).type),
          ['user.created', 'user.disabled', 'session.revoked'],
          eppn,
        );
    });

    it('sends a backlog in overlapping batches, still in order per user', async () => {
      // 150 users with two events each, written at once: more than a batch (50) is due together
      const events = twoStepBacklog('backlog', 150);
      receiver.answer = () => new Promise((r) => setTimeout(() => r(200), 20));
      await insertEvents(ctx.store.db, events);
      // deliveries claimed (leased) and not yet recorded, looked at while the backlog goes out
      let most = 0;
      let watching = true;
      const watch = (async () => {
        while (watching) {
          const { n } = await ctx.store.db
            .selectFrom('event_deliveries')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('subject', 'like', 'backlog%')
            .where('state', '=', 'pending')
            .where('lease_until', 'is not', null)
            .executeTakeFirstOrThrow();
          most = Math.max(most, Number(n));
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const mine = (r: Received) => payload(r).data.eppn.startsWith('backlog');
      const got = await receiver.waitFor(300, mine, 10_000).finally(() => (watching = false));
      await watch;
      // a batch is 50: more claimed at once means the next batch was claimed before the last was sent
      assert.ok(most > 50, `at most ${most} deliveries claimed at once`);
      for (let i = 0; i < 150; i++)
        assert.deepEqual(
          got.filter((r) => payload(r).data.eppn === `backlog${i}@example.org`).map((r) => payload(r).type),
          ['user.step1', 'user.step2'],
        );
    });

    it('keeps delivering to others while a receiver never answers', async () => {
      const hanging = await startReceiver();
      hanging.answer = () => new Promise<number>(() => undefined); // never answers
      try {
        await addWebhook(ctx.store, ctx.keys, targetPolicy(ctx.config), { orgId: 1, url: `${hanging.url}/x` });
        for (let i = 0; i < 60; i++) await seedUser(ctx, 1, `crowd${i}@example.org`);
        const started = Date.now();
        await receiver.waitFor(60, (r) => payload(r).data.eppn.startsWith('crowd'), 4000);
        assert.ok(Date.now() - started < 4000, 'the healthy receiver is not held up by the silent one');
      } finally {
        await hanging.close();
      }
    });

    it('signs with both secrets during a rotation overlap', async () => {
      const rotated = await rotateWebhookSecret(ctx.store, ctx.keys, hook, 60_000);
      await seedUser(ctx, 1, 'eve@example.org');
      const [got] = await receiver.waitFor(1, (r) => payload(r).data.eppn === 'eve@example.org');
      const headers = got!.headers as Record<string, string>;
      assert.equal(headers['webhook-signature']!.split(' ').length, 2);
      new Webhook(rotated.secret).verify(got!.body, headers);
      new Webhook(secret).verify(got!.body, headers);
      secret = rotated.secret;
    });

    it('backs off exponentially with jitter: by default the fourth attempt within 60 s', () => {
      const base = 4000;
      const at = [0];
      for (let n = 1; n <= 3; n++) at.push(at[n - 1]! + retryDelay(base, n, 0));
      assert.ok(at[3]! <= 60_000 && at[3]! >= 45_000, `fourth attempt at ${at[3]} ms`);
      assert.ok(retryDelay(base, 2, 1) < retryDelay(base, 2, 0), 'jitter lowers the wait');
      assert.equal(retryDelay(base, 30, 0), 3600_000);
    });

    describe('CLI', () => {
      it('webhook add prints id and a whsec_ secret; list, test and remove', async () => {
        const added = await run(
          'webhook',
          'add',
          '--org',
          '1',
          '--url',
          `${receiver.url}/cli`,
          '--events',
          'user.created,passkey.deleted',
          '--json',
        );
        assert.equal(added.code, 0, added.err);
        const { id, secret: s } = JSON.parse(added.out);
        assert.match(s, /^whsec_[A-Za-z0-9+/]+=*$/);
        const listed = JSON.parse((await run('webhook', 'list', '--org', '1', '--json')).out);
        const mine = listed.find((w: { id: number }) => w.id === id);
        assert.deepEqual(mine.events, ['user.created', 'passkey.deleted']);
        assert.ok(!JSON.stringify(listed).includes('whsec_'), 'secrets are not listed');
        const tested = await run('webhook', 'test', String(id), '--json');
        assert.equal(tested.code, 0, tested.err);
        assert.equal(JSON.parse(tested.out).status, 200);
        const [test] = await receiver.waitFor(1, (r) => r.path === '/cli');
        new Webhook(s).verify(test!.body, test!.headers as Record<string, string>);
        assert.equal(payload(test!).type, 'webhook.test');
        // only the types asked for
        await seedUser(ctx, 1, 'fay@example.org');
        await disableUser(ctx.store, 'fay@example.org');
        await receiver.waitFor(2, (r) => r.path === '/cli');
        await new Promise((r) => setTimeout(r, 300));
        assert.deepEqual(
          receiver.received.filter((r) => r.path === '/cli').map((r) => payload(r).type),
          ['webhook.test', 'user.created'],
        );
        assert.equal((await run('webhook', 'remove', String(id))).code, 0);
        assert.ok(!JSON.parse((await run('webhook', 'list', '--json')).out).some((w: { id: number }) => w.id === id));
        const again = await run('webhook', 'remove', String(id));
        assert.notEqual(again.code, 0);
        assert.match(again.err, /does not exist/);
      });

      it('refuses an unknown organization, a malformed or private URL and an unknown event type, registering nothing', async () => {
        const before = JSON.parse((await run('webhook', 'list', '--json')).out).length;
        const cases: [string[], RegExp, Record<string, string>][] = [
          [['--org', '9', '--url', 'https://hooks.example.com/x'], /organization 9 does not exist/, ALLOW],
          [['--org', '1', '--url', 'not a url'], /is not an absolute URL/, ALLOW],
          [['--org', '1', '--url', 'ftp://hooks.example.com/x'], /https/, ALLOW],
          [['--org', '1', '--url', 'http://hooks.example.com/x'], /must be https/, ALLOW],
          [
            ['--org', '1', '--url', 'https://hooks.example.com/x', '--events', 'user.created,user.exploded'],
            /unknown event type 'user.exploded'/,
            ALLOW,
          ],
          [['--org', '1', '--url', 'https://10.1.2.3/x'], /private or special-use/, {}],
          [['--org', '1', '--url', 'https://[::1]/x'], /private or special-use/, {}],
          [['--org', '1', '--url', 'https://localhost/x'], /loopback/, {}],
        ];
        for (const [args, message, env] of cases) {
          const r = await cli(ctx.config.databaseUrl, ['webhook', 'add', ...args], '', env);
          assert.notEqual(r.code, 0, args.join(' '));
          assert.match(r.err, message, args.join(' '));
        }
        assert.equal(JSON.parse((await run('webhook', 'list', '--json')).out).length, before);
      });

      it('events list filters by state and destination', async () => {
        const all = JSON.parse((await run('events', 'list', '--webhook', String(hook), '--json')).out);
        assert.ok(all.length > 0 && all.every((d: { destination: string }) => d.destination === `webhook:${hook}`));
        const delivered = JSON.parse((await run('events', 'list', '--state', 'delivered', '--json')).out);
        assert.ok(delivered.every((d: { state: string }) => d.state === 'delivered'));
        const bad = await run('events', 'list', '--state', 'lost');
        assert.notEqual(bad.code, 0);
        assert.match(bad.err, /--state must be one of pending, delivered, dead/);
      });
    });

    it('reports the outbox in /metrics', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /^idp_events_outbox_depth \d+/m);
      assert.match(res.body, /^idp_events_oldest_undelivered_age_seconds [\d.e+-]+/m);
      assert.match(res.body, /^idp_event_deliveries_total\{destination="webhook",outcome="delivered"\} [1-9]/m);
    });
  });
}
