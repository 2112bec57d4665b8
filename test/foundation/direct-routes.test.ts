// Direct routes (src/http/direct.ts) with a stand-in for Fastify's handler, over real HTTP: which
// requests take the route, which fall through, what a route's request carries, the log lines and
// the metrics, and a failing route.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { directRoutes, type DirectRequest } from '../../src/http/direct.ts';
import { trustProxy } from '../../src/http/client-address.ts';
import { metrics } from '../../src/http/metrics.ts';
import { parseSamples, total } from './metrics-scrape.ts';

interface Logged {
  msg: string;
  reqId?: string;
  level: number;
  req?: Record<string, unknown>;
  res?: Record<string, unknown>;
  responseTime?: number;
  err?: { message: string };
}

describe('direct routes', () => {
  const lines: Logged[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Logged);
      done();
    },
  });
  const log = Fastify({ logger: { level: 'info', stream } }).log;
  const seen: DirectRequest[] = [];
  const fellThrough: string[] = [];
  let server: Server;
  let base: string;
  const direct = directRoutes(trustProxy(1), () => log);

  before(async () => {
    direct.add({
      method: 'POST',
      path: '/direct',
      handle(req: IncomingMessage, res: ServerResponse, request: DirectRequest) {
        seen.push(request);
        request.log().info({ custom: true }, 'inside the route');
        res.setHeader('content-type', 'text/plain');
        res.end(`direct ${req.url}`);
      },
    });
    direct.add({
      method: 'POST',
      path: '/broken',
      handle() {
        throw new Error('a defect in the route');
      },
    });
    const fastify = (req: IncomingMessage, res: ServerResponse) => {
      fellThrough.push(`${req.method} ${req.url}`);
      res.end('fastify');
    };
    server = direct.serverFactory(fastify, { keepAliveTimeout: 1234, requestTimeout: 5678, connectionTimeout: 0 });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("applies Fastify's server options to the server it makes", () => {
    assert.equal(server.keepAliveTimeout, 1234);
    assert.equal(server.requestTimeout, 5678);
  });

  it('answers exactly its method and URL; everything else goes to Fastify', async () => {
    const direct = await fetch(`${base}/direct`, { method: 'POST' });
    assert.equal(await direct.text(), 'direct /direct');
    for (const [method, url] of [
      ['GET', '/direct'],
      ['POST', '/direct?x=1'],
      ['POST', '/direct/'],
      ['POST', '/DIRECT'],
      ['POST', '/other'],
    ] as const) {
      const res = await fetch(`${base}${url}`, { method });
      assert.equal(await res.text(), 'fastify', `${method} ${url}`);
      assert.equal(fellThrough.at(-1), `${method} ${url}`);
    }
  });

  it('gives the route the request id, the client address under TRUST_PROXY and a bound logger', async () => {
    seen.length = 0;
    lines.length = 0;
    await (await fetch(`${base}/direct`, { method: 'POST', headers: { 'x-request-id': 'given-id.1' } })).text();
    await (
      await fetch(`${base}/direct`, {
        method: 'POST',
        headers: { 'x-request-id': 'not an id!', 'x-forwarded-for': '203.0.113.9, 198.51.100.4' },
      })
    ).text();
    assert.equal(seen[0]!.id, 'given-id.1');
    assert.equal(seen[0]!.ip, '127.0.0.1');
    assert.match(seen[1]!.id, /^[0-9a-f-]{36}$/);
    // one trusted hop (the loopback proxy): the address it names is the client's
    assert.equal(seen[1]!.ip, '198.51.100.4');

    const mine = lines.filter((l) => l.reqId === 'given-id.1');
    assert.deepEqual(
      mine.map((l) => l.msg),
      ['incoming request', 'inside the route', 'request completed'],
    );
    // through the logger's req serializer, as Fastify's own line
    assert.deepEqual(mine[0]!.req, { method: 'POST', url: '/direct', remoteAddress: '127.0.0.1' });
    assert.deepEqual(mine[2]!.res, { statusCode: 200 });
    assert.equal(typeof mine[2]!.responseTime, 'number');
  });

  it('logs no request lines above info level, and still binds the route logger to the request id', async () => {
    lines.length = 0;
    log.level = 'warn';
    try {
      seen.length = 0;
      await (await fetch(`${base}/direct`, { method: 'POST', headers: { 'x-request-id': 'quiet' } })).text();
      assert.equal(lines.length, 0);
      seen[0]!.log().warn('a warning');
      assert.deepEqual(
        lines.map((l) => [l.msg, l.reqId]),
        [['a warning', 'quiet']],
      );
    } finally {
      log.level = 'info';
    }
  });

  it('counts each answer in the request metrics by path, method and status', async () => {
    const labels = { route: '/direct', method: 'POST', status: '200' };
    const count = async () => total(parseSamples(await metrics.metrics()), 'idp_http_requests_total', labels);
    const before = await count();
    for (let i = 0; i < 3; i++) await (await fetch(`${base}/direct`, { method: 'POST' })).text();
    assert.equal((await count()) - before, 3);
  });

  it('answers a failing route with a 500 and no detail, logs the error, and goes on serving', async () => {
    lines.length = 0;
    const res = await fetch(`${base}/broken`, { method: 'POST' });
    assert.equal(res.status, 500);
    const body = await res.text();
    assert.doesNotMatch(body, /defect/);
    // the service's own error body, as its error handler gives a 500
    assert.deepEqual(JSON.parse(body), { code: 500, message: 'Internal Server Error' });
    assert.equal(lines.find((l) => l.msg === 'direct route failed')?.err?.message, 'a defect in the route');
    assert.equal(await (await fetch(`${base}/direct`, { method: 'POST' })).text(), 'direct /direct');
  });

  it('once closing, sends every request to Fastify', async () => {
    direct.close();
    assert.equal(await (await fetch(`${base}/direct`, { method: 'POST' })).text(), 'fastify');
  });
});
