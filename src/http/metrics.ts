// Prometheus metrics registry, served at /metrics, and who may scrape it.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import ipaddr from 'ipaddr.js';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { parseRange, type Config } from '../config.ts';
import { AppError, forbidden } from '../errors.ts';
import { parseBearer } from './bearer.ts';

export const metrics = new Registry();
collectDefaultMetrics({ register: metrics });

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
