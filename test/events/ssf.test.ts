// OpenID Shared Signals transmitter: metadata, stream management by a receiver with a
// client-credentials token (scope ssf.manage), SETs pushed to a real receiver (RFC 8935) and
// polled (RFC 8936), each verified against the JWKS with jose; bad input changes nothing. Both
// databases.
import { describe, it, before, after, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken } from '../helpers.ts';
import type { TestContext } from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { startReceiver, type Receiver } from './receiver.ts';
import { disableUser, enableUser } from '../../src/oauth/account-lifecycle.ts';

const DEV = { PUBLIC_URL: 'http://localhost:8080' };
const PUSH = 'urn:ietf:rfc:8935';
const POLL = 'urn:ietf:rfc:8936';
const CAEP = 'https://schemas.openid.net/secevent/caep/event-type';
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
const ALL = [
  `${CAEP}/credential-change`,
  `${CAEP}/session-revoked`,
  `${RISC}/account-disabled`,
  `${RISC}/account-enabled`,
  `${RISC}/account-purged`,
];

type Set = JWTPayload & { sub_id: Record<string, string>; events: Record<string, Record<string, unknown>> };

for (const dialect of dialects()) {
  describe(`Shared Signals (${dialect})`, () => {
    let ctx: TestContext;
    let receiver: Receiver;
    let rx: { clientId: string; secret: string };
    let token: string;
    let otherToken: string;
    let jwks: JSONWebKeySet;
    const issuer = DEV.PUBLIC_URL;

    const call = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, body?: unknown, bearer = token) =>
      ctx.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${bearer}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
      });

    async function verifySet(jwt: string): Promise<Set> {
      assert.equal(decodeProtectedHeader(jwt).typ, 'secevent+jwt');
      const { payload } = await jwtVerify(jwt, createLocalJWKSet(jwks), {
        issuer,
        audience: rx.clientId,
        algorithms: ['ES256'],
        typ: 'secevent+jwt',
      });
      assert.ok(typeof payload.jti === 'string' && payload.jti.length > 0);
      assert.ok(typeof payload.iat === 'number');
      return payload as Set;
    }

    before(async () => {
      ctx = await startTestApp(dialect, { ...DEV, EVENTS_RETRY_BASE_MS: '40' });
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other');
      receiver = await startReceiver();
      receiver.answer = () => 202;
      rx = await seedClient(ctx, { scopes: ['ssf.manage', 'passkey.delete'], orgs: [1] });
      token = await clientToken(ctx, rx.clientId, rx.secret, 'ssf.manage');
      const other = await seedClient(ctx, { scopes: ['ssf.manage'], orgs: [2] });
      otherToken = await clientToken(ctx, other.clientId, other.secret, 'ssf.manage');
      jwks = (await ctx.app.inject({ method: 'GET', url: '/openid/jwks' })).json();
    });
    after(async () => {
      await ctx.close();
      await receiver.close();
    });
    beforeEach(() => {
      receiver.received.length = 0;
    });

    it('publishes the transmitter configuration', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/.well-known/ssf-configuration' });
      assert.equal(res.statusCode, 200);
      const meta = res.json();
      assert.equal(meta.issuer, issuer);
      assert.equal(meta.jwks_uri, `${issuer}/openid/jwks`);
      assert.deepEqual(meta.delivery_methods_supported, [PUSH, POLL]);
      assert.equal(meta.configuration_endpoint, `${issuer}/ssf/streams`);
      assert.equal(meta.verification_endpoint, `${issuer}/ssf/verify`);
      assert.equal(meta.spec_version, '1_0');
    });

    it('pushes credential-change SETs for a passkey deleted through the passkey API, and a verification event', async () => {
      const created = await call('POST', '/ssf/streams', {
        delivery: { method: PUSH, endpoint_url: `${receiver.url}/push`, authorization_header: 'Bearer rx-secret' },
        events_requested: ALL,
        description: 'test receiver',
      });
      assert.equal(created.statusCode, 201, created.body);
      const stream = created.json();
      assert.deepEqual(stream.events_delivered, ALL);
      assert.equal(stream.aud, rx.clientId);

      const user = await seedUser(ctx, 1, 'ada@example.org');
      const [id] = await seedPasskeys(ctx.store, 1, [user.id], 1);
      const admin = await clientToken(ctx, rx.clientId, rx.secret, 'passkey.delete');
      const deleted = await ctx.app.inject({
        method: 'DELETE',
        url: `/2/passkey/1/${id}`,
        headers: { authorization: `Bearer ${admin}` },
      });
      assert.equal(deleted.statusCode, 200);
      const [got] = await receiver.waitFor(1, (r) => r.path === '/push');
      assert.equal(got!.headers['content-type'], 'application/secevent+jwt');
      assert.equal(got!.headers.authorization, 'Bearer rx-secret');
      const set = await verifySet(got!.body);
      assert.deepEqual(set.sub_id, { format: 'iss_sub', iss: issuer, sub: user.sub });
      const change = set.events[`${CAEP}/credential-change`]!;
      assert.equal(change.change_type, 'delete');
      assert.equal(change.credential_type, 'fido2-platform');
      assert.equal(change.initiating_entity, 'admin');

      assert.equal(
        (await call('POST', '/ssf/verify', { stream_id: stream.stream_id, state: 'abc123' })).statusCode,
        204,
      );
      const [verification] = await receiver.waitFor(1, (r) =>
        Object.keys(decodePayload(r.body).events).includes(VERIFICATION),
      );
      const v = await verifySet(verification!.body);
      assert.deepEqual(v.events[VERIFICATION], { state: 'abc123' });
      assert.deepEqual(v.sub_id, { format: 'opaque', id: stream.stream_id });

      assert.equal((await call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`)).statusCode, 204);
    });

    it('serves a poll stream: account-disabled and session-revoked, acknowledged once', async () => {
      const created = await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: ALL });
      assert.equal(created.statusCode, 201, created.body);
      const stream = created.json();
      assert.equal(stream.delivery.endpoint_url, `${issuer}/ssf/poll/${stream.stream_id}`);
      const pollPath = `/ssf/poll/${stream.stream_id}`;

      await seedUser(ctx, 1, 'bo@example.org');
      await disableUser(ctx.store, 'bo@example.org');
      await enableUser(ctx.store, 'bo@example.org');
      const first = await call('POST', pollPath, { maxEvents: 10, returnImmediately: true });
      assert.equal(first.statusCode, 200, first.body);
      const sets = first.json().sets as Record<string, string>;
      const verified = await Promise.all(Object.values(sets).map(verifySet));
      assert.deepEqual(
        verified.map((s) => Object.keys(s.events)[0]),
        [`${RISC}/account-disabled`, `${CAEP}/session-revoked`, `${RISC}/account-enabled`],
      );
      for (const [jti, jwt] of Object.entries(sets)) assert.equal((await verifySet(jwt)).jti, jti);
      // not acknowledged: the same SETs again; acknowledged: gone
      assert.deepEqual(Object.keys((await call('POST', pollPath, {})).json().sets), Object.keys(sets));
      const acked = await call('POST', pollPath, { ack: Object.keys(sets), returnImmediately: true });
      assert.deepEqual(acked.json(), { sets: {}, moreAvailable: false });
      assert.equal((await call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`)).statusCode, 204);
    });

    it('hears only about the subjects added once a subject is added', async () => {
      const stream = (await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: ALL })).json();
      const cy = await seedUser(ctx, 1, 'cy@example.org', { email: 'cy@example.org' });
      await seedUser(ctx, 1, 'dee@example.org');
      const add = await call('POST', '/ssf/subjects/add', {
        stream_id: stream.stream_id,
        subject: { format: 'email', email: 'CY@example.org' },
      });
      assert.equal(add.statusCode, 200, add.body);
      await disableUser(ctx.store, 'dee@example.org');
      await disableUser(ctx.store, 'cy@example.org');
      const sets = Object.values(
        (await call('POST', `/ssf/poll/${stream.stream_id}`, {})).json().sets as Record<string, string>,
      );
      const subjects = (await Promise.all(sets.map(verifySet))).map((s) => s.sub_id.sub);
      assert.ok(subjects.length === 2 && subjects.every((s) => s === cy.sub), JSON.stringify(subjects));
      const removed = await call('POST', '/ssf/subjects/remove', {
        stream_id: stream.stream_id,
        subject: { format: 'iss_sub', iss: issuer, sub: cy.sub },
      });
      assert.equal(removed.statusCode, 204);
      await call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`);
    });

    it('reads, updates, pauses and lists streams', async () => {
      const stream = (await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: [] })).json();
      const patched = await call('PATCH', '/ssf/streams', {
        stream_id: stream.stream_id,
        events_requested: [`${RISC}/account-purged`],
      });
      assert.equal(patched.statusCode, 200, patched.body);
      assert.deepEqual(patched.json().events_requested, [`${RISC}/account-purged`]);
      const read = (await call('GET', `/ssf/streams?stream_id=${stream.stream_id}`)).json();
      assert.deepEqual(read.events_requested, [`${RISC}/account-purged`]);
      const listed = (await call('GET', '/ssf/streams')).json();
      assert.ok(Array.isArray(listed) && listed.some((s: { stream_id: string }) => s.stream_id === stream.stream_id));
      const paused = await call('POST', '/ssf/status', {
        stream_id: stream.stream_id,
        status: 'paused',
        reason: 'maintenance',
      });
      assert.deepEqual(paused.json(), { stream_id: stream.stream_id, status: 'paused', reason: 'maintenance' });
      assert.equal((await call('GET', `/ssf/status?stream_id=${stream.stream_id}`)).json().status, 'paused');
      await call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`);
    });

    it('refuses bad input with a clear error and changes nothing', async () => {
      const stream = (await call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: ALL })).json();
      const stranger = await seedUser(ctx, 2, 'stranger@other.org');
      const count = async () => ((await call('GET', '/ssf/streams')).json() as unknown[]).length;
      const before = await count();
      const cases: [string, ReturnType<typeof call>, number, RegExp][] = [
        [
          'unknown event type',
          call('POST', '/ssf/streams', { delivery: { method: POLL }, events_requested: ['urn:example:nope'] }),
          400,
          /unsupported event type 'urn:example:nope'/,
        ],
        ['malformed JSON', call('POST', '/ssf/streams', '{"delivery": '), 400, /./],
        ['no delivery', call('POST', '/ssf/streams', { events_requested: ALL }), 400, /delivery must be an object/],
        [
          'unknown method',
          call('POST', '/ssf/streams', { delivery: { method: 'urn:example:carrier-pigeon' } }),
          400,
          /delivery.method/,
        ],
        [
          'private push URL',
          call('POST', '/ssf/streams', { delivery: { method: PUSH, endpoint_url: 'http://hooks.example.com/x' } }),
          400,
          /must be https/,
        ],
        [
          "another client's stream",
          call('GET', `/ssf/streams?stream_id=${stream.stream_id}`, undefined, otherToken),
          404,
          /Stream not found/,
        ],
        [
          "another client's stream (delete)",
          call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`, undefined, otherToken),
          404,
          /Stream not found/,
        ],
        [
          'unknown stream',
          call('POST', '/ssf/status', { stream_id: 'nope', status: 'paused' }),
          404,
          /Stream not found/,
        ],
        [
          'bad status',
          call('POST', '/ssf/status', { stream_id: stream.stream_id, status: 'asleep' }),
          400,
          /status must be one of/,
        ],
        [
          'foreign subject',
          call('POST', '/ssf/subjects/add', {
            stream_id: stream.stream_id,
            subject: { format: 'iss_sub', iss: issuer, sub: stranger.sub },
          }),
          400,
          /not a user of an organization this client administers/,
        ],
        [
          'unknown subject format',
          call('POST', '/ssf/subjects/add', {
            stream_id: stream.stream_id,
            subject: { format: 'phone_number', phone_number: '+4712345678' },
          }),
          400,
          /subject.format/,
        ],
        ['no token', ctx.app.inject({ method: 'GET', url: '/ssf/streams' }), 401, /Token missing or invalid/],
        [
          'wrong scope',
          call('GET', '/ssf/streams', undefined, await clientToken(ctx, rx.clientId, rx.secret, 'passkey.delete')),
          401,
          /./,
        ],
      ];
      for (const [what, pending, status, message] of cases) {
        const res = await pending;
        assert.equal(res.statusCode, status, `${what}: ${res.body}`);
        assert.match(res.json().message, message, what);
      }
      assert.equal(await count(), before);
      assert.equal((await call('GET', `/ssf/status?stream_id=${stream.stream_id}`)).json().status, 'enabled');
      const subjects = await ctx.store.db.selectFrom('ssf_stream_subjects').selectAll().execute();
      assert.ok(!subjects.some((s) => s.sub === stranger.sub));
      await call('DELETE', `/ssf/streams?stream_id=${stream.stream_id}`);
    });
  });
}

function decodePayload(jwt: string): Set {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Set;
}
