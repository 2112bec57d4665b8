// Rate limits shared by every instance (fixed windows counted in the database).
import { isIPv4, isIPv6 } from 'node:net';
import type { Store } from '../store/index.ts';
import * as counters from '../store/rate-limits.ts';
import { tooManyRequests } from '../errors.ts';

export interface RateLimit {
  /** counts one event for key; throws 429 (with Retry-After) once over the limit */
  consume(key: string): Promise<void>;
  /** true when key is already over the limit, without counting */
  exceeded(key: string): Promise<boolean>;
  /** takes back one event counted by consume in the current window (e.g. an attempt that succeeded) */
  refund(key: string): Promise<void>;
  reset(key: string): Promise<void>;
}

/** The eight 16-bit groups of an IPv6 address (no zone), or undefined. */
function ipv6Groups(address: string): number[] | undefined {
  // A trailing dotted quad (::ffff:192.0.2.1) stands for the last two groups.
  const text = address.replace(
    /(\d+)\.(\d+)\.(\d+)\.(\d+)$/,
    (_m, a, b, c, d) => `${((+a << 8) | +b).toString(16)}:${((+c << 8) | +d).toString(16)}`,
  );
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const left = parse(halves[0]!);
  const right = halves.length === 2 ? parse(halves[1]!) : [];
  const groups =
    halves.length === 2 ? [...left, ...new Array(Math.max(0, 8 - left.length - right.length)).fill(0), ...right] : left;
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

/**
 * The key a per-IP limit counts under: an IPv4 address as is (also when written IPv4-mapped,
 * ::ffff:a.b.c.d), an IPv6 address by its /64 — one subscriber usually holds a whole /64, so
 * counting single addresses would give each of them a fresh budget.
 */
export function clientKey(ip: string): string {
  const address = ip.trim().toLowerCase().replace(/%.*$/, '');
  if (isIPv4(address)) return address;
  if (!isIPv6(address)) return address;
  const groups = ipv6Groups(address);
  if (!groups) return address;
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
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
      if ((await used(key, w.start, count)) > limit)
        throw tooManyRequests('Too many requests; try again later', w.retryAfter);
    },
    async exceeded(key) {
      return (await used(key, windowOf().start)) >= limit;
    },
    async refund(key) {
      // Never more refunds than events, so successes cannot bank credit for later failures.
      const start = windowOf().start;
      if ((await used(key, start)) > 0) await counters.hit(store.db, `${refunds}:${key}`, start);
    },
    reset: async (key) => {
      await counters.reset(store.db, `${name}:${key}`);
      await counters.reset(store.db, `${refunds}:${key}`);
    },
  };
}
