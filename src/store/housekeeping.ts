// Periodic removal of expired rows: oidc-provider artifacts past their expiry and rate-limit
// windows long closed. Safe to run on every instance at once (plain deletes by time).
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from './index.ts';
import { deleteExpiredPayloads } from './oidc-payloads.ts';
import { deleteOlderThan } from './rate-limits.ts';

const RATE_LIMIT_RETENTION_MS = 24 * 3600 * 1000;

export async function sweepExpired(store: Store, now = Date.now()): Promise<{ payloads: number }> {
  const payloads = await deleteExpiredPayloads(store.db, now);
  await deleteOlderThan(store.db, now - RATE_LIMIT_RETENTION_MS);
  return { payloads };
}

export function startHousekeeping(store: Store, log: FastifyBaseLogger, intervalMs = 10 * 60 * 1000): () => void {
  const timer = setInterval(() => {
    sweepExpired(store)
      .then((r) => r.payloads && log.debug({ removed: r.payloads }, 'removed expired authorization artifacts'))
      .catch((err) => log.warn({ err }, 'housekeeping failed'));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
