// docs/prometheus-alerts.yml, docs/grafana-dashboard.json and docs/metrics.md against the service:
// Prometheus' own promtool checks the rules, the dashboard's queries and the documented scrape job,
// and runs the alerts on made-up series; every metric they name must be one /metrics declares.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { dialects, startTestApp, type TestContext } from '../helpers.ts';
import { declaredMetrics, scrapeText } from './metrics-scrape.ts';

const ALERTS = 'docs/prometheus-alerts.yml';
const DASHBOARD = 'docs/grafana-dashboard.json';
const GUIDE = 'docs/metrics.md';

interface Rule {
  alert: string;
  expr: string;
  annotations?: Record<string, string>;
}
interface Target {
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
}

const rules = (): Rule[] =>
  (parse(readFileSync(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
const dashboard = () =>
  JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: Panel[];
    templating: { list: { name: string; type: string; query: unknown }[] };
  };
const queries = () => dashboard().panels.flatMap((p) => p.targets ?? []);

/** The metric names in a PromQL expression: identifiers with one of the service's prefixes. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b((?:idp|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
}

/** A histogram's series (_bucket, _sum, _count) are declared under the histogram's name. */
function isDeclared(name: string, declared: Map<string, string>): boolean {
  if (declared.has(name)) return true;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return declared.get(base) === 'histogram';
}

const promtoolFound = spawnSync('promtool', ['--version']).status === 0;
// CI installs Debian's prometheus package (.ci/run); elsewhere the promtool checks are skipped without it.
const needPromtool = promtoolFound ? false : process.env.CI === 'true' ? false : 'promtool not installed';

function promtool(args: string[], cwd: string) {
  const run = spawnSync('promtool', args, { cwd, encoding: 'utf8' });
  assert.equal(run.status, 0, `promtool ${args.join(' ')}:\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

describe('Prometheus rules, Grafana dashboard and the metrics guide', () => {
  let dir: string;
  before(() => {
    assert.ok(promtoolFound || process.env.CI !== 'true', 'promtool is required under CI=true');
    dir = mkdtempSync(join(tmpdir(), 'idp-metrics-docs-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('promtool accepts the alerting rules', { skip: needPromtool }, () => {
    const out = promtool(['check', 'rules', join(process.cwd(), ALERTS)], dir);
    assert.match(out, new RegExp(`SUCCESS: ${rules().length} rules found`));
  });

  it('promtool accepts every dashboard query', { skip: needPromtool }, () => {
    // Grafana's variables, as Grafana substitutes them
    const promql = (expr: string) =>
      expr.replaceAll('$__rate_interval', '2m').replaceAll('$job', 'idp').replaceAll('$instance', '.*');
    const recording = queries().map((q, i) => ({ record: `dashboard:query_${i}`, expr: promql(q.expr) }));
    assert.ok(recording.length >= 20);
    writeFileSync(join(dir, 'dashboard-queries.yml'), stringify({ groups: [{ name: 'dashboard', rules: recording }] }));
    promtool(['check', 'rules', 'dashboard-queries.yml'], dir);
  });

  it(
    'the scrape job in docs/metrics.md is a valid Prometheus configuration with the rules loaded',
    {
      skip: needPromtool,
    },
    () => {
      const block = /```yaml\n([\s\S]*?)```/.exec(readFileSync(GUIDE, 'utf8'))?.[1] ?? '';
      assert.ok(block.includes('scrape_configs'), 'docs/metrics.md shows the scrape job');
      const config = parse(block) as {
        rule_files: string[];
        scrape_configs: { job_name: string; authorization: { credentials_file: string } }[];
      };
      assert.equal(config.scrape_configs[0]!.job_name, 'idp');
      // promtool reads the token file: point it at one here
      writeFileSync(join(dir, 'token'), 'metrics-token-0123456789-abcdefghijklmnop\n');
      config.scrape_configs[0]!.authorization.credentials_file = join(dir, 'token');
      writeFileSync(join(dir, config.rule_files[0]!), readFileSync(ALERTS));
      writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
      const rules = (parse(readFileSync(ALERTS, 'utf8')) as { groups: { rules: unknown[] }[] }).groups.flatMap(
        (g) => g.rules,
      ).length;
      assert.match(promtool(['check', 'config', 'prometheus.yml'], dir), new RegExp(`SUCCESS: ${rules} rules found`));
    },
  );

  it('the alerts fire on made-up series that call for them, and stay quiet otherwise', { skip: needPromtool }, () => {
    // Annotations are templates checked above; here the expressions and `for` durations are tested.
    const bare = parse(readFileSync(ALERTS, 'utf8')) as { groups: { rules: Rule[] }[] };
    for (const group of bare.groups) for (const rule of group.rules) delete rule.annotations;
    writeFileSync(join(dir, 'bare-alerts.yml'), stringify(bare));
    writeFileSync(join(dir, 'alert-tests.yml'), stringify(ALERT_TESTS));
    assert.match(promtool(['test', 'rules', 'alert-tests.yml'], dir), /SUCCESS/);
  });

  it('the dashboard is Grafana JSON with the data source as a variable, and panels that do not overlap', () => {
    const { panels, templating } = dashboard();
    const source = templating.list.find((v) => v.name === 'datasource');
    assert.deepEqual([source?.type, source?.query], ['datasource', 'prometheus']);
    const cells = new Set<string>();
    for (const panel of panels) {
      const { x, y, w, h } = panel.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24 && h > 0, panel.title);
      for (let i = x; i < x + w; i++)
        for (let j = y; j < y + h; j++) {
          assert.ok(!cells.has(`${i},${j}`), `${panel.title} overlaps another panel`);
          cells.add(`${i},${j}`);
        }
      if (panel.type === 'row') continue;
      assert.equal(panel.datasource?.uid, '${datasource}', panel.title);
      assert.ok(panel.targets?.length, panel.title);
      for (const target of panel.targets ?? []) assert.equal(target.datasource?.uid, '${datasource}', panel.title);
    }
  });

  describe('metric names', () => {
    let ctx: TestContext;
    let declared: Map<string, string>;
    // the pool gauges appear on PostgreSQL only
    const dialect = dialects().at(-1)!;
    before(async () => {
      ctx = await startTestApp(dialect);
      declared = declaredMetrics(await scrapeText(ctx.app));
    });
    after(() => ctx.close());

    const exempt = (name: string) => dialect === 'sqlite' && name.startsWith('idp_db_pool_');

    it('every metric the alerts and the dashboard name is declared on /metrics', () => {
      const named = new Set([
        ...rules().flatMap((r) => metricNames(r.expr)),
        ...queries().flatMap((q) => metricNames(q.expr)),
      ]);
      assert.ok(named.size >= 20, [...named].join(' '));
      for (const name of named) if (!exempt(name)) assert.ok(isDeclared(name, declared), `${name} is not on /metrics`);
    });

    it('the dashboard shows, and docs/metrics.md describes, every idp_ metric', () => {
      const shown = new Set(
        queries().flatMap((q) => metricNames(q.expr).map((n) => n.replace(/_(bucket|sum|count)$/, ''))),
      );
      const guide = readFileSync(GUIDE, 'utf8');
      const ours = [...declared.keys()].filter((n) => n.startsWith('idp_'));
      assert.ok(ours.length >= 12, ours.join(' '));
      for (const name of ours) {
        assert.ok(shown.has(name), `the dashboard has no panel for ${name}`);
        assert.ok(guide.includes(`\`${name}\``), `docs/metrics.md does not describe ${name}`);
      }
    });
  });
});

