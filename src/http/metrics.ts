// Prometheus metrics registry, served at /metrics.
import { Registry, collectDefaultMetrics } from 'prom-client';

export const metrics = new Registry();
collectDefaultMetrics({ register: metrics });
