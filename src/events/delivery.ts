// The delivery job, in every instance: claims due deliveries from the outbox (src/store/events.ts),
// sends each (a signed webhook message, or a SET pushed to a Shared Signals stream) and records the
// outcome. At least once: a delivery is marked delivered only after the receiver answered 2xx, so
// a crash between the two sends it again (receivers deduplicate by webhook-id or jti). A failure
// is retried with exponential backoff and jitter until EVENTS_DEAD_LETTER_SECONDS after its
// event, then given up (dead). Never part of a request: a slow or dead receiver delays nothing else
// than its own deliveries.
import type { FastifyBaseLogger } from 'fastify';
import { open, seal, type Keyring } from '../crypto.ts';
import { errorText } from '../errors.ts';
import { inSpan } from '../http/tracing.ts';
import type { Store } from '../store/index.ts';
import * as repo from '../store/events.ts';
import { countDelivery } from '../http/metrics-events.ts';
import { post, type Answer, type TargetPolicy } from './targets.ts';
import { sendToWebhook, webhookBody } from './webhooks.ts';
import { setForDelivery, type SetSigner } from './sets.ts';
import { mailContexts, sendMail, type MailContexts, type MailDeps } from './mail.ts';
import { countMail } from '../http/metrics-events.ts';

/**
 * How long an attempt holds its delivery: well over the 5 s a receiver has to answer. Deliveries
 * claimed by an instance that died are taken over by another once their lease ends.
 */
const LEASE_MS = 15_000;
const BATCH = 50;
/**
 * A batch's outcomes are recorded together once every attempt has ended, or after this long: the
 * attempts still waiting for an answer (a receiver that is slow or never answers, 5 s at most) are
 * recorded when they end, and the next batch does not wait for them.
 */
const BATCH_WAIT_MS = 500;
/** Attempts in flight at most (the stragglers of earlier batches count). */
const MAX_IN_FLIGHT = 200;
/** Batches under way at once while the outbox holds more than a batch. */
const LANES = 3;
/** Between looks at the outbox when the last one found nothing to do. */
const IDLE_MS = 250;
const MAX_DELAY_MS = 3600_000;
/** A paused stream's deliveries wait this long before the job looks at them again. */
const PAUSED_RETRY_MS = 5000;

export interface DeliveryOptions {
  store: Store;
  keys: Keyring;
  policy: TargetPolicy;
  issuer: string;
  signSet: SetSigner;
  retryBaseMs: number;
  deadLetterMs: number;
  /** what e-mail deliveries (`mail:<kind>`) are written and sent with */
  mail?: MailDeps;
  log?: FastifyBaseLogger;
  now?: () => number;
}

/** The wait after the n-th failed attempt (1-based): base x 3^(n-1), at most an hour, minus up to 10% jitter. */
export function retryDelay(baseMs: number, failedAttempts: number, random = Math.random()): number {
  const delay = Math.min(MAX_DELAY_MS, baseMs * 3 ** Math.max(0, failedAttempts - 1));
  return Math.round(delay * (1 - 0.1 * random));
}

type Outcome = { ok: true; status: number } | { ok: false; status: number | null; error: string };
/** Nothing will ever send it, for this reason. */
type Gone = { gone: string };

function fromAnswer(answer: Answer): Outcome {
  if (answer.status >= 200 && answer.status < 300) return { ok: true, status: answer.status };
  return { ok: false, status: answer.status, error: `HTTP ${answer.status} ${answer.body.slice(0, 200)}`.trim() };
}

/** A push stream's Authorization header, sealed at rest with the stream's id as associated data. */
/** The additional data a push stream's Authorization header is sealed with. */
export const streamAuthorizationAad = (streamId: string) => `stream-authorization:${streamId}`;

export function sealAuthorization(keys: Keyring, streamId: string, header: string): string {
  return seal(keys.eventSecrets, Buffer.from(header), streamAuthorizationAad(streamId));
}

