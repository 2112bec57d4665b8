// Memory given back when the service is idle. V8 keeps the young generation at the size the last
// busy period grew it to (two semi-spaces of up to --max-semi-space-size each) and keeps freed
// old-generation pages for reuse; its own memory reducer does not shrink them while the process
// only waits. Start-up (loading and compiling every module) and a burst of requests leave tens of
// megabytes resident that a quiet service does not need. So: one full collection that reduces the
// heap's footprint (V8's "last resort" collection: pages released; the young generation stays at
// npm start's --min-semi-space-size, since shrinking it slowed the next burst)
// shortly after start-up (src/command-line.ts), and then whenever the service has served no request
// for a whole idle interval after a busy one that grew the resident set by RELEASE_AFTER_GROWTH_MB
// or more. The collection takes some tens of milliseconds (about 80 ms after start-up here); after a
// busy period it runs only when no request came for the interval.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How much the resident set must have grown since the last release for an idle period to release. */
export const RELEASE_AFTER_GROWTH_MB = 16;

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * V8's gc(): the one Node exposes with --expose-gc, or obtained from a fresh context created while
 * the flag is on (the flag is put back at once, so no other context gets it).
 */
function collector(): Collect {
  const exposed = (globalThis as { gc?: Collect }).gc;
  if (typeof exposed === 'function') return exposed;
  setFlagsFromString('--expose-gc');
  try {
    return runInNewContext('gc') as Collect;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}

export interface MemoryReleaseEvent {
  beforeMb: number;
  afterMb: number;
  ms: number;
}

export interface MemoryRelease {
  /** call once per request */
  served: () => void;
  /** releases now (after start-up) */
  releaseNow: () => MemoryReleaseEvent;
  stop: () => void;
}

const mb = (bytes: number) => Math.round(bytes / 2 ** 20);

/**
 * Releases memory after each busy period: a timer every idleMs (not keeping the process alive)
 * checks whether a request came since its last tick. idleMs 0: never (releaseNow still works).
 */
export function memoryRelease(idleMs: number, onRelease: (event: MemoryReleaseEvent) => void): MemoryRelease {
  let collect: Collect | undefined;
  let requests = 0;
  let seen = 0;
  let releasedAtRss = process.memoryUsage.rss();
  const releaseNow = (): MemoryReleaseEvent => {
    const before = process.memoryUsage.rss();
    const started = performance.now();
    collect ??= collector();
    collect({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    releasedAtRss = process.memoryUsage.rss();
    const event = { beforeMb: mb(before), afterMb: mb(releasedAtRss), ms: Math.round(performance.now() - started) };
    onRelease(event);
    return event;
  };
  const timer =
    idleMs > 0
      ? setInterval(() => {
          if (requests !== seen) {
            seen = requests; // busy during this interval: wait for one without requests
            return;
          }
          if (process.memoryUsage.rss() - releasedAtRss >= RELEASE_AFTER_GROWTH_MB * 2 ** 20) releaseNow();
        }, idleMs).unref()
      : undefined;
  return {
    served: () => void requests++,
    releaseNow,
    stop: () => clearInterval(timer),
  };
}
