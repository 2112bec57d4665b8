import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { checkuserWorld, get, type CheckuserWorld } from './fixtures.ts';

const exists = (id: string) => `/userinfo/v1/exists/${encodeURIComponent(id)}`;

for (const dialect of dialects()) {
  describe(`user-existence rate limit, CHECKUSER_RATE_LIMIT=3 (${dialect})`, () => {
    let w: CheckuserWorld;
    // 45 s into a minute window, so the window cannot roll over mid-test
    let clock = Math.floor(Date.now() / 60_000) * 60_000 + 45_000;
    before(async () => {
      w = await checkuserWorld(dialect, { CHECKUSER_RATE_LIMIT: '3' }, () => clock);
    });
    after(() => w.ctx.close());

    it('counts lookups per client across all three endpoints and answers 429 with Retry-After once over', async () => {
      const ok = [
        await get(w.ctx, exists('idp:alice@example.org'), w.tokens.current),
        await get(w.ctx, '/userinfo/v1/exists-by-mail/example.org/nobody%40example.org', w.tokens.current),
        await get(w.ctx, '/check_single/alice%40example.org', w.tokens.legacy),
      ];
      assert.deepEqual(
        ok.map((r) => r.statusCode),
        [200, 200, 200],
      );
      for (const [url, token] of [
        [exists('idp:alice@example.org'), w.tokens.current],
        ['/check_single/alice%40example.org', w.tokens.legacy],
      ] as const) {
        const res = await get(w.ctx, url, token);
        assert.equal(res.statusCode, 429);
        assert.deepEqual(res.json(), { code: 429, message: 'Too many requests; try again later' });
        assert.equal(res.headers['retry-after'], '15');
      }
    });

    it('keeps other clients within their own limit', async () => {
      const res = await get(w.ctx, exists('idp:alice@example.org'), w.tokens.unconfigured);
      assert.equal(res.statusCode, 403);
    });

    it('answers 401, not 429, to a request without a valid token', async () => {
      const res = await get(w.ctx, exists('idp:alice@example.org'), 'garbage');
      assert.equal(res.statusCode, 401);
    });

    it('counts bad input too, so malformed requests cannot be sent without limit', async () => {
      const res = await get(w.ctx, exists('foo:bar'), w.tokens.current);
      assert.equal(res.statusCode, 429);
    });

    it('allows lookups again in the next window', async () => {
      clock += 60_000;
      const res = await get(w.ctx, exists('idp:alice@example.org'), w.tokens.current);
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { exists: true });
    });
  });
}
