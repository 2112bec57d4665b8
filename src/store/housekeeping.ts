// Periodic removal of expired rows: oidc-provider artifacts past their expiry, rate-limit
// windows long closed, DPoP proof ids past their window. Safe to run on every instance at once
// (plain deletes by time).
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from './index.ts';
import { deleteExpiredPayloads } from './oidc-payloads.ts';
import { deleteOlderThan } from './rate-limits.ts';
import { deleteExpiredProofs } from './dpop-proofs.ts';

const RATE_LIMIT_RETENTION_MS = 24 * 3600 * 1000;

export async function sweepExpired(store: Store, now = Date.now()): Promise<{ payloads: number }> {
  const payloads = await deleteExpiredPayloads(store.db, now);
  await deleteOlderThan(store.db, now - RATE_LIMIT_RETENTION_MS);
  await deleteExpiredProofs(store.db, now);
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
