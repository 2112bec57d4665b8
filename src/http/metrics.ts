// Prometheus metrics registry, served at /metrics, and who may scrape it.
import { createHash, timingSafeEqual } from 'node:crypto';
import { appVersion } from '../package-files.ts';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import ipaddr from 'ipaddr.js';
import cluster from 'node:cluster';
import { AggregatorRegistry, Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { parseRange, type Config } from '../config.ts';
import { AppError, forbidden } from '../errors.ts';
import { parseBearer } from './bearer.ts';

export const metrics = new Registry();
collectDefaultMetrics({ register: metrics });

// With WORKERS > 1 a scrape reaches one worker, which asks the primary for the sum over all
// workers (prom-client's cluster aggregation: counters and histograms add up, process figures too).
const CLUSTER_REQUEST = 'idp:metrics';
const CLUSTER_ANSWER = 'idp:metrics:answer';
const CLUSTER_TIMEOUT_MS = 5000;
const pendingScrapes = new Map<number, (answer: { text?: string; error?: string }) => void>();
let nextScrape = 0;

if (cluster.isWorker) {
  new AggregatorRegistry(); // answers the primary's requests for this worker's figures
  AggregatorRegistry.setRegistries(metrics);
  process.on('message', (message: { type?: unknown; id?: unknown; text?: string; error?: string }) => {
    if (message?.type !== CLUSTER_ANSWER || typeof message.id !== 'number') return;
    pendingScrapes.get(message.id)?.(message);
  });
}

/** The metrics text of this process, or of every worker when it is one of several. */
export function scrape(): Promise<string> {
  if (!cluster.isWorker || !process.send) return metrics.metrics();
  const id = nextScrape++;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      pendingScrapes.delete(id);
      reject(new Error("the primary process did not answer for the workers' metrics"));
    }, CLUSTER_TIMEOUT_MS);
    pendingScrapes.set(id, (answer) => {
      clearTimeout(timer);
      pendingScrapes.delete(id);
      if (answer.text !== undefined) resolve(answer.text);
      else reject(new Error(`aggregating the workers' metrics failed: ${answer.error ?? 'no answer'}`));
    });
    process.send!({ type: CLUSTER_REQUEST, id });
  });
}

/** In the primary: answers workers' scrapes with the figures of all workers. */
export function serveClusterMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: { type?: unknown; id?: unknown }) => {
    if (message?.type !== CLUSTER_REQUEST || typeof message.id !== 'number') return;
    const id = message.id;
    aggregator.clusterMetrics().then(
      (text) => worker.isConnected() && worker.send({ type: CLUSTER_ANSWER, id, text }),
      (err: Error) => worker.isConnected() && worker.send({ type: CLUSTER_ANSWER, id, error: err.message }),
    );
  });
}

/** The path the metrics are served at; scrapes themselves are not counted as requests. */
export const METRICS_PATH = '/metrics';

new Gauge({
  name: 'idp_info',
  help: 'Always 1; the version label names the running release',
  labelNames: ['version'],
  registers: [metrics],
  aggregator: 'max',
}).set({ version: appVersion() }, 1);

const rateLimited = new Counter({
  name: 'idp_rate_limited_total',
  help: 'Requests refused by a rate limit, by limiter',
  labelNames: ['limiter'],
  registers: [metrics],
});

/** Counts one refusal by the named limiter (names are fixed in code, so the label is bounded). */
export function countRateLimited(limiter: string): void {
  rateLimited.inc({ limiter });
}

const auditEvents = new Counter({
  name: 'idp_audit_events_total',
  help: 'Audit records written, by action',
  labelNames: ['action'],
  registers: [metrics],
});
const signIns = new Counter({
  name: 'idp_signins_total',
  help: 'Sign-in attempts, by method (password, passkey, upstream) and outcome (success, failure)',
  labelNames: ['method', 'outcome'],
  registers: [metrics],
});
const passkeyRegistrations = new Counter({
  name: 'idp_passkey_registrations_total',
  help: 'Passkeys registered by their users',
  registers: [metrics],
});

const passkeyUpgrades = new Counter({
  name: 'idp_passkey_upgrade_total',
  help: 'Passkeys offered after a password sign-in, by outcome (offered, created, declined)',
  labelNames: ['outcome'],
  registers: [metrics],
});

const upstreamSignIns = new Counter({
  name: 'idp_upstream_signins_total',
  help: 'Sign-ins through upstream identity providers, by provider type (oidc, saml) and outcome',
  labelNames: ['provider_type', 'outcome'],
  registers: [metrics],
});

/** outcome: success, refused (a linking rule or a disabled account), error (the upstream or its answer failed) */
export function countUpstreamSignIn(providerType: string, outcome: 'success' | 'refused' | 'error'): void {
  upstreamSignIns.inc({ provider_type: providerType, outcome });
}

export function countPasskeyUpgrade(outcome: 'offered' | 'created' | 'declined'): void {
  passkeyUpgrades.inc({ outcome });
}

/** Counts an audit record; sign-ins and passkey registrations are counted from their records. */
export function countAudit(action: string, details: Record<string, unknown> = {}): void {
  auditEvents.inc({ action });
  if (action === 'signin.succeeded' || action === 'signin.failed') {
    const method = details.method === 'passkey' || details.method === 'upstream' ? details.method : 'password';
    signIns.inc({ method, outcome: action === 'signin.succeeded' ? 'success' : 'failure' });
  }
  if (action === 'passkey.register') passkeyRegistrations.inc();
}

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address it carries. */
function addressIn(ranges: Range[], ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  const address = ipaddr.process(ip);
  return ranges.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));
}

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/**
 * The scrape check: the client address (request.ip, which honours TRUST_PROXY) must be in
 * METRICS_ALLOW (else 403); with METRICS_TOKEN set, the bearer token must equal it (else 401),
 * compared in constant time on hashes so neither length nor content leaks.
 */
export function metricsAccess(config: Pick<Config, 'metricsAllow' | 'metricsToken'>) {
  const ranges = config.metricsAllow.map((entry) => parseRange(entry)!);
  const expected = config.metricsToken === undefined ? undefined : sha256(config.metricsToken);
  const check = (request: FastifyRequest): void => {
    if (!addressIn(ranges, request.ip)) throw forbidden('Metrics are not available from this address');
    if (!expected) return;
    const bearer = parseBearer(request.headers.authorization);
    if (bearer.kind !== 'token')
      throw new AppError(401, 'Bearer token required', { 'www-authenticate': 'Bearer realm="metrics"' });
    if (!timingSafeEqual(sha256(bearer.token), expected)) {
      throw new AppError(401, 'Bearer token invalid', {
        'www-authenticate': 'Bearer realm="metrics", error="invalid_token"',
      });
    }
  };
  return function checkScraper(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
    try {
      check(request);
      done();
    } catch (err) {
      done(err as Error);
    }
  };
}
