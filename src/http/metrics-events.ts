// Events: the outbox's depth and age, read at scrape time, and deliveries by outcome.
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import type { Store } from '../store/index.ts';
import { outboxDepth } from '../store/events.ts';
import { mailDepth, MAIL_KINDS } from '../store/mail.ts';
import { metrics } from './metrics.ts';

const stores = new Set<Store>();

let reading: { at: number; result: Promise<{ pending: number; oldest: number | null }> } | undefined;

/**
 * One query per scrape for both gauges. It starts after the other collectors have read their
 * figures (the pool's among them, which it would otherwise count as a waiting query).
 */
function depth(): Promise<{ pending: number; oldest: number | null }> {
  // Every instance reads the same database: one store answers for all.
  const store = stores.values().next().value;
  if (!store) return Promise.resolve({ pending: 0, oldest: null });
  if (!reading || Date.now() - reading.at > 1000) {
    const result = new Promise<void>((r) => setImmediate(r)).then(() => outboxDepth(store.db));
    reading = { at: Date.now(), result };
  }
  return reading.result;
}

new Gauge({
  name: 'idp_events_outbox_depth',
  help: 'Event deliveries not yet delivered (pending), webhooks and Shared Signals streams together',
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    this.set((await depth().catch(() => ({ pending: 0 }))).pending);
  },
});

new Gauge({
  name: 'idp_events_oldest_undelivered_age_seconds',
  help: 'Seconds since the event of the oldest pending delivery happened; 0 when none is pending',
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    const { oldest } = await depth().catch(() => ({ oldest: null }));
    this.set(oldest === null ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
  },
});

const deliveries = new Counter({
  name: 'idp_event_deliveries_total',
  help: 'Delivery attempts by destination kind (webhook, stream) and outcome (delivered; failed: retried later; dead: given up)',
  labelNames: ['destination', 'outcome'],
  registers: [metrics],
});
for (const destination of ['webhook', 'stream', 'mail'])
  for (const outcome of ['delivered', 'failed', 'dead']) deliveries.inc({ destination, outcome }, 0);

export function countDelivery(destination: string, outcome: 'delivered' | 'failed' | 'dead'): void {
  deliveries.inc({ destination, outcome });
}

const mailSent = new Counter({
  name: 'idp_mail_sent_total',
  help: 'E-mail sending attempts by kind (invitation, reminder, notification, recovery) and outcome (sent; failed: retried later; dead: given up)',
  labelNames: ['kind', 'outcome'],
  registers: [metrics],
});
for (const kind of MAIL_KINDS) for (const outcome of ['sent', 'failed', 'dead']) mailSent.inc({ kind, outcome }, 0);

export function countMail(kind: string, outcome: 'sent' | 'failed' | 'dead'): void {
  mailSent.inc({ kind, outcome });
}

let mailReading: { at: number; result: Promise<{ pending: number; oldest: number | null }> } | undefined;

function mailQueue(): Promise<{ pending: number; oldest: number | null }> {
  const store = stores.values().next().value;
  if (!store) return Promise.resolve({ pending: 0, oldest: null });
  if (!mailReading || Date.now() - mailReading.at > 1000) {
    const result = new Promise<void>((r) => setImmediate(r)).then(() => mailDepth(store.db));
    mailReading = { at: Date.now(), result };
  }
  return mailReading.result;
}

new Gauge({
  name: 'idp_mail_queue_depth',
  help: 'E-mail messages queued and not yet sent (part of idp_events_outbox_depth)',
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    this.set((await mailQueue().catch(() => ({ pending: 0 }))).pending);
  },
});

new Gauge({
  name: 'idp_mail_oldest_unsent_age_seconds',
  help: 'Seconds since the oldest e-mail message still queued was queued; 0 when none is',
  registers: [metrics],
  aggregator: 'max',
  async collect() {
    const { oldest } = await mailQueue().catch(() => ({ oldest: null }));
    this.set(oldest === null ? 0 : Math.max(0, (Date.now() - oldest) / 1000));
  },
});

/** Reports the outbox of store until app closes. */
export function observeOutbox(app: FastifyInstance, store: Store): void {
  stores.add(store);
  app.addHook('onClose', async () => void stores.delete(store));
}
