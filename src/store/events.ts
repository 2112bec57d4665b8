// The event outbox and its deliveries, webhooks and Shared Signals streams.
//
// An event is written with one delivery per destination that wants it, in the transaction of the
// change it reports. The delivery job of any instance claims due deliveries with a lease (a
// conditional update; on PostgreSQL the rows are locked with SKIP LOCKED, so instances never wait
// on each other); of the pending deliveries to one destination about one subject, only the oldest
// can be claimed, which keeps them in order.
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, EventDeliveriesTable, EventsTable, SsfStreamsTable, WebhooksTable } from './schema.ts';
import type { Dialect } from './index.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type EventRow = Selectable<EventsTable>;
export type DeliveryRow = Selectable<EventDeliveriesTable>;
export type WebhookRow = Selectable<WebhooksTable>;
export type StreamRow = Selectable<SsfStreamsTable>;

export const PUSH = 'urn:ietf:rfc:8935';
export const POLL = 'urn:ietf:rfc:8936';

export interface NewEvent {
  at: number;
  type: string;
  orgId: number | null;
  /** the user it is about (eppn) */
  subject: string;
  /** the user's sub: streams limited to some subjects list subs */
  sub: string | null;
  /** the Shared Signals event type it is sent as, if any */
  ssfType: string | null;
  data: object;
}

/** Writes an event and a delivery for every webhook and stream that wants it; returns the event id. */
export async function insertEvent(db: Q, e: NewEvent): Promise<number> {
  return (await insertEvents(db, [e]))[0]!;
}

/**
 * Writes events (in their order) and a delivery for every webhook and stream that wants each;
 * returns their ids. One statement for the events and one for their deliveries per CHUNK events,
 * so the change's transaction stays short however many it reports.
 */
export async function insertEvents(db: Q, events: NewEvent[]): Promise<number[]> {
  const ids: number[] = [];
  for (const part of chunks(events)) {
    const rows = await db
      .insertInto('events')
      .values(
        part.map((e) => ({
          at: e.at,
          type: e.type,
          org_id: e.orgId,
          subject: e.subject,
          data: JSON.stringify(e.data),
        })),
      )
      .returning(['id', 'type', 'subject'])
      .execute();
    // The rows take their ids in the order they are given (a sequence or rowid, row after row);
    // the order the database returns them in is its own.
    const taken = rows.sort((a, b) => Number(a.id) - Number(b.id));
    const written = part.map((e, i) => {
      const row = taken[i];
      if (!row || row.type !== e.type || row.subject !== e.subject) throw new Error('events written out of order');
      return { ...e, id: Number(row.id) };
    });
    await insertDeliveries(db, written);
    ids.push(...written.map((e) => e.id));
  }
  return ids;
}

/**
 * The deliveries of written events, in one statement for both kinds of destination: every webhook of
 * an event's organization that wants its type, and every stream (not disabled) of a client that
 * administers the organization, that requested its Shared Signals type and covers its user.
 * Numbered in the order of the events, so deliveries to one destination about one subject go out in order.
 */
