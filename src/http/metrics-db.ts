// Database metrics: query latency by statement kind, and the PostgreSQL pool's state at scrape time.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { FastHistogram } from './metric-series.ts';
import type { PoolState, Store } from '../store/index.ts';
import { metrics } from './metrics.ts';

/** Stores whose pools are reported: normally one per process (tests run several apps in one). */
const observed = new Set<Store>();

const queryDurations = new FastHistogram({
  name: 'idp_db_query_duration_seconds',
  help: 'Database query time on its connection, by statement kind (select, insert, update, delete, other)',
  labelNames: ['kind'],
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [metrics],
});
const queryErrors = new Counter({
  name: 'idp_db_query_errors_total',
  help: 'Database queries that failed (constraint violations included), by statement kind',
  labelNames: ['kind'],
  registers: [metrics],
});

/** The sum of a value over the observed pools; undefined when none is open. */
function pooled(value: (pool: PoolState) => number): number | undefined {
  let sum: number | undefined;
  for (const store of observed) {
    const pool = store.pool?.();
    if (pool) sum = (sum ?? 0) + value(pool);
  }
  return sum;
}

/**
 * The pool gauges exist once a PostgreSQL store is observed: a process on SQLite, which has one
 * connection and no pool, reports none of them (a gauge without labels would always show 0).
 */
let poolGauges = false;

function registerPoolGauges(): void {
  if (poolGauges) return;
  poolGauges = true;
  new Gauge({
    name: 'idp_db_pool_connections',
    help: 'PostgreSQL pool connections open, by state (in_use, idle); absent on SQLite',
    labelNames: ['state'],
    registers: [metrics],
    collect() {
      this.reset();
      const idle = pooled((p) => p.idle);
      const inUse = pooled((p) => p.total - p.idle);
      if (idle !== undefined && inUse !== undefined) {
        this.set({ state: 'idle' }, idle);
        this.set({ state: 'in_use' }, inUse);
      }
    },
  });
  new Gauge({
    name: 'idp_db_pool_max_connections',
    help: 'The most connections the PostgreSQL pool opens; absent on SQLite',
    registers: [metrics],
    collect() {
      this.reset();
      const max = pooled((p) => p.max);
      if (max !== undefined) this.set(max);
    },
  });
  new Gauge({
    name: 'idp_db_pool_waiting_queries',
    help: 'Queries waiting for a free PostgreSQL pool connection; absent on SQLite',
    registers: [metrics],
    collect() {
      this.reset();
      const waiting = pooled((p) => p.waiting);
      if (waiting !== undefined) this.set(waiting);
    },
  });
}

/** Reports a store's queries and pool until app closes. */
export function observeStore(app: FastifyInstance, store: Store): void {
  observed.add(store);
  if (store.pool?.()) registerPoolGauges();
  const stop = store.onQuery?.(({ kind, seconds, failed }) => {
    queryDurations.observe([kind], seconds);
    if (failed) queryErrors.inc({ kind });
  });
  app.addHook('onClose', async () => {
    stop?.();
    observed.delete(store);
  });
}
