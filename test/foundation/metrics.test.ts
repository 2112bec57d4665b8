import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestContext } from '../helpers.ts';

const TOKEN = 'metrics-token-0123456789-abcdefghijklmnop';

async function scrape(ctx: TestContext, remoteAddress: string, headers: Record<string, string> = {}) {
  return ctx.app.inject({ method: 'GET', url: '/metrics', remoteAddress, headers });
}

describe('/metrics access', () => {
  describe('by default: loopback and private ranges, no token', () => {
    let ctx: TestContext;
    before(async () => (ctx = await startTestApp('sqlite')));
    after(async () => ctx.close());

    for (const address of [
      '127.0.0.1',
      '::1',
      '10.1.2.3',
      '172.20.0.5',
      '192.168.1.5',
      'fd00::5',
      '::ffff:192.168.1.5',
      '::ffff:127.0.0.1',
    ]) {
      it(`answers ${address}`, async () => {
        const res = await scrape(ctx, address);
        assert.equal(res.statusCode, 200, res.body);
        assert.match(String(res.headers['content-type']), /^text\/plain/);
        assert.match(res.body, /process_cpu_seconds_total/);
      });
    }
    for (const address of ['203.0.113.9', '::ffff:203.0.113.9', '2001:db8::1', '172.32.0.1']) {
      it(`refuses ${address}: 403 JSON`, async () => {
        const res = await scrape(ctx, address);
        assert.equal(res.statusCode, 403);
        assert.deepEqual(res.json(), { code: 403, message: 'Metrics are not available from this address' });
        assert.doesNotMatch(res.body, /process_cpu/);
      });
    }
  });

  describe('METRICS_TOKEN and METRICS_ALLOW', () => {
    let ctx: TestContext;
    before(
      async () =>
        (ctx = await startTestApp('sqlite', { METRICS_TOKEN: TOKEN, METRICS_ALLOW: '127.0.0.0/8, 203.0.113.0/24' })),
    );
    after(async () => ctx.close());

    it('needs the bearer token from loopback too: 401 with a Bearer challenge', async () => {
      const missing = await scrape(ctx, '127.0.0.1');
      assert.equal(missing.statusCode, 401);
      assert.match(String(missing.headers['www-authenticate']), /^Bearer realm="metrics"$/);
      assert.deepEqual(missing.json(), { code: 401, message: 'Bearer token required' });
      for (const authorization of [
        `Bearer ${TOKEN}x`,
        `Bearer ${TOKEN.slice(0, -1)}`,
        'Bearer x',
        `Basic ${TOKEN}`,
        TOKEN,
      ]) {
        const wrong = await scrape(ctx, '127.0.0.1', { authorization });
        assert.equal(wrong.statusCode, 401, authorization);
        assert.match(String(wrong.headers['www-authenticate']), /^Bearer /);
      }
    });

    it('answers the right token from an allowed address', async () => {
      assert.equal((await scrape(ctx, '127.0.0.1', { authorization: `Bearer ${TOKEN}` })).statusCode, 200);
      assert.equal((await scrape(ctx, '203.0.113.77', { authorization: `Bearer ${TOKEN}` })).statusCode, 200);
    });

    it('refuses an address outside METRICS_ALLOW even with the token: 403', async () => {
      const res = await scrape(ctx, '10.1.2.3', { authorization: `Bearer ${TOKEN}` });
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().code, 403);
    });
  });

  it('judges the client address TRUST_PROXY gives, not the proxy', async () => {
    const ctx = await startTestApp('sqlite', { TRUST_PROXY: '1' });
    try {
      assert.equal((await scrape(ctx, '10.0.0.2', { 'x-forwarded-for': '203.0.113.9' })).statusCode, 403);
      assert.equal((await scrape(ctx, '10.0.0.2', { 'x-forwarded-for': '192.168.0.9' })).statusCode, 200);
    } finally {
      await ctx.close();
    }
  });

  it('over real HTTP on loopback: the token is needed, and then the metrics are served', async () => {
    const ctx = await startTestApp('sqlite', { METRICS_TOKEN: TOKEN }, { listen: 0 });
    try {
      const url = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}/metrics`;
      const refused = await fetch(url);
      assert.equal(refused.status, 401);
      assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="metrics"');
      assert.deepEqual(await refused.json(), { code: 401, message: 'Bearer token required' });
      const ok = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(ok.status, 200);
      assert.match(await ok.text(), /nodejs_heap_size_total_bytes/);
    } finally {
      await ctx.close();
    }
  });
});