async function insertDeliveries(db: Q, events: (NewEvent & { id: number })[]): Promise<void> {
  const owned = events.filter((e) => e.orgId !== null);
  if (owned.length === 0) return;
  const values = sql.join(
    owned.map(
      (e) =>
        sql`(cast(${e.id} as bigint), cast(${e.type} as text), cast(${e.subject} as text), cast(${e.sub} as text), cast(${e.ssfType} as text), cast(${e.orgId} as bigint), cast(${e.at} as bigint))`,
    ),
  );
  const webhooks = sql`select e.event_id, 'webhook:' || cast(w.id as text), e.subject, 'pending', 0, e.at, e.at
    from e join webhooks w on w.org_id = e.org_id
    where w.event_types = '' or w.event_types like ('% ' || e.type || ' %')`;
  // A poll stream's receiver collects its events; the delivery job leaves them alone.
  const streams = sql`select e.event_id, 'stream:' || s.id, e.subject, 'pending', 0,
      case when s.delivery_method = ${PUSH} then e.at else null end, e.at
    from e join ssf_streams s on s.status <> 'disabled' and s.events_requested like ('%"' || e.ssf_type || '"%')
    where e.ssf_type is not null
      and exists (select co.org_id from client_orgs co
        where co.client_id = s.client_id and co.org_id = e.org_id and co.kind = 'admin')
      and (s.all_subjects = 1 or exists (select ss.sub from ssf_stream_subjects ss
        where ss.stream_id = s.id and ss.sub = coalesce(e.sub, '')))`;
  const destinations = owned.some((e) => e.ssfType !== null) ? sql`${webhooks} union all ${streams}` : webhooks;
  await sql`with e (event_id, type, subject, sub, ssf_type, org_id, at) as (values ${values})
    insert into event_deliveries (event_id, destination, subject, state, attempts, next_attempt_at, created_at)
    ${destinations} order by 1`.execute(db);
}

export interface ClaimedDelivery extends DeliveryRow {
  type: string;
  at: number;
  data: string;
  lease: number;
}

/**
 * Takes up to `limit` due deliveries for one attempt each, until `leaseUntil`: pending, due, not
 * held by another attempt, and the oldest pending one of their destination and subject.
 */
export async function claimDueDeliveries(
  db: Kysely<DB>,
  dialect: Dialect,
  now: number,
  leaseUntil: number,
  limit: number,
): Promise<ClaimedDelivery[]> {
  const due = db
    .selectFrom('event_deliveries as d')
    .select('d.id')
    .where('d.state', '=', 'pending')
    .where('d.next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('d.lease_until', 'is', null), eb('d.lease_until', '<=', now)]))
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('event_deliveries as e')
            .select('e.id')
            .whereRef('e.destination', '=', 'd.destination')
            .whereRef('e.subject', '=', 'd.subject')
            .where('e.state', '=', 'pending')
            .whereRef('e.id', '<', 'd.id'),
        ),
      ),
    )
    .orderBy('d.id')
    .limit(limit);
  const claim = (q: Q) =>
    q
      .updateTable('event_deliveries')
      .set({ lease_until: leaseUntil })
      // On PostgreSQL the rows are locked as they are chosen, and chosen once: as `id in (...)`, the
      // planner may run the subquery again for each row it joins, and each run skips what the last
      // one locked, so that a claim of 50 took every due delivery.
      .where((eb) =>
        dialect === 'postgres'
          ? sql<boolean>`${eb.ref('id')} = any(array(${due.forUpdate().skipLocked()}))`
          : eb('id', 'in', due),
      )
      .where('state', '=', 'pending')
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]))
      .returningAll()
      .execute();
  // Planned without statistics (a table just filled, before ANALYZE), PostgreSQL took the due
  // deliveries as few and chose to read them all and sort them: 0.5 s a claim with 100,000 queued.
  // Walking the pending index in id order costs the same at any depth, so it is the plan, always.
  const claimed =
    dialect === 'postgres'
      ? await db.transaction().execute(async (trx) => {
          await sql`select set_config('enable_sort', 'off', true)`.execute(trx);
          return claim(trx);
        })
      : await claim(db);
  if (claimed.length === 0) return [];
  const events = await db
    .selectFrom('events')
    .select(['id', 'type', 'at', 'data'])
    .where(
      'id',
      'in',
      claimed.map((d) => d.event_id),
    )
    .execute();
  const byId = new Map(events.map((e) => [Number(e.id), e]));
  return claimed
    .map((d) => {
      const event = byId.get(Number(d.event_id))!;
      return { ...d, type: event.type, at: Number(event.at), data: event.data, lease: leaseUntil };
    })
    .sort((a, b) => Number(a.id) - Number(b.id));
}

export interface AttemptOutcome {
  at: number;
  status: number | null;
  error: string | null;
  state: 'pending' | 'delivered' | 'dead';
  /** the next attempt (pending only) */
  nextAttemptAt: number | null;
  /** false: the attempt did not count (a paused stream) */
  counted?: boolean;
}

