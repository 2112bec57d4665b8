// Deprecation signalling for legacy endpoints: Deprecation (RFC 9745), Link rel="deprecation",
// Sunset (RFC 8594) when the operator set a date, and a per-client counter of legacy calls.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Counter } from 'prom-client';
import type { Config } from '../config.ts';
import { metrics } from './metrics.ts';

export const legacyCalls = new Counter({
  name: 'idp_legacy_requests_total',
  help: 'Calls to deprecated endpoints, by endpoint and client',
  labelNames: ['endpoint', 'client_id'] as const,
  registers: [metrics],
});

/** Unix time (seconds) the endpoints were declared deprecated: 2026-01-01T00:00:00Z. */
const DEPRECATED_SINCE = 1767225600;

export function markDeprecated(reply: FastifyReply, config: Config, replacementPath: string): void {
  reply.header('deprecation', `@${DEPRECATED_SINCE}`);
  reply.header('link', `<${config.publicUrl}${replacementPath}>; rel="deprecation"`);
  if (config.sunsetDate) reply.header('sunset', config.sunsetDate);
}

export function countLegacyCall(request: FastifyRequest, endpoint: string, clientId: string | undefined): void {
  legacyCalls.inc({ endpoint, client_id: clientId ?? 'unknown' });
  request.log.info({ legacy_endpoint: endpoint, client_id: clientId ?? 'unknown' }, 'deprecated endpoint called');
}
