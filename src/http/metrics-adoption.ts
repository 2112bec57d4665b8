// The adoption funnel of each organization's move (the report's figures), as last recorded by the
// housekeeping (at most one run old): one query per scrape, of a table with a row per organization
// and day.
import type { FastifyInstance } from 'fastify';
import { Gauge } from 'prom-client';
import type { Store } from '../store/index.ts';
import { ADOPTION_STAGES, latestAdoption } from '../store/adoption.ts';
import { metrics } from './metrics.ts';

const stores = new Set<Store>();

new Gauge({
  name: 'idp_adoption_users',
  help: "Users of the organization at each stage of its move, as last recorded (users, invited, signed_in, with_passkey, passkey_only); the console's report draws the same figures",
  labelNames: ['org_id', 'stage'],
  registers: [metrics],
  // every worker reads the same table: the same value, not one per worker to add up
  aggregator: 'max',
  async collect() {
    const store = stores.values().next().value;
    // after the synchronous collectors: the pool's gauges read the pool before this query takes a connection
    await new Promise<void>((r) => setImmediate(r));
    const rows = store ? await latestAdoption(store.db).catch(() => []) : [];
    this.reset();
    for (const row of rows)
      for (const stage of ADOPTION_STAGES) this.set({ org_id: String(row.org_id), stage }, Number(row[stage]));
  },
});

/** Reports the store's recorded adoption figures until app closes. */
export function observeAdoption(app: FastifyInstance, store: Store): void {
  stores.add(store);
  app.addHook('onClose', async () => void stores.delete(store));
}
