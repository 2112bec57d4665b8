// Request counts and latencies for /metrics, labelled by route pattern so the labels stay bounded.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { metrics, METRICS_PATH } from './metrics.ts';
import { FastCounter, FastHistogram } from './metric-series.ts';

/** The route label of requests no route matched (404s): never the path, which the client chooses. */
export const UNMATCHED = 'unmatched';

/** From 5 ms (a cached JWKS) to 5 s (a slow database); sign-ins hash a password in about 50-100 ms. */
export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

const requests = new FastCounter({
  name: 'idp_http_requests_total',
  help: 'HTTP requests answered, by route pattern, method and status code',
  labelNames: ['route', 'method', 'status'],
  registers: [metrics],
});
const durations = new FastHistogram({
  name: 'idp_http_request_duration_seconds',
  help: 'Time from receiving a request to the last byte of its answer, by route pattern, method and status class',
  labelNames: ['route', 'method', 'status_class'],
  buckets: LATENCY_BUCKETS,
  registers: [metrics],
});

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/** Counts one answered request, and how long it took from receiving it to its last byte. */
export function recordRequest(route: string, method: string, status: number, seconds: number): void {
  requests.inc([route, method, status]);
  durations.observe(
    [route, method, STATUS_CLASSES[Math.floor(status / 100)] ?? `${Math.floor(status / 100)}xx`],
    seconds,
  );
}

export interface HttpMetricsOptions {
  /**
   * The paths served behind wildcard routes (oidc-provider's, under /oauth/* and /openid/*), as
   * patterns with :name segments. A request to one is labelled with its pattern; any other path
   * under a wildcard is labelled `unmatched`.
   */
  behindWildcards: readonly string[];
}

function compile(patterns: readonly string[]): { pattern: string; test: RegExp }[] {
  const escape = (segment: string) =>
    segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return patterns.map((pattern) => ({ pattern, test: new RegExp(`^${pattern.split('/').map(escape).join('/')}$`) }));
}

/**
 * Counts every answered request, on every route, including those handed whole to oidc-provider
 * (hijacked replies, which skip Fastify's onResponse hooks): the count and the duration are taken
 * when the response finishes. Scrapes of /metrics are not counted. Add before any route.
 */
export function registerHttpMetrics(app: FastifyInstance, options: HttpMetricsOptions): void {
  const known = compile(options.behindWildcards);
  const routeLabel = (request: FastifyRequest): string => {
    const pattern = request.routeOptions.url;
    if (pattern === undefined) return UNMATCHED;
    if (!pattern.endsWith('*')) return pattern;
    const path = request.url.split('?', 1)[0]!;
    return known.find((k) => k.test.test(path))?.pattern ?? UNMATCHED;
  };
  app.addHook('onRequest', (request, reply, done) => {
    const route = routeLabel(request);
    if (route !== METRICS_PATH) {
      const { method } = request;
      reply.raw.once('finish', () => recordRequest(route, method, reply.raw.statusCode, reply.elapsedTime / 1000));
    }
    done();
  });
}
