// Rate limits shared by every instance (fixed windows counted in the database).
import ipaddr from 'ipaddr.js';
import type { Store } from '../store/index.ts';
import * as counters from '../store/rate-limits.ts';
import { tooManyRequests } from '../errors.ts';
import { countRateLimited } from './metrics.ts';

export interface RateLimit {
  /** counts one event for key; throws 429 (with Retry-After) once over the limit */
  consume(key: string): Promise<void>;
  /** true when key is already over the limit, without counting */
  exceeded(key: string): Promise<boolean>;
  /** takes back one event counted by consume in the current window (e.g. an attempt that succeeded) */
  refund(key: string): Promise<void>;
  reset(key: string): Promise<void>;
}

/**
 * The key a per-IP limit counts under: an IPv4 address as is (also when written IPv4-mapped,
 * ::ffff:a.b.c.d), an IPv6 address by its /64 — one subscriber usually holds a whole /64, so
 * counting single addresses would give each of them a fresh budget.
 */
export function clientKey(ip: string): string {
  const address = ip.trim().toLowerCase().replace(/%.*$/, '');
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address); // IPv4-mapped IPv6 becomes IPv4
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const prefix = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((g) => g.toString(16));
  return `${prefix.join(':')}::/64`;
}

export function rateLimit(
  store: Store,
  name: string,
  limit: number,
  windowMs: number,
  now: () => number = Date.now,
): RateLimit {
  const windowOf = () => {
    const t = now();
    return { start: t - (t % windowMs), retryAfter: (windowMs - (t % windowMs)) / 1000 };
  };
  // Refunds are counted apart from events, so counting and refunding are each one atomic
  // upsert; what a key has used is events minus refunds in the same window.
  const refunds = `${name}-refund`;
  const used = async (key: string, start: number, counted?: number) => {
    const events = counted ?? (await counters.peek(store.db, `${name}:${key}`, start));
    return events - (await counters.peek(store.db, `${refunds}:${key}`, start));
  };
  return {
    async consume(key) {
      const w = windowOf();
      const count = await counters.hit(store.db, `${name}:${key}`, w.start);
      if (count <= limit) return;
      if ((await used(key, w.start, count)) <= limit) return;
      countRateLimited(name);
      throw tooManyRequests('Too many requests; try again later', w.retryAfter);
    },
    async exceeded(key) {
      return (await used(key, windowOf().start)) >= limit;
    },
    async refund(key) {
      // Never more refunds than events, so successes cannot bank credit for later failures.
      await counters.refund(store.db, `${name}:${key}`, `${refunds}:${key}`, windowOf().start);
    },
    reset: async (key) => {
      await counters.reset(store.db, `${name}:${key}`);
      await counters.reset(store.db, `${refunds}:${key}`);
    },
  };
}
