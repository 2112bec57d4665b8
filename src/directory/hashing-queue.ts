// A bound on the password hashing a process does at once. Hashes run on libuv's thread pool, which
// token signing, file access and name lookups share: the queue lets at most `concurrency` hashes
// occupy it (fewer than its threads, so the others stay free for the requests that do not hash) and
// keeps at most `maxWaiting` more in line. A hash beyond that is refused at once with 503 and
// Retry-After, before it waits, instead of piling up behind the others.
import { AppError } from '../errors.ts';

export interface HashingLimits {
  /** hashes running at once */
  concurrency: number;
  /** hashes waiting for one of those places; more are refused */
  maxWaiting: number;
  /** how long one may wait for a place before it is refused as well (unset: as long as it takes) */
  maxWaitMs?: number;
}

export interface HashingQueue {
  /** Runs work when a place is free; throws a 503 AppError when the line is full. */
  run<T>(work: () => Promise<T>): Promise<T>;
  readonly running: number;
  readonly waiting: number;
}

/** Seconds a refused request is asked to wait: the line drains within about that. */
const RETRY_AFTER_SECONDS = '1';

export function busy(): AppError {
  return new AppError(503, 'Too many password checks at once; try again in a moment', {
    'retry-after': RETRY_AFTER_SECONDS,
  });
}

export function createHashingQueue(limits: HashingLimits): HashingQueue {
  let running = 0;
  const line: (() => void)[] = [];
  const release = () => {
    const next = line.shift();
    if (next) next();
    else running -= 1;
  };
  // the place of the one that finishes passes straight to the first in line; one that waited too
  // long leaves the line refused
  const wait = () =>
    new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const enter = () => {
        clearTimeout(timer);
        resolve();
      };
      line.push(enter);
      if (limits.maxWaitMs !== undefined)
        timer = setTimeout(() => {
          const at = line.indexOf(enter);
          if (at >= 0) line.splice(at, 1);
          reject(busy());
        }, limits.maxWaitMs);
    });
  return {
    async run<T>(work: () => Promise<T>): Promise<T> {
      if (running < limits.concurrency) running += 1;
      else if (line.length >= limits.maxWaiting) throw busy();
      else await wait();
      try {
        return await work();
      } finally {
        release();
      }
    },
    get running() {
      return running;
    },
    get waiting() {
      return line.length;
    },
  };
}
