// The pending deliveries of a Shared Signals stream whose delivery method changes go out the new way
// (to a real receiver, or to the poller), and a replay is refused when nothing would send it: its
// stream removed or disabled. A replayed delivery of a poll stream is offered to the poller again.
// Both databases.
import { describe, it, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  cli,
  type TestContext,
} from '../helpers.ts';
import { startReceiver, type Receiver, type Received } from './receiver.ts';
import { disableUser, enableUser } from '../../src/oauth/account-lifecycle.ts';
import { listDeliveries } from '../../src/store/events.ts';

const DEV = { PUBLIC_URL: 'http://localhost:8080' };
const PUSH = 'urn:ietf:rfc:8935';
const POLL = 'urn:ietf:rfc:8936';
const CAEP = 'https://schemas.openid.net/secevent/caep/event-type';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
const EVENTS = [`${CAEP}/session-revoked`, `${RISC}/account-disabled`, `${RISC}/account-enabled`];

const eventOf = (jwt: string) =>
  Object.keys((JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as { events: object }).events)[0];

for (const dialect of dialects()) {
  describe(`stream delivery method changes and replays (${dialect})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let token: string;

    const call = (method: 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) =>
      ctx.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
    const replay = (id: number) => cli(ctx.config.databaseUrl, ['events', 'replay', String(id)], '', DEV);
    const pollSets = async (streamId: string, body: object = {}) => {
      const res = await call('POST', `/ssf/poll/${streamId}`, body);
      assert.equal(res.statusCode, 200, res.body);
      return res.json().sets as Record<string, string>;
    };

    async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
      for (let i = 0; i < 100; i++) {
        const found = await probe();
        if (found !== undefined) return found;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timed out waiting for ${what}`);
    }

    before(async () => {
      // a failed push is retried 200 ms later, then 600 ms
      ctx = await startTestApp(dialect, { ...DEV, EVENTS_RETRY_BASE_MS: '200' });
      await seedOrg(ctx, 1, 'example.org');
      receiver = await startReceiver();
      const rx = await seedClient(ctx, { scopes: ['ssf.manage'], orgs: [1] });
      token = await clientToken(ctx, rx.clientId, rx.secret, 'ssf.manage');
    });
    after(async () => {
      await ctx?.close();
      await receiver?.close();
    });
    beforeEach(() => {
      receiver.received.length = 0;
      receiver.answer = () => 202;
    });

    it('a poll stream switched to push has its waiting events pushed, in order, and the later ones after them', async () => {
      const created = await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: EVENTS });
      assert.equal(created.statusCode, 201, created.body);
      const { stream_id } = created.json();
      await seedUser(ctx, 1, 'ann@example.org');
      await disableUser(ctx.store, 'ann@example.org');
      const switched = await call('PATCH', '/ssf/streams', {
        stream_id,
        delivery: { method: PUSH, endpoint_url: `${receiver.url}/ann` },
      });
      assert.equal(switched.statusCode, 200, switched.body);
      await enableUser(ctx.store, 'ann@example.org');
      const got = await receiver.waitFor(3, (r: Received) => r.path === '/ann', 5_000);
      assert.deepEqual(
        got.map((r) => eventOf(r.body)),
        [`${RISC}/account-disabled`, `${CAEP}/session-revoked`, `${RISC}/account-enabled`],
      );
      assert.equal((await call('DELETE', `/ssf/streams?stream_id=${stream_id}`)).statusCode, 204);
    });

    it('a push stream switched to poll keeps its undelivered events for the poller', async () => {
      receiver.answer = (r) => (r.path === '/bea' ? 503 : 202);
      const created = await call('POST', '/ssf/streams', {
        delivery: { method: PUSH, endpoint_url: `${receiver.url}/bea` },
        events_requested: EVENTS,
      });
      const { stream_id } = created.json();
      await seedUser(ctx, 1, 'bea@example.org');
      await disableUser(ctx.store, 'bea@example.org');
      const destination = `stream:${stream_id}`;
      await until('a failed push', async () =>
        (await listDeliveries(ctx.store.db, { destination })).some((d) => d.attempts > 0) ? true : undefined,
      );
      const switched = await call('PATCH', '/ssf/streams', { stream_id, delivery: { method: POLL } });
      assert.equal(switched.statusCode, 200, switched.body);
      // the job's retries were due 200 and 600 ms after the failure
      await new Promise((r) => setTimeout(r, 1_500));
      const sets = await pollSets(stream_id);
      assert.deepEqual(Object.values(sets).map(eventOf), [`${RISC}/account-disabled`, `${CAEP}/session-revoked`]);
      assert.deepEqual(await listDeliveries(ctx.store.db, { destination, state: 'dead' }), []);
      assert.equal((await call('DELETE', `/ssf/streams?stream_id=${stream_id}`)).statusCode, 204);
    });

    it('a replay is offered to the poller again, and refused once the stream is disabled or removed', async () => {
      const { stream_id } = (
        await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: EVENTS })
      ).json();
      await seedUser(ctx, 1, 'cat@example.org');
      await disableUser(ctx.store, 'cat@example.org');
      const sets = await pollSets(stream_id);
      assert.equal(Object.keys(sets).length, 2);
      assert.deepEqual(await pollSets(stream_id, { ack: Object.keys(sets) }), {});
      const [jti] = Object.keys(sets);
      const id = Number(jti!.slice('set-'.length));

      const replayed = await replay(id);
      assert.equal(replayed.code, 0, replayed.err);
      assert.deepEqual(Object.keys(await pollSets(stream_id)), [jti]);
      await pollSets(stream_id, { ack: [jti] });

      const disabled = await call('POST', '/ssf/status', { stream_id, status: 'disabled' });
      assert.equal(disabled.statusCode, 200, disabled.body);
      const refused = await replay(id);
      assert.notEqual(refused.code, 0);
      assert.match(refused.err, new RegExp(`delivery ${id} cannot be sent again: its stream ${stream_id} is disabled`));
      const [kept] = await listDeliveries(ctx.store.db, { destination: `stream:${stream_id}`, state: 'delivered' });
      assert.ok(kept, 'the refused replay changed nothing');

      assert.equal((await call('DELETE', `/ssf/streams?stream_id=${stream_id}`)).statusCode, 204);
      const gone = await replay(id);
      assert.notEqual(gone.code, 0);
      assert.match(
        gone.err,
        new RegExp(`delivery ${id} cannot be sent again: its stream ${stream_id} no longer exists`),
      );
      const [still] = await listDeliveries(ctx.store.db, { destination: `stream:${stream_id}` });
      assert.equal(still?.state, 'delivered');
    });
  });
}
