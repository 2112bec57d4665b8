// Shared Signals limits a receiver runs into: the acknowledgements one poll may carry (a clear 400
// beyond them, never a 500 from a statement with too many parameters) and the advertised
// min_verification_interval (a second verification request inside it is a 429 with Retry-After,
// also when several arrive at once). Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken } from '../helpers.ts';
import type { TestContext } from '../helpers.ts';
import { disableUser } from '../../src/oauth/account-lifecycle.ts';

const POLL = 'urn:ietf:rfc:8936';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
/** What one poll may acknowledge, as docs/events.md and the OpenAPI document give it. */
const MAX_SETTLED_PER_POLL = 1000;

for (const dialect of dialects()) {
  describe(`Shared Signals limits (${dialect})`, () => {
    let ctx: TestContext;
    let token: string;
    let clock = Date.now();

    const call = (url: string, body: unknown) =>
      ctx.app.inject({
        method: 'POST',
        url,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });

    async function pollStream(): Promise<string> {
      const created = await ctx.app.inject({
        method: 'POST',
        url: '/ssf/streams',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify({
          delivery: { method: POLL },
          events_requested: [`${RISC}/account-disabled`, `${RISC}/account-enabled`],
        }),
      });
      assert.equal(created.statusCode, 201, created.body);
      return created.json().stream_id;
    }

    before(async () => {
      ctx = await startTestApp(dialect, { PUBLIC_URL: 'http://localhost:8080' }, { now: () => clock });
      await seedOrg(ctx);
      const rx = await seedClient(ctx, { scopes: ['ssf.manage'], orgs: [1] });
      token = await clientToken(ctx, rx.clientId, rx.secret, 'ssf.manage');
    });
    after(() => ctx?.close());

    it(`refuses a poll acknowledging more than ${MAX_SETTLED_PER_POLL} SETs with a 400, changing nothing`, async () => {
      const stream = await pollStream();
      const path = `/ssf/poll/${stream}`;
      await seedUser(ctx, 1, 'ada@example.org');
      await disableUser(ctx.store, 'ada@example.org');
      const pending = Object.keys((await call(path, {})).json().sets);
      assert.ok(pending.length > 0);

      // what a fuzzer sent: 40,000 jti values (a 500 from SQLite's parameter limit before)
      const many = Array.from({ length: 40_000 }, (_, i) => `set-${i + 1}`);
      const refused = await call(path, { ack: many });
      assert.equal(refused.statusCode, 400, refused.body);
      assert.match(refused.json().message, /ack must NOT have more than 1000 items/);
      const errs = Object.fromEntries(many.slice(0, MAX_SETTLED_PER_POLL + 1).map((jti) => [jti, { err: 'x' }]));
      const refusedErrs = await call(path, { setErrs: errs });
      assert.equal(refusedErrs.statusCode, 400, refusedErrs.body);
      assert.match(refusedErrs.json().message, /setErrs must NOT have more than 1000 properties/);
      assert.deepEqual(Object.keys((await call(path, {})).json().sets), pending, 'nothing was acknowledged');

      // the most one poll may carry is accepted, and acknowledges what it names
      const most = [...pending, ...many.slice(0, MAX_SETTLED_PER_POLL - pending.length)];
      const accepted = await call(path, { ack: most });
      assert.equal(accepted.statusCode, 200, accepted.body);
      assert.deepEqual(accepted.json(), { sets: {}, moreAvailable: false });
    });

    it('refuses a verification request inside min_verification_interval with 429 and Retry-After', async () => {
      const stream = await pollStream();
      const read = await ctx.app.inject({
        method: 'GET',
        url: `/ssf/streams?stream_id=${stream}`,
        headers: { authorization: `Bearer ${token}` },
      });
      const interval = read.json().min_verification_interval as number;
      assert.equal(interval, 60);

      assert.equal((await call('/ssf/verify', { stream_id: stream, state: 'one' })).statusCode, 204);
      clock += 20_000;
      const early = await call('/ssf/verify', { stream_id: stream, state: 'two' });
      assert.equal(early.statusCode, 429, early.body);
      assert.equal(early.headers['retry-after'], '40');
      assert.match(early.json().message, /min_verification_interval/);

      clock += 40_000;
      assert.equal((await call('/ssf/verify', { stream_id: stream, state: 'three' })).statusCode, 204);
      const states = Object.values((await call(`/ssf/poll/${stream}`, {})).json().sets as Record<string, string>).map(
        (jwt) =>
          (JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()).events[VERIFICATION] as never)['state'],
      );
      assert.deepEqual(states, ['one', 'three'], 'the refused request sent no event');
    });

    it('lets one of several simultaneous verification requests through', async () => {
      const stream = await pollStream();
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => call('/ssf/verify', { stream_id: stream, state: `s${i}` })),
      );
      const statuses = answers.map((a) => a.statusCode).sort();
      assert.deepEqual(statuses, [204, 429, 429, 429, 429, 429, 429, 429]);
      const sets = (await call(`/ssf/poll/${stream}`, {})).json().sets as Record<string, string>;
      assert.equal(Object.keys(sets).length, 1);
    });
  });
}
