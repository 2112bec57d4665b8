// Liveness and readiness probes for load balancers, and Prometheus metrics.
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { metrics, metricsAccess, scrape } from './metrics.ts';
import { appVersion } from '../package-files.ts';

export function healthPlugin(store: Store, config: Pick<Config, 'metricsAllow' | 'metricsToken'>) {
  return async function health(app: FastifyInstance) {
    app.get('/healthz', async () => ({ status: 'ok' }));
    app.get('/readyz', async (_request, reply) => {
      if (await store.ping()) return { status: 'ready', version: appVersion() };
      return reply.code(503).header('retry-after', '5').send({ code: 503, message: 'Database unreachable' });
    });
    app.get('/metrics', { preHandler: metricsAccess(config) }, async (_request, reply) =>
      reply.type(metrics.contentType).send(await scrape()),
    );
  };
}
