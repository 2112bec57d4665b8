// Rate limits shared by every instance (fixed windows counted in the database).
import type { Store } from '../store/index.ts';
import * as counters from '../store/rate-limits.ts';
import { tooManyRequests } from '../errors.ts';

export interface RateLimit {
  /** counts one event for key; throws 429 (with Retry-After) once over the limit */
  consume(key: string): Promise<void>;
  /** true when key is already over the limit, without counting */
  exceeded(key: string): Promise<boolean>;
  reset(key: string): Promise<void>;
}

export function rateLimit(store: Store, name: string, limit: number, windowMs: number, now: () => number = Date.now): RateLimit {
  const windowOf = () => {
    const t = now();
    return { start: t - (t % windowMs), retryAfter: (windowMs - (t % windowMs)) / 1000 };
  };
  return {
    async consume(key) {
      const w = windowOf();
      const count = await counters.hit(store.db, `${name}:${key}`, w.start);
      if (count > limit) throw tooManyRequests('Too many requests; try again later', w.retryAfter);
    },
    async exceeded(key) {
      return (await counters.peek(store.db, `${name}:${key}`, windowOf().start)) >= limit;
    },
    reset: (key) => counters.reset(store.db, `${name}:${key}`),
  };
}
