// The age of the keys tokens are signed with, computed at scrape time.
import type { FastifyInstance } from 'fastify';
import { Gauge } from 'prom-client';
import type { Store } from '../store/index.ts';
import { listSigningKeys } from '../store/keys.ts';
import { metrics } from './metrics.ts';

export interface SigningKeySource {
  store: Store;
  /** the kid that signs, per algorithm */
  active(): Record<string, string>;
  /** KEY_ROTATION_DAYS: the age at which the keys are rotated on schedule, 0 for never */
  rotationDays: number;
  /**
   * When the SAML identity provider's keys in use were created (epoch ms), by use (signing,
   * encryption, metadata); none before the first SAML request made them
   */
  samlCreated?: () => Promise<Record<string, number>>;
}

const sources = new Set<SigningKeySource>();
/** created_at (ms) by kid: a key's creation time never changes, so the table is read only for new kids. */
const createdAt = new Map<string, number>();

async function createdOf(store: Store, kid: string): Promise<number | undefined> {
  if (!createdAt.has(kid)) {
    const rows = await listSigningKeys(store.db);
    if (createdAt.size > 1000) createdAt.clear();
    for (const row of rows) createdAt.set(row.kid, row.created_at);
  }
  return createdAt.get(kid);
}

/** The creation time of the oldest active key per algorithm over every source. */
async function oldestActive(): Promise<Map<string, number>> {
  const oldest = new Map<string, number>();
  for (const source of sources) {
    for (const [alg, kid] of Object.entries(source.active())) {
      const created = await createdOf(source.store, kid).catch(() => undefined);
      if (created !== undefined) oldest.set(alg, Math.min(oldest.get(alg) ?? created, created));
    }
  }
  return oldest;
}

new Gauge({
  name: 'idp_signing_key_age_seconds',
  help: 'Seconds since the signing key in use was created, by algorithm; the `keys rotate` command makes new ones',
  labelNames: ['alg'],
  registers: [metrics],
  // every worker reads the same keys: the same value, not one per worker to add up
  aggregator: 'max',
  async collect() {
    const oldest = await oldestActive();
    this.reset();
    const now = Date.now();
    for (const [alg, created] of oldest) this.set({ alg }, Math.max(0, (now - created) / 1000));
  },
});

new Gauge({
  name: 'idp_signing_key_rotation_days',
  help: 'KEY_ROTATION_DAYS: the age in days at which the signing keys are rotated on schedule; 0: only by `keys rotate`',
  registers: [metrics],
  aggregator: 'max',
  collect() {
    this.reset();
    const days = [...sources].map((s) => s.rotationDays);
    if (days.length) this.set(Math.max(...days));
  },
});

new Gauge({
  name: 'idp_saml_key_age_seconds',
  help: "Seconds since the SAML identity provider's key in use was created, by use; the signing key rotates at KEY_ROTATION_DAYS, the others by `saml keys rotate`",
  labelNames: ['use'],
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    // a tick first, so the pool gauges have read the pool before this query takes a connection
    await new Promise<void>((r) => setImmediate(r));
    const oldest = new Map<string, number>();
    for (const source of sources) {
      const created = await source.samlCreated?.().catch(() => undefined);
      for (const [use, at] of Object.entries(created ?? {})) oldest.set(use, Math.min(oldest.get(use) ?? at, at));
    }
    this.reset();
    const now = Date.now();
    for (const [use, created] of oldest) this.set({ use }, Math.max(0, (now - created) / 1000));
  },
});

/** Reports the age of source's signing keys until app closes. */
export function observeSigningKeys(app: FastifyInstance, source: SigningKeySource): void {
  sources.add(source);
  app.addHook('onClose', async () => void sources.delete(source));
}
