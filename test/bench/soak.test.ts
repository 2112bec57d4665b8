// The long-run benchmark's harness (bench/soak.ts) for a few seconds against the real service over
// real HTTP: every kind of operation of the mix answers as expected, the capacity is measured, and
// the open loop reports each interval's operations, errors, latency and resident memory.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, pickFreePort, startTestApp, type TestContext } from '../helpers.ts';
import { KINDS, MIX, measureCapacity, prepare, soak, verdictLines, Workload } from '../../bench/soak.ts';

for (const dialect of dialects()) {
  describe(`the long-run benchmark's harness (${dialect})`, () => {
    let ctx: TestContext;
    let workload: Workload;

    before(async () => {
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url }, { listen: port });
      const prepared = await prepare(ctx.store, ctx.keys, url, 4);
      workload = new Workload({ url, publicUrl: url }, prepared);
      await workload.start();
    });
    after(() => ctx?.close());

    it('runs every kind of operation without an error', async () => {
      for (const kind of KINDS) await workload.run(kind);
    });

    it('measures the capacity, then reports every interval and each kind at half of it', async () => {
      const capacity = await measureCapacity(workload, 4, 1);
      assert.ok(capacity > 0);
      const seen: number[] = [];
      const rssMb = () => Math.round(process.memoryUsage().rss / 2 ** 20);
      const r = await soak(workload, {
        seconds: 3,
        interval: 1,
        // at least one round of the mix a second, so every kind runs even when a loaded machine measures little
        rate: Math.max(capacity / 2, MIX.length),
        capacity,
        rssMb,
        onInterval: (i) => seen.push(i.index),
      });
      assert.equal(r.errors, 0, r.firstErrors.join('\n'));
      assert.ok(r.intervals.length >= 2 && r.intervals.length <= 4, `${r.intervals.length} intervals`);
      assert.deepEqual(
        seen,
        r.intervals.map((i) => i.index),
      );
      for (const i of r.intervals) {
        assert.ok(i.operations > 0);
        assert.equal(i.errors, 0);
        assert.ok(i.p50 > 0 && i.p99 >= i.p50);
        assert.ok(i.rssMb! > 0);
      }
      assert.equal(
        r.operations,
        r.intervals.reduce((sum, i) => sum + i.operations, 0),
      );
      assert.deepEqual(
        r.kinds.map((k) => k.kind),
        [...KINDS],
      );
      for (const k of r.kinds) assert.ok(k.operations > 0, `${k.kind} ran`);
      assert.ok(r.rss.baselineMb! > 0 && r.rss.endMb! > 0);
      assert.equal(typeof r.verdict.met, 'boolean');
      assert.match(verdictLines(r).at(-1)!, /^- verdict: (PASS|FAIL)$/);
    });

    it('counts an operation that fails as an error of its kind', async () => {
      const broken = new Workload(workload.target, { ...workload.prepared, scimToken: 'not-a-token' });
      const r = await soak(broken, {
        seconds: 1,
        interval: 1,
        rate: 24,
        capacity: 48,
        rssMb: () => 1,
        maxInFlight: 100,
      });
      const scim = r.kinds.filter((k) => k.kind.startsWith('scim.'));
      assert.ok(scim.every((k) => k.errors === k.operations && k.operations > 0));
      assert.equal(r.verdict.errors, false);
      assert.equal(r.verdict.met, false);
      assert.match(r.firstErrors.join('\n'), /scim\.(create|patch): (POST|PATCH) \/scim\/v2\/Users.*: 401/);
    });
  });
}
