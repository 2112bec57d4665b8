// `events replay` is delivered promptly, to a real receiver. Deliveries to one destination about one
// user go out in order, so a replayed delivery behind an earlier one of the same user that waits out a
// long backoff after a failure stayed pending until that retry (up to an hour later): the replay makes
// the earlier ones due too, and all go out at once, still in order. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, seedOrg, seedUser, cli, type TestContext } from '../helpers.ts';
import { startReceiver, type Receiver, type Received } from './receiver.ts';
import { addWebhook, removeWebhook } from '../../src/events/webhooks.ts';
import { targetPolicy } from '../../src/events/targets.ts';
import { disableUser } from '../../src/oauth/account-lifecycle.ts';
import { findDelivery, listDeliveries } from '../../src/store/events.ts';

// The receivers are on loopback over plain http: allowed while PUBLIC_URL is on localhost.
const ALLOW = { PUBLIC_URL: 'http://localhost:8080' };
const typeOf = (r: Received) => (JSON.parse(r.body) as { type: string }).type;

for (const dialect of dialects()) {
  describe(`events replay (${dialect})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;

    before(async () => {
      // a failed attempt is retried ten minutes later
      ctx = await startTestApp(dialect, { ...ALLOW, EVENTS_RETRY_BASE_MS: '600000' });
      await seedOrg(ctx);
      receiver = await startReceiver();
      await addWebhook(ctx.store, ctx.keys, targetPolicy(ctx.config), { orgId: 1, url: `${receiver.url}/hook` });
    });
    after(async () => {
      await ctx?.close();
      await receiver?.close();
    });

    async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
      for (let i = 0; i < 100; i++) {
        const found = await probe();
        if (found !== undefined) return found;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timed out waiting for ${what}`);
    }

    it('a replayed delivery goes out at once, after the earlier ones of its user, which were waiting', async () => {
      receiver.answer = () => 503;
      await seedUser(ctx, 1, 'eve@example.org');
      // the first attempt failed: the next is ten minutes away
      const created = await until('a failed attempt', async () => {
        const [d] = await listDeliveries(ctx.store.db, { state: 'pending' });
        return d && d.attempts === 1 ? d : undefined;
      });
      assert.ok(Number(created.next_attempt_at) > Date.now() + 60_000);
      receiver.answer = () => 200;
      await disableUser(ctx.store, 'eve@example.org');
      const pending = await listDeliveries(ctx.store.db, { state: 'pending' });
      assert.equal(pending.length, 3, 'user.created waiting, user.disabled and session.revoked behind it');
      const last = Math.max(...pending.map((d) => Number(d.id)));
      await new Promise((r) => setTimeout(r, 600));
      assert.equal(receiver.received.length, 0, 'nothing goes out while the first one waits');

      const replay = await cli(ctx.config.databaseUrl, ['events', 'replay', String(last), '--json'], '', ALLOW);
      assert.equal(replay.code, 0, replay.err);
      const got = await receiver.waitFor(3, () => true, 5_000);
      assert.deepEqual(got.map(typeOf), ['user.created', 'user.disabled', 'session.revoked']);
      // user.created was waiting for its retry; user.disabled, behind it, was due already
      assert.deepEqual(JSON.parse(replay.out), { id: last, state: 'pending', earlier_made_due: 1 });
      await until('every delivery recorded', async () =>
        (await listDeliveries(ctx.store.db, { state: 'pending' })).length === 0 ? true : undefined,
      );
    });

    it('a delivered delivery replayed goes out again at once', async () => {
      receiver.received.length = 0;
      receiver.answer = () => 200;
      await seedUser(ctx, 1, 'fay@example.org');
      const [first] = await receiver.waitFor(1);
      const delivered = await until('the delivery recorded', async () =>
        (await listDeliveries(ctx.store.db, { state: 'delivered' })).find((d) => d.data.includes('fay@example.org')),
      );
      const replay = await cli(ctx.config.databaseUrl, ['events', 'replay', String(delivered.id)], '', ALLOW);
      assert.equal(replay.code, 0, replay.err);
      assert.match(replay.out, /is pending again; the service sends it$/);
      const [, again] = await receiver.waitFor(2, () => true, 5_000);
      assert.equal(again!.headers['webhook-id'], first!.headers['webhook-id']);
    });

    it('a delivery to a webhook removed since is refused, with nothing changed', async () => {
      receiver.received.length = 0;
      const gone = await addWebhook(ctx.store, ctx.keys, targetPolicy(ctx.config), {
        orgId: 1,
        url: `${receiver.url}/gone`,
      });
      await seedUser(ctx, 1, 'gus@example.org');
      await receiver.waitFor(1, (r) => r.path === '/gone');
      const delivered = await until(
        'the delivery recorded',
        async () => (await listDeliveries(ctx.store.db, { destination: `webhook:${gone.id}`, state: 'delivered' }))[0],
      );
      await removeWebhook(ctx.store, gone.id);
      const replay = await cli(ctx.config.databaseUrl, ['events', 'replay', String(delivered.id)], '', ALLOW);
      assert.notEqual(replay.code, 0);
      assert.match(
        replay.err,
        new RegExp(`delivery ${delivered.id} cannot be sent again: its webhook ${gone.id} no longer exists`),
      );
      assert.equal((await findDelivery(ctx.store.db, Number(delivered.id)))?.state, 'delivered');
    });
  });
}
