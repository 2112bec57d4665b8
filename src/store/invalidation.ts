// Cache invalidation, for caches that are never stale instead of caches that expire. A change that
// a cache must drop publishes (topic, key) in the change's own transaction: a row in the
// invalidations table. Delivery:
// - in the process that made the change, at once: the store sees its own publishing statement run
//   (openStore's query hook) and hands it to the subscribers before the statement returns;
// - to every process, after commit: on PostgreSQL a trigger on the table sends the row as a NOTIFY
//   to a dedicated LISTEN connection (a rolled-back change notifies nothing); on SQLite each process
//   polls the table (`where id > last`, indexed) every POLL_MS.
// If the PostgreSQL listening connection drops, the receiver polls the table through the pool every
// POLL_MS (with a window reaching back FALLBACK_WINDOW_MS before the last moment it knew it was
// listening) and reconnects with backoff; once listening again it reads the table once more and
// stops polling. Rows are pruned after RETENTION_MS; a receiver that could not read the table for
// longer than that delivers `null`: drop everything.
import type pg from 'pg';
import { sql, type Kysely, type Transaction } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export type Topic = 'client' | 'user' | 'grant' | 'token' | 'organization' | 'service-provider';

export interface Invalidation {
  topic: Topic;
  key: string;
}

/** Called with what to drop; null means everything (some invalidations may have been missed). */
export type InvalidationListener = (invalidation: Invalidation | null) => void;

export const CHANNEL = 'idp_invalidations';
export const POLL_MS = 200;
export const RETENTION_MS = 60_000;
/** How far back a PostgreSQL poll reads: ids are given at insert, not at commit, so order is not enough. */
const FALLBACK_WINDOW_MS = 10_000;
const PRUNE_EVERY_MS = 10_000;
const HEARTBEAT_MS = 5_000;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5_000;

const TOPICS = new Set<string>(['client', 'user', 'grant', 'token', 'organization', 'service-provider']);
const PUBLISH_SQL = 'insert into invalidations (topic, key, at) values';

/** Publishes an invalidation; inside a transaction it takes effect for other processes at commit. */
export async function publish(q: Q, topic: Topic, key: string, now = Date.now()): Promise<void> {
  await sql`insert into invalidations (topic, key, at) values (${topic}, ${key}, ${now})`.execute(q);
}

/**
 * Publishes one invalidation per key, many rows per statement (bulk changes such as an import).
 * Other processes receive each key; this process drops everything (see publishedBy).
 */
export async function publishAll(q: Q, topic: Topic, keys: string[], now = Date.now()): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) {
    const rows = keys.slice(i, i + 1000).map((key) => sql`(${topic}, ${key}, ${now})`);
    await sql`insert into invalidations (topic, key, at) values ${sql.join(rows)}`.execute(q);
  }
}

/**
 * The invalidation a statement that ran published, if it is publish()'s statement; null (drop
 * everything) for publishAll()'s statements of several rows.
 */
export function publishedBy(statement: string, parameters: readonly unknown[]): Invalidation | null | undefined {
  if (!statement.startsWith(PUBLISH_SQL)) return undefined;
  if (parameters.length > 3) return null;
  const [topic, key] = parameters;
  return typeof topic === 'string' && TOPICS.has(topic) && typeof key === 'string'
    ? { topic: topic as Topic, key }
    : undefined;
}

export type ReceiverMode = 'local' | 'listening' | 'polling';

/** The subscribers of one store. */
export class Invalidations {
  #listeners = new Set<InvalidationListener>();
  #sequence = 0;
  /** local: nothing is received from other processes (no receiver runs); polling: SQLite, or PostgreSQL without its listener */
  mode: ReceiverMode = 'local';

  subscribe(listener: InvalidationListener): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** Grows with every delivery: a cache that computed an entry while it changed must not keep the entry. */
  get sequence(): number {
    return this.#sequence;
  }