function openAuthorization(keys: Keyring, stream: repo.StreamRow): string | undefined {
  if (!stream.authorization_header) return undefined;
  const header = open(keys.eventSecrets, stream.authorization_header, streamAuthorizationAad(stream.id));
  if (!header) throw new Error(`stream ${stream.id}: its authorization header cannot be opened with this IDP_SECRET`);
  return header.toString('utf8');
}

/** The webhooks and streams of one batch, each read once, and what its messages are written from. */
function destinations(o: DeliveryOptions, batch: repo.ClaimedDelivery[]) {
  const webhooks = new Map<number, Promise<repo.WebhookRow | undefined>>();
  const streams = new Map<string, Promise<repo.StreamRow | undefined>>();
  let contexts: Promise<MailContexts> | undefined;
  return {
    /** read together for every message of the batch, when the first is written */
    mailContexts(mail: MailDeps) {
      contexts ??= mailContexts(
        mail,
        batch.flatMap((d) =>
          d.destination.startsWith('mail:') ? [{ kind: d.destination.slice('mail:'.length), data: d.data }] : [],
        ),
      );
      return contexts;
    },
    webhook(id: number) {
      if (!webhooks.has(id)) webhooks.set(id, repo.findWebhook(o.store.db, id));
      return webhooks.get(id)!;
    },
    stream(id: string) {
      if (!streams.has(id)) streams.set(id, repo.findStreamById(o.store.db, id));
      return streams.get(id)!;
    },
  };
}
type Destinations = ReturnType<typeof destinations>;

async function toWebhook(
  o: DeliveryOptions,
  known: Destinations,
  d: repo.ClaimedDelivery,
  id: number,
  at: number,
): Promise<Outcome | 'gone'> {
  const row = await known.webhook(id);
  if (!row) return 'gone';
  const body = webhookBody(d);
  return fromAnswer(await sendToWebhook(o.keys, o.policy, row, { id: `msg_${d.event_id}`, body }, at));
}

async function toStream(
  o: DeliveryOptions,
  known: Destinations,
  d: repo.ClaimedDelivery,
  id: string,
  at: number,
): Promise<Outcome | 'gone' | 'paused'> {
  const stream = await known.stream(id);
  if (!stream || stream.status === 'disabled' || stream.delivery_method !== repo.PUSH || !stream.endpoint_url)
    return 'gone';
  if (stream.status === 'paused') return 'paused';
  const set = await setForDelivery(o.signSet, o.issuer, stream, d, at);
  if (!set) return 'gone';
  const headers: Record<string, string> = {
    'content-type': 'application/secevent+jwt',
    accept: 'application/json',
  };
  const authorization = openAuthorization(o.keys, stream);
  if (authorization) headers.authorization = authorization;
  return fromAnswer(await post(stream.endpoint_url, set.token, headers, o.policy));
}

/** A message is written and sent; one that can no longer be (its user, address or link gone) is given up. */
async function toMail(
  o: DeliveryOptions,
  known: Destinations,
  d: repo.ClaimedDelivery,
  kind: string,
): Promise<Outcome | Gone> {
  if (!o.mail) return { ok: false, status: null, error: 'mail is not configured (SMTP_URL is not set)' };
  const result = await sendMail(o.mail, kind, d.data, await known.mailContexts(o.mail));
  if ('gone' in result) return { gone: result.gone };
  return result.ok ? { ok: true, status: 250 } : { ok: false, status: null, error: result.error };
}

