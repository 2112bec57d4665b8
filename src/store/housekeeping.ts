// Periodic removal of expired rows: oidc-provider artifacts past their expiry, rate-limit
// windows long closed, DPoP proof ids past their window, upstream sign-ins
// that expired, event deliveries finished 30 days ago. Safe to run on every instance at once
// (plain deletes by time). Each run also records the day's adoption figures of every organization
// (an upsert of the same counts: instances racing write one row).
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from './index.ts';
import { deleteExpiredPayloads } from './oidc-payloads.ts';
import { deleteOlderThan } from './rate-limits.ts';
import { deleteExpiredProofs } from './dpop-proofs.ts';
import { deleteAuditEventsBefore } from './audit.ts';
import { deleteFinishedEvents } from './events.ts';
import { deleteExpiredSamlRows } from './saml-sso.ts';
import { recordAdoptionDay } from './adoption.ts';
import { deleteExpiredUpstreamRequests } from './upstream.ts';

const RATE_LIMIT_RETENTION_MS = 24 * 3600 * 1000;

const DAY_MS = 24 * 3600 * 1000;
/** Delivered and given-up event deliveries are kept this long for `events list` and `events replay`. */
const EVENT_RETENTION_MS = 30 * DAY_MS;

/** Removes what has expired; audit records older than the retention (days) go too, in batches. */
export async function sweepExpired(
  store: Store,
  now = Date.now(),
  auditRetentionDays?: number,
): Promise<{ payloads: number; audit: number }> {
  const payloads = await deleteExpiredPayloads(store.db, now);
  await deleteOlderThan(store.db, now - RATE_LIMIT_RETENTION_MS);
  await deleteExpiredProofs(store.db, now);
  await deleteExpiredSamlRows(store.db, now);
  await deleteExpiredUpstreamRequests(store.db, now);
  await deleteFinishedEvents(store.db, now - EVENT_RETENTION_MS);
  let audit = 0;
  if (auditRetentionDays !== undefined) {
    const before = now - auditRetentionDays * DAY_MS;
    for (let batch = await deleteAuditEventsBefore(store.db, before); batch > 0;) {
      audit += batch;
      batch = await deleteAuditEventsBefore(store.db, before);
    }
  }
  return { payloads, audit };
}

export function startHousekeeping(
  store: Store,
  log: FastifyBaseLogger,
  auditRetentionDays: number,
  intervalMs = 10 * 60 * 1000,
): () => void {
  const timer = setInterval(() => {
    sweepExpired(store, Date.now(), auditRetentionDays)
      .then((r) => {
        if (r.payloads) log.debug({ removed: r.payloads }, 'removed expired authorization artifacts');
        if (r.audit) log.info({ removed: r.audit, retention_days: auditRetentionDays }, 'pruned old audit records');
      })
      .catch((err) => log.warn({ err }, 'housekeeping failed'));
    recordAdoptionDay(store.db, Date.now()).catch((err) => log.warn({ err }, 'recording the adoption figures failed'));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