  deliver(invalidation: Invalidation | null): void {
    this.#sequence++;
    for (const listener of this.#listeners) listener(invalidation);
  }
}

/** Without invalidations (a store that receives none), a kept lookup's entries live only this long. */
const UNINVALIDATED_KEEP_MS = 1000;

export interface KeptLookupOptions<V> {
  /** the topic whose invalidation of a key drops that key's entry */
  topic: Topic;
  /** the most entries kept; the least recently used goes first */
  max: number;
  /** the longest an entry is kept: only a safety net for an invalidation lost on its way */
  keepMs: number;
  /** finds a key's value; undefined (unknown) is not kept, so what senders choose cannot fill memory */
  load: (key: string) => Promise<V | undefined>;
  /** when a value stops holding by itself (ms since the epoch), if it may be before keepMs is up */
  until?: (value: V) => number;
}

/**
 * Lookups kept until what they read changes: every change to it publishes an invalidation of
 * (topic, key) in its transaction, which drops the entry at once in the process that made it and
 * within a fraction of a second in every other. Concurrent lookups of one key share the load in
 * flight; a value loaded while any invalidation arrived is handed to its callers but not kept.
 */
export function keptLookup<V>(
  invalidations: Invalidations | undefined,
  options: KeptLookupOptions<V>,
): (key: string) => Promise<V | undefined> {
  const { topic, max, keepMs, load, until } = options;
  const ttl = invalidations ? keepMs : UNINVALIDATED_KEEP_MS;
  const cache = new LRUCache<string, Promise<V | undefined>>({ max, ttl });
  invalidations?.subscribe((invalidation) => {
    if (invalidation === null) cache.clear();
    else if (invalidation.topic === topic) cache.delete(invalidation.key);
  });
  return (key) => {
    const hit = cache.get(key);
    if (hit) return hit;
    const sequence = invalidations?.sequence;
    const loading = load(key);
    cache.set(key, loading);
    const forget = () => {
      if (cache.peek(key) === loading) cache.delete(key);
    };
    loading.then((found) => {
      if (found === undefined || invalidations?.sequence !== sequence) return forget();
      const left = until ? until(found) - Date.now() : Infinity;
      if (left < ttl && cache.peek(key) === loading) cache.set(key, loading, { ttl: Math.max(left, 1) });
    }, forget);
    return loading;
  };
}

interface Row {
  id: number | string;
  topic: string;
  key: string;
  at: number | string;
}

function asInvalidation(row: { topic: unknown; key: unknown }): Invalidation | undefined {
  return typeof row.topic === 'string' && TOPICS.has(row.topic) && typeof row.key === 'string'
    ? { topic: row.topic as Topic, key: row.key }
    : undefined;
}

export interface Receiver {
  stop(): Promise<void>;
}

export interface ReceiverOptions {
  db: Kysely<DB>;
  bus: Invalidations;
  /** PostgreSQL: opens the listening connection; absent on SQLite */
  connect?: () => pg.Client;
  onError?: (err: unknown) => void;
}

async function prune(db: Kysely<DB>, now: number): Promise<void> {
  await sql`delete from invalidations where at < ${now - RETENTION_MS}`.execute(db);
}

/** SQLite: polls the table for rows after the last one seen (ids are given in commit order there). */
async function sqliteReceiver({ db, bus, onError }: ReceiverOptions): Promise<Receiver> {
  const { rows } = await sql<{ last: number | null }>`select max(id) as last from invalidations`.execute(db);
  let last = Number(rows[0]?.last ?? 0);
  let readAt = Date.now();
  let prunedAt = 0;
  let busy = false;
  let failing = false;
  const poll = async () => {
    if (busy) return;
    busy = true;
    const now = Date.now();
    try {
      if (now - readAt > RETENTION_MS / 2) bus.deliver(null);
      const found = await sql<Row>`select id, topic, key from invalidations where id > ${last} order by id`.execute(db);
      for (const row of found.rows) {
        last = Number(row.id);
        const invalidation = asInvalidation(row);
        if (invalidation) bus.deliver(invalidation);
      }
      readAt = now;
      failing = false;
      if (now - prunedAt > PRUNE_EVERY_MS) {
        prunedAt = now;
        await prune(db, now);
      }
    } catch (err) {
      // reported once per run of failures, not every POLL_MS
      if (!failing) onError?.(err);
      failing = true;
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void poll(), POLL_MS);
  timer.unref();
  bus.mode = 'polling';
  return {
    async stop() {
      clearInterval(timer);
      bus.mode = 'local';
    },
  };
}

/** PostgreSQL: LISTEN on a dedicated connection; while it is down, polling through the pool. */
class PgReceiver implements Receiver {
  #o: ReceiverOptions & { connect: () => pg.Client };
  #client: pg.Client | undefined;
  #stopped = false;
  /** ids delivered recently (id -> when), so a poll delivers each row once */
  #seen = new Map<number, number>();
  /** the last moment the listener was known to be connected */
  #healthyAt = Date.now();
  #pollSince = 0;
  #pollTimer: NodeJS.Timeout | undefined;
  #reconnectTimer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout;
  #backoff = RECONNECT_MIN_MS;
  #prunedAt = 0;
  #polling = false;
  #pollFailing = false;

  constructor(options: ReceiverOptions & { connect: () => pg.Client }) {
    this.#o = options;
    this.#heartbeat = setInterval(() => void this.#beat(), HEARTBEAT_MS);
    this.#heartbeat.unref();
  }

  async start(): Promise<void> {
    await this.#connect();
  }

  #deliverRow(row: { id: unknown; topic: unknown; key: unknown }): void {
    const id = Number(row.id);
    if (this.#seen.has(id)) return;
    this.#seen.set(id, Date.now());
    const invalidation = asInvalidation(row);
    if (invalidation) this.#o.bus.deliver(invalidation);
  }

  #notified(payload: string | undefined): void {
    this.#healthyAt = Date.now();
    try {
      this.#deliverRow(JSON.parse(payload ?? '') as { id: unknown; topic: unknown; key: unknown });
    } catch (err) {
      this.#o.onError?.(err);
    }
  }

  async #connect(): Promise<void> {
    const client = this.#o.connect();
    client.on('error', () => this.#lost(client));
    client.on('end', () => this.#lost(client));
    client.on('notification', (msg) => {
      if (msg.channel === CHANNEL) this.#notified(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      this.#o.onError?.(err);
      client.end().catch(() => {});
      this.#startPolling();
      this.#scheduleReconnect();
      return;
    }
    if (this.#stopped) return void client.end().catch(() => {});
    this.#client = client;
    this.#backoff = RECONNECT_MIN_MS;
    this.#o.bus.mode = 'listening';
    // What was published while nobody listened (a no-op on the first connection: nothing is cached yet).
    if (this.#pollTimer) {
      clearInterval(this.#pollTimer);
      this.#pollTimer = undefined;
      await this.#poll();
    }
    this.#healthyAt = Date.now();
  }

  #lost(client: pg.Client): void {
    if (client !== this.#client || this.#stopped) return;
    this.#client = undefined;
    client.end().catch(() => {});
    this.#startPolling();
    this.#scheduleReconnect();
  }

  #startPolling(): void {
    this.#o.bus.mode = 'polling';
    if (this.#pollTimer || this.#stopped) return;
    this.#pollSince = this.#healthyAt - FALLBACK_WINDOW_MS;
    this.#pollTimer = setInterval(() => void this.#poll(), POLL_MS);
    this.#pollTimer.unref();
    void this.#poll();
  }

  #scheduleReconnect(): void {
    if (this.#reconnectTimer || this.#stopped) return;
    const delay = this.#backoff;
    this.#backoff = Math.min(this.#backoff * 2, RECONNECT_MAX_MS);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      if (!this.#stopped) void this.#connect();
    }, delay);
    this.#reconnectTimer.unref();
  }

  async #poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    const started = Date.now();
    try {
      const { rows } =
        await sql<Row>`select id, topic, key from invalidations where at > ${this.#pollSince} order by id`.execute(
          this.#o.db,
        );
      for (const row of rows) this.#deliverRow(row);
      this.#pollSince = started - FALLBACK_WINDOW_MS;
      this.#pollFailing = false;
    } catch (err) {
      // reported once per run of failures, not every POLL_MS
      if (!this.#pollFailing) this.#o.onError?.(err);
      this.#pollFailing = true;
      if (started - this.#pollSince > RETENTION_MS) this.#o.bus.deliver(null);
    } finally {
      this.#polling = false;
    }
  }

  /** Checks the listener answers (a connection lost without a word is found here), forgets old ids, prunes. */
  async #beat(): Promise<void> {
    const now = Date.now();
    for (const [id, at] of this.#seen) if (now - at > RETENTION_MS * 2) this.#seen.delete(id);
    const client = this.#client;
    if (client) {
      try {
        await client.query('select 1');
        this.#healthyAt = now;
      } catch {
        this.#lost(client);
      }
    }
    if (now - this.#prunedAt > PRUNE_EVERY_MS) {
      this.#prunedAt = now;
      await prune(this.#o.db, now).catch((err) => this.#o.onError?.(err));
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#heartbeat);
    clearInterval(this.#pollTimer);
    clearTimeout(this.#reconnectTimer);
    const client = this.#client;
    this.#client = undefined;
    this.#o.bus.mode = 'local';
    if (client) await client.end().catch(() => {});
  }
}

/** Starts receiving the invalidations other processes publish. */
export async function startReceiver(options: ReceiverOptions): Promise<Receiver> {
  if (!options.connect) return sqliteReceiver(options);
  const receiver = new PgReceiver({ ...options, connect: options.connect });
  await receiver.start();
  return receiver;
}
