// SAML federations: how long each trusted aggregate stays valid (read at scrape time), whether it
// is stale (past its validUntil: its service providers are not served), and refreshes by outcome.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import type { Store } from '../store/index.ts';
import { listFederations, type FederationRow } from '../store/saml-federations.ts';
import { metrics } from './metrics.ts';

const stores = new Set<Store>();

let reading: { at: number; result: Promise<FederationRow[]> } | undefined;

/** One query per scrape for the gauges below; every instance reads the same database. */
function federations(): Promise<FederationRow[]> {
  const store = stores.values().next().value;
  if (!store) return Promise.resolve([]);
  if (!reading || Date.now() - reading.at > 1000) {
    const result = new Promise<void>((r) => setImmediate(r)).then(() => listFederations(store.db));
    reading = { at: Date.now(), result };
  }
  return reading.result;
}

new Gauge({
  name: 'idp_saml_federation_valid_seconds',
  help: "Seconds until the SAML federation's verified aggregate expires (its validUntil); negative once past, when its service providers are no longer served",
  labelNames: ['federation'],
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    const rows = await federations().catch(() => []);
    this.reset();
    const now = Date.now();
    for (const row of rows) {
      if (row.valid_until !== null) this.set({ federation: String(row.id) }, (Number(row.valid_until) - now) / 1000);
    }
  },
});

new Gauge({
  name: 'idp_saml_federation_stale',
  help: 'SAML federations whose aggregate is past its validUntil with no newer one verified: 1 per such federation, 0 when fresh',
  labelNames: ['federation'],
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    const rows = await federations().catch(() => []);
    this.reset();
    const now = Date.now();
    for (const row of rows) {
      const stale = row.valid_until === null || Number(row.valid_until) <= now;
      this.set({ federation: String(row.id) }, stale ? 1 : 0);
    }
  },
});

new Gauge({
  name: 'idp_saml_federation_entities',
  help: "Service providers held from the SAML federation's last verified aggregate",
  labelNames: ['federation'],
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    const rows = await federations().catch(() => []);
    this.reset();
    for (const row of rows) this.set({ federation: String(row.id) }, row.entities);
  },
});

const refreshes = new Counter({
  name: 'idp_saml_federation_refreshes_total',
  help: 'Fetches of SAML federation aggregates by outcome (updated: a newer aggregate verified; unchanged: 304; failed: unreachable, refused or not verified)',
  labelNames: ['outcome'],
  registers: [metrics],
});
for (const outcome of ['updated', 'unchanged', 'failed']) refreshes.inc({ outcome }, 0);

export function countFederationRefresh(outcome: 'updated' | 'unchanged' | 'failed'): void {
  refreshes.inc({ outcome });
}

const mdqLookups = new Counter({
  name: 'idp_saml_mdq_lookups_total',
  help: 'Metadata queries (MDQ) for service providers not in a trusted aggregate, by outcome (found, not_found, failed)',
  labelNames: ['outcome'],
  registers: [metrics],
});
for (const outcome of ['found', 'not_found', 'failed']) mdqLookups.inc({ outcome }, 0);

export function countMdqLookup(outcome: 'found' | 'not_found' | 'failed'): void {
  mdqLookups.inc({ outcome });
}

/** Reports the federations of store until app closes. */
export function observeFederations(app: FastifyInstance, store: Store): void {
  stores.add(store);
  app.addHook('onClose', async () => void stores.delete(store));
}
