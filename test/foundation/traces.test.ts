// OpenTelemetry traces from the real service: an OTLP/HTTP receiver in the test collects the spans
// of a token request (answered before Fastify's routing), a passkey API call (Fastify, with its
// queries as children), a webhook delivery (its span, and its traceparent at the receiver) and a
// password sign-in (the hashing span); a traceparent from a trusted proxy
// continues its trace, one from any other peer starts a new one. Without OTEL_EXPORTER_OTLP_ENDPOINT
// no OpenTelemetry module is loaded at all (a module resolve hook in the service's process watches).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { randomBytes } from 'node:crypto';
import {
  dialects,
  migratedDatabase,
  seedClient,
  seedOrg,
  seedUser,
  spawnService,
  basicAuth,
  type ServiceProcess,
  type TestDatabase,
} from '../helpers.ts';
import { openStore } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { TEST_SECRET, cli } from '../helpers.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { startReceiver, type Receiver } from '../events/receiver.ts';

const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://rp.example.test/callback';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, string | number | boolean | undefined>;
  service: string | undefined;
  events: { name: string; attributes: Record<string, string | number | boolean | undefined> }[];
  status: { code?: number; message?: string };
  /** the span as the exporter sent it */
  raw: string;
}

function valueOf(v: OtlpValue): string | number | boolean | undefined {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.boolValue;
}

function attributes(list: { key: string; value: OtlpValue }[] = []) {
  return Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));
}