/** What an attempt's result means for its delivery. */
function settle(
  o: DeliveryOptions,
  d: repo.ClaimedDelivery,
  kind: string,
  outcome: Outcome | Gone | 'gone' | 'paused',
  at: number,
): repo.AttemptOutcome {
  if (typeof outcome === 'object' && 'gone' in outcome)
    return { at, status: null, error: outcome.gone, state: 'dead', nextAttemptAt: null };
  if (outcome === 'paused')
    return {
      at,
      status: null,
      error: 'stream paused',
      state: 'pending',
      nextAttemptAt: at + PAUSED_RETRY_MS,
      counted: false,
    };
  if (outcome === 'gone')
    return { at, status: null, error: `${kind} removed or disabled`, state: 'dead', nextAttemptAt: null };
  if (outcome.ok) return { at, status: outcome.status, error: null, state: 'delivered', nextAttemptAt: null };
  const dead = at - Number(d.created_at) >= o.deadLetterMs;
  return {
    at,
    status: outcome.status,
    error: outcome.error,
    state: dead ? 'dead' : 'pending',
    nextAttemptAt: dead ? null : at + retryDelay(o.retryBaseMs, d.attempts + 1),
  };
}

interface Attempt {
  d: repo.ClaimedDelivery;
  kind: string;
  result: repo.AttemptOutcome;
}

/**
 * The outcomes of a batch, in one transaction: the deliveries accepted with one status in one
 * statement (the usual case), the others one by one.
 */
async function recordOutcomes(o: DeliveryOptions, attempts: Attempt[]): Promise<void> {
  // Grouped by status and lease: attempts of several claims may end together.
  const accepted = new Map<string, Attempt[]>();
  const others: Attempt[] = [];
  for (const a of attempts) {
    if (a.result.state !== 'delivered' || a.result.status === null) others.push(a);
    else {
      const key = `${a.result.status} ${a.d.lease}`;
      accepted.set(key, [...(accepted.get(key) ?? []), a]);
    }
  }
  const recorded = await o.store.db.transaction().execute(async (trx) => {
    const ids = new Set<number>();
    for (const group of accepted.values()) {
      const { lease } = group[0]!.d;
      const status = group[0]!.result.status!;
      const at = Math.max(...group.map((a) => a.result.at));
      const done = await repo.recordDelivered(
        trx,
        group.map((a) => Number(a.d.id)),
        lease,
        { at, status },
      );
      done.forEach((id) => ids.add(id));
    }
    for (const a of others)
      if (await repo.recordDeliveryAttempt(trx, a.d, a.d.lease, a.result)) ids.add(Number(a.d.id));
    return ids;
  });
  for (const { d, kind, result } of attempts) {
    if (!recorded.has(Number(d.id))) continue;
    const outcome = result.state === 'delivered' ? 'delivered' : result.state === 'dead' ? 'dead' : 'failed';
    countDelivery(kind, outcome);
    if (kind === 'mail') countMail(d.destination.slice('mail:'.length), outcome === 'delivered' ? 'sent' : outcome);
    if (result.state === 'dead')
      o.log?.warn(
        { delivery: Number(d.id), destination: d.destination, error: result.error },
        'event delivery given up',
      );
  }
}

/** One attempt at one delivery, and what it means for the delivery. */
async function attempt(
  o: DeliveryOptions,
  now: () => number,
  d: repo.ClaimedDelivery,
  known: Destinations,
): Promise<Attempt> {
  const at = now();
  const split = d.destination.indexOf(':');
  const [kind, id] = [d.destination.slice(0, split), d.destination.slice(split + 1)];
  // a span per attempt, a trace of its own; the receiver gets its traceparent (targets.ts)
  const attributes = { 'event.delivery.kind': kind, 'event.delivery.attempt': d.attempts + 1 };
  return inSpan(`${kind} delivery`, attributes, async () => {
    let outcome: Outcome | Gone | 'gone' | 'paused';
    try {
      if (kind === 'mail') outcome = await toMail(o, known, d, id);
      else if (kind === 'webhook') outcome = await toWebhook(o, known, d, Number(id), at);
      else outcome = await toStream(o, known, d, id, at);
    } catch (err) {
      outcome = { ok: false, status: null, error: errorText(err) };
    }
    return { d, kind, result: settle(o, d, kind, outcome, now()) };
  });
}

