// The request-path counter and histogram (src/http/metric-series.ts) against prom-client's own: the
// same observations give the same scrape text, alone and added up over cluster workers.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from '../../src/http/metric-series.ts';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const OBSERVATIONS: [string, string, number, number][] = [
  ['/oauth/token', 'POST', 200, 0.004],
  ['/oauth/token', 'POST', 200, 0.005], // on a bound: counted in it
  ['/oauth/token', 'POST', 401, 0.0051],
  ['/openid/userinfo', 'GET', 200, 0.3],
  ['/openid/userinfo', 'GET', 200, 7], // past every bound
  ['/2/passkey/:org', 'GET', 404, 0],
  ['/oauth/token', 'POST', 200, 2.5],
];

function both(registry: Registry, fast: boolean) {
  const counterOptions = { name: 'x_requests_total', help: 'requests', labelNames: ['route', 'method', 'status'] };
  const histogramOptions = {
    name: 'x_duration_seconds',
    help: 'durations "quoted" \\ and \n newline',
    labelNames: ['route', 'method', 'status_class'],
    buckets: BUCKETS,
  };
  if (fast) {
    const c = new FastCounter({ ...counterOptions, registers: [registry] });
    const h = new FastHistogram({ ...histogramOptions, registers: [registry] });
    return (route: string, method: string, status: number, seconds: number) => {
      c.inc([route, method, status]);
      h.observe([route, method, `${Math.floor(status / 100)}xx`], seconds);
    };
  }
  const c = new Counter({ ...counterOptions, registers: [registry] });
  const h = new Histogram({ ...histogramOptions, registers: [registry] });
  return (route: string, method: string, status: number, seconds: number) => {
    c.inc({ route, method, status });
    h.observe({ route, method, status_class: `${Math.floor(status / 100)}xx` }, seconds);
  };
}

describe('request metric series', () => {
  it("scrape the same as prom-client's Counter and Histogram", async () => {
    const [ours, theirs] = [new Registry(), new Registry()];
    const [record, reference] = [both(ours, true), both(theirs, false)];
    assert.equal(await ours.metrics(), await theirs.metrics(), 'before any observation');
    for (const o of OBSERVATIONS) {
      record(...o);
      reference(...o);
    }
    const text = await ours.metrics();
    assert.equal(text, await theirs.metrics());
    assert.match(text, /x_requests_total\{route="\/oauth\/token",method="POST",status="200"\} 3/);
    assert.match(
      text,
      /x_duration_seconds_bucket\{le="0.005",route="\/oauth\/token",method="POST",status_class="2xx"\} 2/,
    );
    assert.match(
      text,
      /x_duration_seconds_bucket\{le="\+Inf",route="\/openid\/userinfo",method="GET",status_class="2xx"\} 2/,
    );

    ours.resetMetrics();
    theirs.resetMetrics();
    assert.equal(await ours.metrics(), await theirs.metrics(), 'after a reset');
  });

  it('add up over cluster workers as prom-client’s do', async () => {
    const workers = async (fast: boolean) => {
      const snapshots = [];
      for (const slice of [OBSERVATIONS.slice(0, 4), OBSERVATIONS.slice(2)]) {
        const registry = new Registry();
        const record = both(registry, fast);
        for (const o of slice) record(...o);
        snapshots.push(await registry.getMetricsAsJSON());
      }
      return AggregatorRegistry.aggregate(snapshots).metrics();
    };
    assert.equal(await workers(true), await workers(false));
  });

  it('refuses a wrong number of label values', () => {
    const c = new FastCounter({ name: 'y_total', help: 'y', labelNames: ['a', 'b'], registers: [new Registry()] });
    assert.throws(() => c.inc(['only one']), /expected 2 label values, got 1/);
  });
});