/** An OTLP/HTTP JSON receiver: every span posted to /v1/traces, flattened. */
async function otlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const rs of body.resourceSpans ?? []) {
          const service = attributes(rs.resource?.attributes)['service.name'] as string | undefined;
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              spans.push({
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId || undefined,
                name: s.name,
                kind: s.kind,
                attributes: attributes(s.attributes),
                service,
                events: (s.events ?? []).map((e: { name: string; attributes?: [] }) => ({
                  name: e.name,
                  attributes: attributes(e.attributes),
                })),
                status: s.status ?? {},
                raw: JSON.stringify(s),
              });
        }
      }
      res.setHeader('content-type', 'application/json');
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Waits until some span matches. */
async function spanWhere(spans: ReceivedSpan[], test: (s: ReceivedSpan) => boolean, what: string) {
  for (let i = 0; i < 100; i++) {
    const found = spans.find(test);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no span: ${what}; received: ${spans.map((s) => s.name).join(', ')}`);
}

/** A GET from a chosen loopback address (127.0.0.1 is the trusted proxy, 127.0.0.2 is not). */
function getFrom(localAddress: string, url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; requestId: string }>((resolve, reject) => {
    const req = httpRequest(url, { localAddress, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, requestId: res.headers['x-request-id'] as string }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The cookies of a chain of answers, sent back as one header. */
function jar() {
  const cookies = new Map<string, string>();
  return {
    keep(res: Response) {
      for (const line of res.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const eq = pair!.indexOf('=');
        cookies.set(pair!.slice(0, eq), pair!.slice(eq + 1));
      }
      return res;
    },
    header: () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
  };
}

const hex = (n: number) => randomBytes(n).toString('hex');

for (const dialect of dialects()) {
  describe(`traces (${dialect})`, () => {
    let db: TestDatabase;
    let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
    let service: ServiceProcess;
    let api: { clientId: string; secret: string };
    let rp: { clientId: string };
    let hooks: Receiver;
    let passkeyId: number;

    before(async () => {
      db = await migratedDatabase(dialect);
      const store = await openStore(db.url);
      const ctx = { store, keys: keyring(TEST_SECRET) };
      await seedOrg(ctx);
      const ada = await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      passkeyId = (await seedPasskeys(store, 1, [ada.id], 1))[0]!;
      api = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
      rp = await seedClient(ctx, { name: 'Portal', redirectUris: [REDIRECT], firstParty: true });
      await store.close();
      hooks = await startReceiver();
      const hook = await cli(
        db.url,
        ['webhook', 'add', '--org', '1', '--url', `${hooks.url}/hook`, '--events', 'passkey.deleted', '--json'],
        '',
        { PUBLIC_URL: 'http://127.0.0.1:8080' },
      );
      assert.equal(hook.code, 0, hook.err);
      receiver = await otlpReceiver();
      service = await spawnService({
        DATABASE_URL: db.url,
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'idp-under-test',
        OTEL_BSP_SCHEDULE_DELAY: '50',
        TRUST_PROXY: '127.0.0.1',
      });
    });
    after(async () => {
      await service?.stop();
      await receiver?.close();
      await hooks?.close();
      await db?.drop();
    });

    it('a token request and a passkey API call: request spans with the request id, queries as children', async () => {
      const tokenRes = await fetch(`${service.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(api.clientId, api.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.read%20passkey.delete',
      });
      assert.equal(tokenRes.status, 200);
      const tokenId = tokenRes.headers.get('x-request-id')!;
      const { access_token } = (await tokenRes.json()) as { access_token: string };
      const token = await spanWhere(
        receiver.spans,
        (s) => s.attributes['http.request.id'] === tokenId && s.kind === 2,
        'token request',
      );
      assert.equal(token.name, 'POST /oauth/token');
      assert.equal(token.service, 'idp-under-test');
      assert.equal(token.attributes['http.response.status_code'], 200);

      const listRes = await fetch(`${service.url}/2/passkey/1?eppn=ada%40example.org`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
      assert.equal(listRes.status, 200);
      const listId = listRes.headers.get('x-request-id')!;
      const request = await spanWhere(
        receiver.spans,
        (s) => s.attributes['http.request.id'] === listId && s.kind === 2,
        'passkey API request',
      );
      assert.equal(request.name, 'GET /2/passkey/:org_id');
      assert.equal(request.attributes['http.request.method'], 'GET');
      assert.equal(request.attributes['http.route'], '/2/passkey/:org_id');
      // by its pattern, never with the query string
      assert.equal(request.attributes['url.path'], '/2/passkey/:org_id');
      assert.equal(request.attributes['http.response.status_code'], 200);
      assert.equal(request.parentSpanId, undefined);
      // the queries of the request, in its trace, under its span, with the request id too
      const query = await spanWhere(
        receiver.spans,
        (s) => s.traceId === request.traceId && s.attributes['db.operation.name'] === 'select',
        'a query of the request',
      );
      assert.equal(query.attributes['db.system.name'], dialect === 'postgres' ? 'postgresql' : 'sqlite');
      assert.equal(query.attributes['http.request.id'], listId);
      const byId = new Map(receiver.spans.map((s) => [s.spanId, s]));
      let up: ReceivedSpan | undefined = query;
      while (up?.parentSpanId) up = byId.get(up.parentSpanId);
      assert.equal(up?.spanId, request.spanId);
      // nothing in any span carries the statement's text
      assert.ok(receiver.spans.every((s) => !JSON.stringify(s.attributes).includes('select ')));
      // nor the query string's personal data (not merely 'ada': request and trace ids are hex and
      // may contain it)
      const leaks = (s: ReceivedSpan) => /ada(@|%40)|example\.org/.test(JSON.stringify(s.attributes));
      assert.ok(!receiver.spans.some(leaks));
    });

    it('spans carry no exception message, no status description and no client address', async () => {
      const token = await fetch(`${service.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(api.clientId, api.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.read',
      });
      const { access_token } = (await token.json()) as { access_token: string };
      // a route that throws: its message names the parameter and why it was refused
      const bad = await fetch(`${service.url}/2/passkey/1?eppn=ada%40example.org&offset=not-an-offset`, {
        headers: { authorization: `Bearer ${access_token}` },
      });
      assert.equal(bad.status, 400);
      const message = ((await bad.json()) as { message: string }).message;
      assert.match(message, /offset/);
      const id = bad.headers.get('x-request-id')!;
      const span = await spanWhere(
        receiver.spans,
        (s) => s.attributes['http.request.id'] === id && s.kind === 2 && s.events.some((e) => e.name === 'exception'),
        'the refused request, with its exception',
      );
      const exception = span.events.find((e) => e.name === 'exception')!;
      assert.ok(exception.attributes['exception.type'], 'the type is kept');
      assert.equal(exception.attributes['exception.message'], undefined);
      assert.equal(exception.attributes['exception.stacktrace'], undefined);
      assert.ok(!span.status.message, 'no status description');
      const trace = receiver.spans.filter((s) => s.traceId === span.traceId);
      assert.ok(trace.every((s) => !s.raw.includes(message) && !s.raw.includes('not-an-offset')));
      // no client address on any span (TRACES_CLIENT_ADDRESS is off)
      assert.ok(receiver.spans.length > 0);
      for (const s of receiver.spans) {
        assert.equal(s.attributes['client.address'], undefined, s.name);
        assert.ok(!s.raw.includes('127.0.0.'), `${s.name} carries no address`);
      }
    });

    it('a webhook delivery has its span, and the receiver gets its traceparent', async () => {
      const tokenRes = await fetch(`${service.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(api.clientId, api.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.delete',
      });
      const { access_token } = (await tokenRes.json()) as { access_token: string };
      const deleted = await fetch(`${service.url}/2/passkey/1/${passkeyId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${access_token}` },
      });
      assert.equal(deleted.status, 200);
      const [delivered] = await hooks.waitFor(1);
      const traceparent = delivered!.headers.traceparent as string;
      const [, traceId, parentId] = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(traceparent) ?? [];
      assert.ok(traceId, `a traceparent: ${traceparent}`);
      const span = await spanWhere(receiver.spans, (s) => s.spanId === parentId, 'the delivery span');
      assert.equal(span.name, 'webhook delivery');
      assert.equal(span.traceId, traceId);
      assert.equal(span.attributes['event.delivery.kind'], 'webhook');
      assert.equal(span.attributes['event.delivery.attempt'], 1);
    });

    it('a password sign-in has a hashing span in its trace', async () => {
      const cookies = jar();
      const query = new URLSearchParams({
        client_id: rp.clientId,
        redirect_uri: REDIRECT,
        response_type: 'code',
        scope: 'openid',
      });
      const start = cookies.keep(await fetch(`${service.url}/oauth/authorization?${query}`, { redirect: 'manual' }));
      assert.equal(start.status, 303);
      const path = new URL(start.headers.get('location')!, service.url).pathname;
      const page = cookies.keep(await fetch(`${service.url}${path}`, { headers: { cookie: cookies.header() } }));
      assert.equal(page.status, 200);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1] ?? '';
      const login = await fetch(`${service.url}${path}/login`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: cookies.header(), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrf, username: 'ada@example.org', password: PASSWORD }).toString(),
      });
      assert.equal(login.status, 303);
      const loginId = login.headers.get('x-request-id')!;
      const hash = await spanWhere(
        receiver.spans,
        (s) =>
          s.name === 'password hash' &&
          s.attributes['http.request.id'] === loginId &&
          s.attributes['password.operation'] === 'verify',
        'the hashing span of the sign-in',
      );
      assert.equal(hash.attributes['password.operation'], 'verify');
      // the request's span ends after the hash's, and may come in a later batch
      const request = await spanWhere(
        receiver.spans,
        (s) => s.spanId !== hash.spanId && s.attributes['http.request.id'] === loginId && s.kind === 2,
        'the sign-in request span',
      );
      assert.equal(request.traceId, hash.traceId);
    });

    it("continues a trusted proxy's trace; a traceparent from any other peer starts a new trace", async () => {
      const traceId = hex(16);
      const traceparent = `00-${traceId}-${hex(8)}-01`;
      const trusted = await getFrom('127.0.0.1', `${service.url}/readyz`, { traceparent });
      assert.equal(trusted.status, 200);
      const continued = await spanWhere(
        receiver.spans,
        (s) => s.attributes['http.request.id'] === trusted.requestId && s.kind === 2,
        'the trusted request',
      );
      assert.equal(continued.traceId, traceId);

      const forged = hex(16);
      const untrusted = await getFrom('127.0.0.2', `${service.url}/readyz`, {
        traceparent: `00-${forged}-${hex(8)}-01`,
      });
      assert.equal(untrusted.status, 200);
      const fresh = await spanWhere(
        receiver.spans,
        (s) => s.attributes['http.request.id'] === untrusted.requestId && s.kind === 2,
        'the untrusted request',
      );
      assert.notEqual(fresh.traceId, forged);
      assert.equal(fresh.parentSpanId, undefined);
      assert.ok(receiver.spans.every((s) => s.traceId !== forged));
    });

    it('sends what is buffered on SIGTERM', async () => {
      const res = await fetch(`${service.url}/readyz`);
      const id = res.headers.get('x-request-id')!;
      assert.equal(await service.stop(), 0);
      assert.ok(receiver.spans.some((s) => s.attributes['http.request.id'] === id));
    });
  });
}