export function startEventDelivery(o: DeliveryOptions): { stop(): Promise<void>; runOnce(): Promise<number> } {
  const now = o.now ?? Date.now;
  /** attempts that outlived their batch's wait, each recorded when it ends */
  const stragglers = new Set<Promise<void>>();
  /** attempts claimed and not yet ended, and the room that claims under way have taken */
  let inFlight = 0;
  let reserved = 0;

  async function runBatch(): Promise<number> {
    const room = Math.min(BATCH, MAX_IN_FLIGHT - inFlight - reserved);
    if (room <= 0) return 0;
    reserved += room;
    let batch: repo.ClaimedDelivery[];
    try {
      const at = now();
      batch = await repo.claimDueDeliveries(o.store.db, o.store.dialect, at, at + LEASE_MS, room);
    } finally {
      reserved -= room;
    }
    inFlight += batch.length;
    const known = destinations(o, batch);
    const ended: Attempt[] = [];
    const attempts = batch.map((d) =>
      attempt(o, now, d, known).then(
        (a) => (ended.push(a), a),
        (err: unknown) => {
          inFlight--;
          throw err;
        },
      ),
    );
    let waiting: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled(attempts), new Promise((r) => (waiting = setTimeout(r, BATCH_WAIT_MS)))]);
    clearTimeout(waiting);
    const recorded = new Set(ended);
    // the attempts still under way are recorded as each ends, whatever becomes of this record
    for (const pending of attempts) {
      const late: Promise<void> = pending
        .then((a) => {
          if (recorded.has(a)) return undefined;
          inFlight--;
          return recordOutcomes(o, [a]);
        })
        .catch((err: unknown) => o.log?.warn({ err }, 'event delivery: an outcome was not recorded'))
        .finally(() => stragglers.delete(late));
      stragglers.add(late);
    }
    try {
      await recordOutcomes(o, [...recorded]);
    } finally {
      inFlight -= recorded.size;
    }
    return batch.length;
  }

  /** One batch to the end, stragglers included (for tests). */
  async function runOnce(): Promise<number> {
    const n = await runBatch();
    await Promise.allSettled([...stragglers]);
    return n;
  }

  const lanes = startLanes(runBatch, o.log);
  return {
    runOnce,
    async stop() {
      await lanes.stop();
      await Promise.allSettled([...stragglers]);
    },
  };
}

/**
 * Lanes: one looks at the outbox every IDLE_MS; while batches come back full, more lanes claim the
 * next batches before the earlier ones have been sent, up to LANES at once, so that the database's
 * and the receivers' waits overlap. Order per subject and destination holds across lanes as across
 * instances: a delivery is not claimed while an earlier one of its subject to its destination is
 * pending (claimDueDeliveries).
 */
function startLanes(runBatch: () => Promise<number>, log?: FastifyBaseLogger): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  /** batches between their claim and the record of their outcomes */
  const running = new Set<Promise<number>>();
  let lanes = 0;
  function wait(then: () => void, ms: number): void {
    if (stopped) return void lanes--;
    timer = setTimeout(then, ms);
    timer.unref();
  }
  function lane(): void {
    lanes++;
    const next = (): void => {
      if (stopped) return void lanes--;
      const batch = runBatch();
      running.add(batch);
      batch.then(
        (n) => {
          running.delete(batch);
          if (n === BATCH) {
            if (lanes < LANES) lane();
            setImmediate(next);
          } else if (lanes > 1) lanes--;
          else wait(next, IDLE_MS);
        },
        (err: unknown) => {
          running.delete(batch);
          if (lanes > 1) return void lanes--;
          log?.warn({ err }, 'event delivery: the outbox could not be read, retrying');
          wait(next, IDLE_MS * 8);
        },
      );
    };
    next();
  }
  timer = setTimeout(lane, 0);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await Promise.allSettled([...running]);
    },
  };
}
