// Liveness and readiness probes for load balancers and orchestrators.
import type { FastifyInstance } from 'fastify';
import type { Store } from '../store/index.ts';

export function healthPlugin(store: Store) {
  return async function health(app: FastifyInstance) {
    app.get('/healthz', { schema: { hide: true } as object }, async () => ({ status: 'ok' }));
    app.get('/readyz', { schema: { hide: true } as object }, async (_request, reply) => {
      if (await store.ping()) return { status: 'ready' };
      return reply.code(503).send({ code: 503, message: 'Database unreachable' });
    });
  };
}
