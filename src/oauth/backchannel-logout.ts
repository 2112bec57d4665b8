// OIDC Back-Channel Logout 1.0. oidc-provider builds, signs and POSTs the logout tokens (its
// `backchannelLogout` feature); here every delivery is recorded with its outcome, and failed ones
// are retried with backoff a bounded number of times by a small job.
import { isLoopbackHost } from '../config.ts';
import { errorText } from '../errors.ts';
import { inSpan, withTraceContext } from '../http/tracing.ts';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FastifyBaseLogger } from 'fastify';
import type Provider from 'oidc-provider';
import type { Store } from '../store/index.ts';
import {
  claimLogoutDelivery,
  deleteFinishedLogoutDeliveries,
  dueLogoutDeliveries,
  insertLogoutDelivery,
  recordLogoutAttempt,
  type LogoutDelivery,
} from '../store/logout-deliveries.ts';

/** Attempts per delivery, the first included. */
const MAX_LOGOUT_ATTEMPTS = 5;
/** Wait after attempt n (1-based) failed before attempt n + 1. */
const RETRY_DELAYS_MS = [30_000, 2 * 60_000, 10 * 60_000, 60 * 60_000];
/** How long a claimed delivery is left to the instance that claimed it. */
const CLAIM_MS = 60_000;
/** Delivered and abandoned deliveries are kept this long for the operator. */
const RETENTION_MS = 7 * 24 * 3600 * 1000;
const BATCH = 50;

/** oidc-provider's Client#backchannelLogout (not in its type definitions) */
type SendLogout = (this: LogoutClient, sub: string, sid: string | undefined) => Promise<void>;
interface LogoutClient {
  clientId: string;
  backchannelLogoutUri?: string;
  backchannelLogout: SendLogout;
}

/** The HTTP status the relying party answered, carried from the fetch to the attempt that made it. */
const answered = new AsyncLocalStorage<{ status?: number }>();

/** oidc-provider's own Client#backchannelLogout of each provider whose deliveries are recorded. */
const unwrapped = new WeakMap<Provider, SendLogout>();

/**
 * oidc-provider's outgoing requests (here: logout tokens to URIs the operator registered). Never
 * follow a redirect; keep oidc-provider's 2.5 s timeout and its refusal of private addresses. Only
 * a service that itself runs on loopback (development: PUBLIC_URL on localhost) may reach loopback
 * relying parties; anywhere else a loopback URI would reach the services beside the provider.
 */
export function outgoingFetch(publicUrl: string) {
  const allowLoopback = isLoopbackHost(new URL(publicUrl).hostname);
  return async function fetchOut(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const url = new URL(input instanceof Request ? input.url : input);
    const options: RequestInit & { dispatcher?: unknown } = { ...init, redirect: 'manual' };
    if (allowLoopback && isLoopbackHost(url.hostname)) delete options.dispatcher;
    const method = options.method ?? 'GET';
    return inSpan('outgoing request', { 'http.request.method': method, 'server.address': url.hostname }, async () => {
      // the trace context goes along when traces are on
      const traced = withTraceContext({});
      if (Object.keys(traced).length > 0) {
        const headers = new Headers(options.headers);
        for (const [name, value] of Object.entries(traced)) headers.set(name, value);
        options.headers = headers;
      }
      const response = await fetch(url, options);
      const attempt = answered.getStore();
      if (attempt) attempt.status = response.status;
      return response;
    });
  };
}

/** One attempt with oidc-provider's own delivery; records the outcome and schedules the next. */
async function attempt(
  store: Store,
  log: FastifyBaseLogger | undefined,
  send: () => Promise<void>,
  delivery: Pick<LogoutDelivery, 'id' | 'client_id' | 'sid' | 'attempts'>,
  lease: number,
  now: () => number,
): Promise<void> {
  const seen: { status?: number } = {};
  let error: string | null = null;
  try {
    await answered.run(seen, send);
  } catch (err) {
    error = errorText(err);
  }
  const attempts = delivery.attempts + 1;
  const at = now();
  const retry = error !== null && attempts < MAX_LOGOUT_ATTEMPTS;
  await recordLogoutAttempt(store.db, delivery.id, lease, {
    at,
    attempts,
    status: seen.status ?? null,
    error,
    delivered: error === null,
    nextAttemptAt: retry ? at + RETRY_DELAYS_MS[attempts - 1]! : null,
  });
  // The logout token itself is never logged.
  const fields = { client_id: delivery.client_id, sid: delivery.sid, attempt: attempts, status: seen.status };
  if (error === null) log?.info(fields, 'back-channel logout delivered');
  else log?.warn({ ...fields, error, retry }, 'back-channel logout failed');
  if (error !== null) throw new Error(error);
}

/**
 * Every logout token oidc-provider sends (RP-initiated logout, a user switch, endUserSessions)
 * goes through its Client#backchannelLogout; wrapping it records each delivery and its outcome.
 */
export function recordBackchannelLogouts(
  provider: Provider,
  store: Store,
  log?: FastifyBaseLogger,
  now: () => number = Date.now,
): void {
  const proto = provider.Client.prototype as unknown as LogoutClient;
  const send = proto.backchannelLogout;
  unwrapped.set(provider, send);
  proto.backchannelLogout = async function backchannelLogout(this: LogoutClient, sub, sid) {
    const createdAt = now();
    const lease = createdAt + CLAIM_MS;
    const delivery = await insertLogoutDelivery(
      store.db,
      { client_id: this.clientId, sub, sid: sid ?? null, created_at: createdAt },
      lease,
    );
    await attempt(store, log, () => send.call(this, sub, sid), delivery, lease, now);
  };
}

/** Attempts the deliveries whose retry is due; each one claimed first, so one instance sends it. */
export async function retryLogoutDeliveries(
  store: Store,
  provider: Provider,
  log?: FastifyBaseLogger,
  now: () => number = Date.now,
): Promise<number> {
  const due = await dueLogoutDeliveries(store.db, now(), BATCH);
  // The wrapped method would record a new delivery: a retry uses the one oidc-provider defines.
  const send = unwrapped.get(provider) ?? (provider.Client.prototype as unknown as LogoutClient).backchannelLogout;
  let attempted = 0;
  for (const delivery of due) {
    const lease = now() + CLAIM_MS;
    if (!(await claimLogoutDelivery(store.db, delivery, lease))) continue;
    attempted++;
    const client = (await provider.Client.find(delivery.client_id)) as unknown as LogoutClient | undefined;
    if (!client?.backchannelLogoutUri) {
      // The client was removed or no longer wants logout tokens: nothing left to deliver.
      await recordLogoutAttempt(store.db, delivery.id, lease, {
        at: now(),
        attempts: delivery.attempts,
        status: null,
        error: 'client has no back-channel logout URI',
        delivered: false,
        nextAttemptAt: null,
      });
      continue;
    }
    const resend = () => send.call(client, delivery.sub, delivery.sid ?? undefined);
    await attempt(store, log, resend, delivery, lease, now).catch(() => undefined);
  }
  return attempted;
}

/** Runs the retries every intervalMs (and removes old finished deliveries); returns the stop function. */
export function startLogoutRetries(
  store: Store,
  current: () => Provider,
  log: FastifyBaseLogger,
  intervalMs = 15_000,
): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    retryLogoutDeliveries(store, current(), log)
      .then(() => deleteFinishedLogoutDeliveries(store.db, Date.now() - RETENTION_MS))
      .catch((err: unknown) => log.warn({ err }, 'back-channel logout retries failed'))
      .finally(() => (running = false));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
