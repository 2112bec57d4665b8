// The refresh job, in every instance of the running service: each minute it looks for federations
// whose refresh is due and refreshes them, each claimed first with a conditional update (see
// refreshFederation), so with several instances exactly one fetches a given aggregate. It also
// notices an aggregate that has passed its validUntil without a newer one: the federation becomes
// stale (its SPs already stopped being served at that moment, since every SP row carries the
// validUntil), logged at error level once, by the instance that marked it.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Config } from '../config.ts';
import { observeFederations } from '../http/metrics-federations.ts';
import type { Store } from '../store/index.ts';
import { dueFederations, markStaleFederations } from '../store/saml-federations.ts';
import { errorText } from '../errors.ts';
import { iso } from '../time.ts';
import { federationSettings, refreshFederation, type FederationSettings } from './federations.ts';

export interface RefreshJobOptions {
  intervalMs?: number;
  now?: () => number;
}

/** One pass: stale federations reported, due ones refreshed. Exported for tests. */
export async function refreshDueFederations(
  store: Store,
  settings: FederationSettings,
  log: FastifyBaseLogger,
  now = Date.now(),
): Promise<void> {
  for (const row of await markStaleFederations(store.db, now)) {
    log.error(
      {
        federation: Number(row.id),
        url: row.url,
        valid_until: iso(Number(row.valid_until)),
        last_error: row.last_error,
      },
      'SAML federation metadata has expired and no newer aggregate could be verified: its service providers are refused',
    );
  }
  for (const id of await dueFederations(store.db, now)) {
    await refreshFederation(store, settings, id, { now, log });
  }
}

/** Starts the job; returns the function that stops it (a pass under way finishes on its own). */
export function startFederationRefresh(
  store: Store,
  settings: FederationSettings,
  log: FastifyBaseLogger,
  { intervalMs = 60_000, now = Date.now }: RefreshJobOptions = {},
): () => void {
  let running = false;
  let stopped = false;
  const pass = () => {
    if (running || stopped) return;
    running = true;
    refreshDueFederations(store, settings, log, now())
      .catch((err: unknown) => log.warn({ err: errorText(err) }, 'SAML federation refresh pass failed'))
      .finally(() => {
        running = false;
      });
  };
  const timer = setInterval(pass, intervalMs);
  timer.unref();
  const first = setTimeout(pass, Math.min(intervalMs, 5000));
  first.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
    clearTimeout(first);
  };
}

/** The job of a running service, with the federations' metrics; returns the function that stops it. */
export function runFederationRefresh(app: FastifyInstance, store: Store, config: Config): () => void {
  observeFederations(app, store);
  return startFederationRefresh(store, federationSettings(config), app.log);
}