describe('traces off', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'idp-traces-'));
    // In the service's process: records every module resolved from OpenTelemetry's packages.
    writeFileSync(
      join(dir, 'watch.mjs'),
      `import { registerHooks } from 'node:module';
import { appendFileSync } from 'node:fs';
registerHooks({
  resolve(specifier, context, next) {
    const resolved = next(specifier, context);
    if (/[\\\\/]node_modules[\\\\/]@(opentelemetry|fastify[\\\\/]otel)[\\\\/]/.test(resolved.url))
      appendFileSync(process.env.WATCH_LOG, resolved.url + '\\n');
    return resolved;
  },
});
`,
    );
  });

  async function loaded(env: Record<string, string>): Promise<string> {
    const log = join(dir, `loaded-${hex(4)}.txt`);
    writeFileSync(log, '');
    const db = await migratedDatabase('sqlite');
    const service = await spawnService({
      DATABASE_URL: db.url,
      WATCH_LOG: log,
      NODE_OPTIONS: `--import=${pathToFileURL(join(dir, 'watch.mjs')).href}`,
      ...env,
    });
    try {
      assert.equal((await fetch(`${service.url}/readyz`)).status, 200);
    } finally {
      await service.stop();
      await db.drop();
    }
    return existsSync(log) ? readFileSync(log, 'utf8') : '';
  }

  // @opentelemetry/api itself is loaded anyway: prom-client (the metrics) imports it for its
  // process CPU metric. With no provider registered it is a set of no-op functions.
  const sdkModules = (list: string) => list.split('\n').filter((url) => url && !/@opentelemetry\/api\//.test(url));

  it('without OTEL_EXPORTER_OTLP_ENDPOINT no OpenTelemetry SDK, exporter or @fastify/otel module is loaded', async () => {
    assert.deepEqual(sdkModules(await loaded({})), []);
  });

  it('(the watch sees them when traces are on)', async () => {
    const receiver = await otlpReceiver();
    try {
      const list = sdkModules(await loaded({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url }));
      assert.ok(list.some((url) => url.includes('/@opentelemetry/sdk-trace-base/')));
      assert.ok(list.some((url) => url.includes('/@fastify/otel/')));
    } finally {
      await receiver.close();
    }
  });

  it('a malformed endpoint is a configuration error', async () => {
    await assert.rejects(
      spawnService({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://collector' }),
      /configuration error: OTEL_EXPORTER_OTLP_ENDPOINT: must be an http or https URL/,
    );
  });
});

describe('what a span may carry out (exportable)', () => {
  it('keeps the exception type and drops its message, the status description and client addresses unless asked', async () => {
    const { exportable } = await import('../../src/http/tracing-sdk.ts');
    const span = {
      name: 'GET /x',
      kind: 1,
      spanContext: () => ({ traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: 1 }),
      startTime: [0, 0],
      endTime: [0, 1],
      status: { code: 2, message: 'user ada@example.org has no passkey' },
      attributes: { 'client.address': '192.0.2.7', 'url.query': 'token=abc', 'http.route': '/x' },
      links: [],
      events: [
        {
          name: 'exception',
          time: [0, 0],
          attributes: {
            'exception.type': 'AppError',
            'exception.message': 'user ada@example.org has no passkey',
            'exception.stacktrace': 'AppError: user ada@example.org ...',
          },
        },
      ],
      duration: [0, 1],
      ended: true,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    } as unknown as Parameters<typeof exportable>[0];
    const out = exportable(span, false);
    assert.deepEqual(out.attributes, { 'http.route': '/x' });
    assert.deepEqual(out.status, { code: 2 });
    assert.deepEqual(out.events[0]!.attributes, { 'exception.type': 'AppError' });
    assert.equal(out.spanContext().spanId, 'b'.repeat(16));
    assert.deepEqual(exportable(span, true).attributes, { 'client.address': '192.0.2.7', 'http.route': '/x' });
  });
});