const series = (name: string, labels: Record<string, string>, values: string) => ({
  series: `${name}{${Object.entries({ job: 'idp', instance: 'a:8080', ...labels })
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')}}`,
  values,
});
const requests = (status: string, values: string) =>
  series('idp_http_requests_total', { route: '/oauth/token', method: 'POST', status }, values);
const on = { job: 'idp', instance: 'a:8080' };

/** promtool unit tests (https://prometheus.io/docs/prometheus/latest/configuration/unit_testing_rules/). */
const ALERT_TESTS = {
  rule_files: ['bare-alerts.yml'],
  evaluation_interval: '1m',
  tests: [
    {
      // 60 of 660 requests a minute are 5xx (9 %) on a; 3 of 603 (0.5 %) on b
      interval: '1m',
      input_series: [
        requests('500', '0+60x30'),
        requests('200', '0+600x30'),
        { ...requests('500', '0+3x30'), series: requests('500', '').series.replace('a:8080', 'b:8080') },
        { ...requests('200', '0+600x30'), series: requests('200', '').series.replace('a:8080', 'b:8080') },
        series('up', {}, '1x5 0x10'),
      ],
      alert_rule_test: [
        { eval_time: '4m', alertname: 'IdpHigh5xxRate', exp_alerts: [] },
        {
          eval_time: '20m',
          alertname: 'IdpHigh5xxRate',
          exp_alerts: [{ exp_labels: { severity: 'critical', ...on } }],
        },
        { eval_time: '6m', alertname: 'IdpInstanceDown', exp_alerts: [] },
        {
          eval_time: '10m',
          alertname: 'IdpInstanceDown',
          exp_alerts: [{ exp_labels: { severity: 'critical', ...on } }],
        },
      ],
    },
    {
      interval: '1m',
      input_series: [
        // a rotation every 90 days; key a: 200 days old and ageing; key b: 92 days (within the two days of publication)
        series('idp_signing_key_rotation_days', {}, '90x120'),
        series('idp_signing_key_age_seconds', { alg: 'ES256' }, `${200 * 86400}+60x120`),
        series('idp_signing_key_age_seconds', { alg: 'RS256' }, `${92 * 86400}+60x120`),
        // the SAML signing key: 99 days old, past 90 + the 7 days it was published before signing + 1;
        // the SAML encryption key is 300 days old, but only `saml keys rotate` changes it: no alert
        series('idp_saml_key_age_seconds', { use: 'signing' }, `${99 * 86400}+60x120`),
        series('idp_saml_key_age_seconds', { use: 'encryption' }, `${300 * 86400}+60x120`),
        // a pool with 10 connections: 10 in use and 3 queries waiting from minute 10
        series('idp_db_pool_connections', { state: 'in_use' }, '2x9 10x30'),
        series('idp_db_pool_max_connections', {}, '10x40'),
        series('idp_db_pool_waiting_queries', {}, '0x9 3x30'),
        // 100 refusals a minute by login-ip; 1 by checkuser
        series('idp_rate_limited_total', { limiter: 'login-ip' }, '0+100x30'),
        series('idp_rate_limited_total', { limiter: 'checkuser' }, '0+1x30'),
      ],
      alert_rule_test: [
        {
          eval_time: '90m',
          alertname: 'IdpSigningKeyOld',
          exp_alerts: [{ exp_labels: { severity: 'warning', job: 'idp', alg: 'ES256' } }],
        },
        {
          eval_time: '90m',
          alertname: 'IdpSamlSigningKeyOld',
          exp_alerts: [{ exp_labels: { severity: 'warning', job: 'idp' } }],
        },
        { eval_time: '12m', alertname: 'IdpDbPoolSaturated', exp_alerts: [] },
        {
          eval_time: '20m',
          alertname: 'IdpDbPoolSaturated',
          exp_alerts: [{ exp_labels: { severity: 'warning', ...on } }],
        },
        {
          eval_time: '20m',
          alertname: 'IdpRateLimitingSpike',
          exp_alerts: [{ exp_labels: { severity: 'warning', job: 'idp', limiter: 'login-ip' } }],
        },
      ],
    },
    {
      interval: '1m',
      input_series: [
        // a SAML signing key 97 days old on a 90-day schedule: within the 7 days of publication and the day of margin
        series('idp_signing_key_rotation_days', {}, '90x120'),
        series('idp_saml_key_age_seconds', { use: 'signing' }, `${97 * 86400}+0x120`),
      ],
      alert_rule_test: [{ eval_time: '90m', alertname: 'IdpSamlSigningKeyOld', exp_alerts: [] }],
    },
    {
      interval: '1m',
      input_series: [
        // rotation off (KEY_ROTATION_DAYS=0): 179 days is within the 180, and a day later it is not
        series('idp_signing_key_rotation_days', {}, '0x3000'),
        series('idp_saml_key_age_seconds', { use: 'signing' }, `${179 * 86400}+60x3000`),
      ],
      alert_rule_test: [
        { eval_time: '90m', alertname: 'IdpSamlSigningKeyOld', exp_alerts: [] },
        {
          eval_time: '2000m',
          alertname: 'IdpSamlSigningKeyOld',
          exp_alerts: [{ exp_labels: { severity: 'warning', job: 'idp' } }],
        },
      ],
    },
    {
      interval: '1m',
      input_series: [
        // 10 failures and 2 successes a minute
        series('idp_signins_total', { method: 'password', outcome: 'failure' }, '0+10x40'),
        series('idp_signins_total', { method: 'password', outcome: 'success' }, '0+2x40'),
        series('idp_http_request_duration_seconds_bucket', { le: '1' }, '0+10x40'),
        series('idp_http_request_duration_seconds_bucket', { le: '2.5' }, '0+100x40'),
        series('idp_http_request_duration_seconds_bucket', { le: '+Inf' }, '0+100x40'),
        series('idp_http_request_duration_seconds_count', {}, '0+100x40'),
        series('process_resident_memory_bytes', {}, `${200 * 2 ** 20}x40`),
      ],
      alert_rule_test: [
        {
          eval_time: '25m',
          alertname: 'IdpSignInFailureSpike',
          exp_alerts: [{ exp_labels: { severity: 'warning', job: 'idp' } }],
        },
        {
          eval_time: '25m',
          alertname: 'IdpLatencyP99High',
          exp_alerts: [{ exp_labels: { severity: 'warning', ...on } }],
        },
        { eval_time: '25m', alertname: 'IdpHighMemory', exp_alerts: [] },
      ],
    },
  ],
};