/** Records one attempt, if it still holds its lease (an attempt that outlived it changes nothing). */
export async function recordDeliveryAttempt(
  db: Q,
  delivery: Pick<DeliveryRow, 'id' | 'attempts'>,
  lease: number,
  o: AttemptOutcome,
): Promise<boolean> {
  const r = await db
    .updateTable('event_deliveries')
    .set({
      state: o.state,
      attempts: o.counted === false ? delivery.attempts : delivery.attempts + 1,
      last_attempt_at: o.at,
      last_status: o.status,
      last_error: o.error,
      delivered_at: o.state === 'delivered' ? o.at : null,
      next_attempt_at: o.state === 'pending' ? o.nextAttemptAt : null,
      lease_until: null,
    })
    .where('id', '=', delivery.id)
    .where('lease_until', '=', lease)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/**
 * Records many successful attempts at once (a batch's deliveries the receivers accepted with one
 * status): one statement instead of one per delivery. Only those still holding `lease` change;
 * returns their ids.
 */
export async function recordDelivered(
  db: Q,
  ids: number[],
  lease: number,
  o: { at: number; status: number },
): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .updateTable('event_deliveries')
    .set((eb) => ({
      state: 'delivered',
      attempts: eb('attempts', '+', 1),
      last_attempt_at: o.at,
      last_status: o.status,
      last_error: null,
      delivered_at: o.at,
      next_attempt_at: null,
      lease_until: null,
    }))
    .where('id', 'in', ids)
    .where('lease_until', '=', lease)
    .returning('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

export interface DeliveryFilter {
  state?: string;
  destination?: string;
  /** keyset: only deliveries with a smaller id */
  before?: number;
  limit?: number;
}

export interface DeliveryView extends DeliveryRow {
  type: string;
  at: number;
  data: string;
}

function deliveriesWithEvents(db: Q) {
  return db
    .selectFrom('event_deliveries as d')
    .innerJoin('events as ev', 'ev.id', 'd.event_id')
    .selectAll('d')
    .select(['ev.type', 'ev.at', 'ev.data']);
}

export function listDeliveries(db: Q, f: DeliveryFilter): Promise<DeliveryView[]> {
  let q = deliveriesWithEvents(db);
  if (f.state !== undefined) q = q.where('d.state', '=', f.state);
  if (f.destination !== undefined) q = q.where('d.destination', '=', f.destination);
  if (f.before !== undefined) q = q.where('d.id', '<', f.before);
  return q
    .orderBy('d.id', 'desc')
    .limit(f.limit ?? 100)
    .execute();
}

export function findDelivery(db: Q, id: number): Promise<DeliveryView | undefined> {
  return deliveriesWithEvents(db).where('d.id', '=', id).executeTakeFirst();
}

export type ReplayResult =
  | { replayed: true; earlierMadeDue: number }
  /** nothing would send it: its webhook or stream was removed, or the stream is disabled */
  | { replayed: false; destination: string; reason: 'removed' | 'disabled' };

/**
 * Makes a delivery pending and due again (a replay), whatever its state; undefined for an unknown id.
 * Refused (nothing changes) when nothing would send it: its webhook or stream no longer exists, or
 * the stream is disabled. Deliveries to one destination about one subject go out in order, so the
 * earlier ones of its destination and subject still pending would hold it back until their next
 * attempt (up to an hour away after failures): they are made due now too. Returns how many of
 * those there were.
 */
export async function replayDelivery(db: Kysely<DB>, id: number, now: number): Promise<ReplayResult | undefined> {
  return db.transaction().execute(async (trx): Promise<ReplayResult | undefined> => {
    const delivery = await trx
      .selectFrom('event_deliveries')
      .select(['destination', 'subject'])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!delivery) return undefined;
    const { destination } = delivery;
    let polled = false;
    if (destination.startsWith('stream:')) {
      const stream = await trx
        .selectFrom('ssf_streams')
        .select(['delivery_method', 'status'])
        .where('id', '=', destination.slice('stream:'.length))
        .executeTakeFirst();
      if (!stream) return { replayed: false, destination, reason: 'removed' };
      if (stream.status === 'disabled') return { replayed: false, destination, reason: 'disabled' };
      polled = stream.delivery_method === POLL;
    } else if (!destination.startsWith('mail:')) {
      // e-mail (src/store/mail.ts) always has its mail server to go to
      const webhook = await trx
        .selectFrom('webhooks')
        .select('id')
        .where('id', '=', Number(destination.slice('webhook:'.length)))
        .executeTakeFirst();
      if (!webhook) return { replayed: false, destination, reason: 'removed' };
    }
    await trx
      .updateTable('event_deliveries')
      .set({
        state: 'pending',
        attempts: 0,
        next_attempt_at: polled ? null : now,
        lease_until: null,
        delivered_at: null,
      })
      .where('id', '=', id)
      .execute();
    // a poll stream's receiver collects its deliveries in order itself; no subject, no order to keep
    if (polled || delivery.subject === null) return { replayed: true, earlierMadeDue: 0 };
    const earlier = await trx
      .updateTable('event_deliveries')
      .set({ next_attempt_at: now })
      .where('destination', '=', destination)
      .where('subject', '=', delivery.subject)
      .where('state', '=', 'pending')
      .where('id', '<', id)
      .where((eb) => eb.or([eb('next_attempt_at', 'is', null), eb('next_attempt_at', '>', now)]))
      .executeTakeFirst();
    return { replayed: true, earlierMadeDue: Number(earlier.numUpdatedRows) };
  });
}

/** Pending deliveries and the age of the oldest, for /metrics. */
export async function outboxDepth(db: Q): Promise<{ pending: number; oldest: number | null }> {
  const row = await db
    .selectFrom('event_deliveries')
    .select((eb) => [eb.fn.countAll<number | string>().as('pending'), eb.fn.min('created_at').as('oldest')])
    .where('state', '=', 'pending')
    .executeTakeFirstOrThrow();
  return { pending: Number(row.pending), oldest: row.oldest === null ? null : Number(row.oldest) };
}

/** Retention: delivered and dead deliveries, and events with no delivery left, older than `before`. */
export async function deleteFinishedEvents(db: Q, before: number): Promise<number> {
  const r = await db
    .deleteFrom('event_deliveries')
    .where('state', '<>', 'pending')
    .where('created_at', '<', before)
    .executeTakeFirst();
  await db
    .deleteFrom('events')
    .where('at', '<', before)
    .where((eb) =>
      eb.not(eb.exists(eb.selectFrom('event_deliveries as d').select('d.id').whereRef('d.event_id', '=', 'events.id'))),
    )
    .execute();
  return Number(r.numDeletedRows);
}

// Webhooks

export async function insertWebhook(
  db: Q,
  w: { orgId: number; url: string; eventTypes: string[]; secret: string; at: number },
): Promise<WebhookRow> {
  return db
    .insertInto('webhooks')
    .values({
      org_id: w.orgId,
      url: w.url,
      event_types: w.eventTypes.length ? ` ${w.eventTypes.join(' ')} ` : '',
      secret: w.secret,
      created_at: w.at,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function listWebhooks(db: Q, orgId?: number): Promise<WebhookRow[]> {
  let q = db.selectFrom('webhooks').selectAll();
  if (orgId !== undefined) q = q.where('org_id', '=', orgId);
  return q.orderBy('id').execute();
}

export function findWebhook(db: Q, id: number): Promise<WebhookRow | undefined> {
  return db.selectFrom('webhooks').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Removes a webhook and its deliveries still pending; false for an unknown id. */
export async function deleteWebhook(db: Q, id: number): Promise<boolean> {
  await db
    .deleteFrom('event_deliveries')
    .where('destination', '=', `webhook:${id}`)
    .where('state', '=', 'pending')
    .execute();
  const r = await db.deleteFrom('webhooks').where('id', '=', id).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export async function updateWebhookSecret(
  db: Q,
  id: number,
  secret: string,
  previous: { secret: string; expiresAt: number } | null,
): Promise<void> {
  await db
    .updateTable('webhooks')
    .set({ secret, previous_secret: previous?.secret ?? null, previous_secret_expires_at: previous?.expiresAt ?? null })
    .where('id', '=', id)
    .execute();
}

// Shared Signals streams

export async function insertStream(db: Q, row: StreamRow): Promise<void> {
  await db.insertInto('ssf_streams').values(row).execute();
}

export function findStream(db: Q, clientId: string, id: string): Promise<StreamRow | undefined> {
  return db
    .selectFrom('ssf_streams')
    .selectAll()
    .where('id', '=', id)
    .where('client_id', '=', clientId)
    .executeTakeFirst();
}

/** Any client's stream, for the delivery job. */
export function findStreamById(db: Q, id: string): Promise<StreamRow | undefined> {
  return db.selectFrom('ssf_streams').selectAll().where('id', '=', id).executeTakeFirst();
}

export function listStreams(db: Q, clientId: string): Promise<StreamRow[]> {
  return db.selectFrom('ssf_streams').selectAll().where('client_id', '=', clientId).orderBy('created_at').execute();
}

/**
 * Changes a stream. When its delivery method is given, its pending deliveries are scheduled for it
 * in the same transaction (run it in one): due now for push (the delivery job sends them), none for
 * poll (the receiver collects them; an attempt of the job still under way no longer holds its
 * delivery, so its outcome is not recorded). Left as they were, a stream switched to push kept
 * deliveries the job never claims, holding back every later one about the same user, and one
 * switched to poll had its deliveries given up by the job.
 */
export async function updateStream(
  db: Q,
  id: string,
  changes: Partial<Omit<StreamRow, 'id' | 'client_id' | 'created_at'>>,
  now = Date.now(),
): Promise<void> {
  await db.updateTable('ssf_streams').set(changes).where('id', '=', id).execute();
  if (changes.delivery_method === undefined) return;
  const push = changes.delivery_method === PUSH;
  await db
    .updateTable('event_deliveries')
    .set({ next_attempt_at: push ? now : null, lease_until: null })
    .where('destination', '=', `stream:${id}`)
    .where('state', '=', 'pending')
    .where('next_attempt_at', push ? 'is' : 'is not', null)
    .execute();
}

/**
 * Records a verification request on the stream unless it recorded one less than `intervalMs` before
 * `at`; true when recorded. One conditional update, so of two requests at once only one passes.
 */
export async function recordVerificationRequest(db: Q, id: string, at: number, intervalMs: number): Promise<boolean> {
  const r = await db
    .updateTable('ssf_streams')
    .set({ verification_requested_at: at })
    .where('id', '=', id)
    .where((eb) =>
      eb.or([eb('verification_requested_at', 'is', null), eb('verification_requested_at', '<=', at - intervalMs)]),
    )
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Removes a stream, its subjects and its undelivered events. */
export async function deleteStream(db: Q, id: string): Promise<void> {
  await db
    .deleteFrom('event_deliveries')
    .where('destination', '=', `stream:${id}`)
    .where('state', '=', 'pending')
    .execute();
  await db.deleteFrom('ssf_stream_subjects').where('stream_id', '=', id).execute();
  await db.deleteFrom('ssf_streams').where('id', '=', id).execute();
}

export async function addStreamSubject(db: Q, streamId: string, sub: string): Promise<void> {
  await db
    .insertInto('ssf_stream_subjects')
    .values({ stream_id: streamId, sub })
    .onConflict((oc) => oc.columns(['stream_id', 'sub']).doNothing())
    .execute();
}

export async function removeStreamSubject(db: Q, streamId: string, sub: string): Promise<void> {
  await db.deleteFrom('ssf_stream_subjects').where('stream_id', '=', streamId).where('sub', '=', sub).execute();
}

/** A poll stream's pending events, oldest first. */
export function pendingForStream(db: Q, streamId: string, limit: number): Promise<DeliveryView[]> {
  return deliveriesWithEvents(db)
    .where('d.destination', '=', `stream:${streamId}`)
    .where('d.state', '=', 'pending')
    .orderBy('d.id')
    .limit(limit)
    .execute();
}

/** Marks a poll stream's deliveries delivered (acknowledged) or dead (refused by the receiver). */
export async function settleStreamDeliveries(
  db: Q,
  streamId: string,
  ids: number[],
  state: 'delivered' | 'dead',
  at: number,
  error: string | null = null,
): Promise<void> {
  for (const chunk of chunks(ids))
    await db
      .updateTable('event_deliveries')
      .set({ state, delivered_at: state === 'delivered' ? at : null, last_attempt_at: at, last_error: error })
      .where('destination', '=', `stream:${streamId}`)
      .where('state', '=', 'pending')
      .where('id', 'in', chunk)
      .execute();
}

/** Organizations whose users a client's streams hear about (its passkey API grants). */
export async function streamOrganizations(db: Q, clientId: string): Promise<number[]> {
  const rows = await db
    .selectFrom('client_orgs')
    .select('org_id')
    .where('client_id', '=', clientId)
    .where('kind', '=', 'admin')
    .execute();
  return rows.map((r) => r.org_id);
}

/** An event for one stream only (a verification event): written with its one delivery. */
export async function insertStreamEvent(
  db: Q,
  stream: Pick<StreamRow, 'id' | 'delivery_method'>,
  e: { at: number; type: string; data: object },
): Promise<void> {
  const { id } = await db
    .insertInto('events')
    .values({ at: e.at, type: e.type, org_id: null, subject: '', data: JSON.stringify(e.data) })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('event_deliveries')
    .values({
      event_id: Number(id),
      destination: `stream:${stream.id}`,
      // about no user: ordered among the stream's other events about no user
      subject: '',
      state: 'pending',
      attempts: 0,
      next_attempt_at: stream.delivery_method === PUSH ? e.at : null,
      created_at: e.at,
    })
    .execute();
}

/** The tables whose ids leave the service (webhook-id, a SET's jti and txn, logout deliveries). */
const OUTBOX_TABLES = ['events', 'event_deliveries', 'logout_deliveries'] as const;

/**
 * After a restore: the next id of each outbox table is above `floor` (and above every id it
 * holds), so no new event is given an id that receivers saw before the restore. `floor` is the
 * restore's time in microseconds (restoreIdFloor): the ids issued before a restore were below it as
 * long as fewer than a million were issued a second since the last restore.
 */
export async function advanceOutboxIds(db: Kysely<DB>, dialect: Dialect, floor: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    for (const table of OUTBOX_TABLES) {
      if (dialect === 'sqlite') {
        // AUTOINCREMENT keeps its counter in sqlite_sequence, one row per table once it had one.
        const { rows } = await sql<{ seq: number }>`select seq from sqlite_sequence where name = ${table}`.execute(trx);
        if (rows.length === 0)
          await sql`insert into sqlite_sequence (name, seq) values (${table}, ${floor})`.execute(trx);
        else await sql`update sqlite_sequence set seq = max(seq, ${floor}) where name = ${table}`.execute(trx);
      } else {
        await sql`select setval(pg_get_serial_sequence(${table}, 'id'), greatest(${floor}::bigint,
                  (select coalesce(max(id), 0) from ${sql.table(table)}),
                  coalesce(pg_sequence_last_value(pg_get_serial_sequence(${table}, 'id')::regclass), 0)))`.execute(trx);
      }
    }
  });
}

/** The floor of advanceOutboxIds for a restore at `now` (ms): microseconds, within 2^53 until the 23rd century. */
export const restoreIdFloor = (now: number) => now * 1000;
