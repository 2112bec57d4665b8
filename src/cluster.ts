// WORKERS=n: the primary process prepares what must happen once (settings, the secret, migrations),
// then runs n copies of the service on the one port (node:cluster hands connections to them),
// replaces a copy that dies, and on SIGTERM or SIGINT lets each finish its requests and stop.
// Every copy keeps its own caches, kept current across processes by cache invalidation like
// separate instances (src/store/invalidation.ts).
import cluster, { type Worker } from 'node:cluster';
import { serveClusterMetrics } from './http/metrics.ts';

const LEVELS = { info: 30, warn: 40, error: 50 } as const;
/** pino's level numbers, for LOG_LEVEL */
const THRESHOLDS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };
let threshold = LEVELS.info as number;

/** A start-up message for the operator, logged once. */
export interface Notice {
  level: 'info' | 'warn';
  fields: Record<string, unknown>;
  msg: string;
}

/** One log line in the shape the workers' logger (pino) writes. */
function log(level: keyof typeof LEVELS, fields: Record<string, unknown>, msg: string): void {
  if (LEVELS[level] < threshold) return;
  process.stdout.write(
    `${JSON.stringify({ level: LEVELS[level], time: Date.now(), pid: process.pid, role: 'primary', ...fields, msg })}\n`,
  );
}

/** Restart delays after a worker dies: quickly at first, slower while they keep dying. */
const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A worker that served this long before dying resets the delay. */
const STABLE_MS = 30_000;
/** How long a stop waits for workers to finish before killing them. */
const STOP_TIMEOUT_MS = 30_000;

export function runPrimary(count: number, logLevel: string, notices: Notice[]): void {
  threshold = THRESHOLDS[logLevel] ?? Number.POSITIVE_INFINITY; // silent
  let stopping = false;
  let listening = 0;
  let delay = RESTART_MIN_MS;
  const started = new Map<Worker, number>();

  const fork = (): Worker => {
    const worker = cluster.fork();
    started.set(worker, Date.now());
    return worker;
  };

  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (started.get(worker) ?? Date.now());
    started.delete(worker);
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        log('info', {}, 'all workers stopped');
        process.exit(0);
      }
      return;
    }
    // The first worker could not start (its error is on stderr): the next would fail the same way.
    if (listening === 0) {
      log('error', { worker: worker.id, code, signal }, 'the first worker failed to start; stopping');
      process.exit(code || 1);
    }
    if (lived > STABLE_MS) delay = RESTART_MIN_MS;
    log(
      'error',
      { worker: worker.id, workerPid: worker.process.pid, code, signal, restartInMs: delay },
      'worker died; starting another',
    );
    setTimeout(() => {
      if (!stopping) fork();
    }, delay).unref();
    delay = Math.min(delay * 2, RESTART_MAX_MS);
  });

  cluster.on('listening', () => {
    listening++;
    // The first worker did the first-start work (signing keys); the others start once it is up.
    if (listening === 1) for (let i = 1; i < count; i++) fork();
    if (listening === count) log('info', { workers: count }, 'all workers listening');
  });

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);
    log('info', { signal, workers: workers.length }, 'stopping the workers: each finishes its in-flight requests');
    if (workers.length === 0) process.exit(0);
    for (const worker of workers) worker.process.kill('SIGTERM');
    setTimeout(() => {
      log('warn', {}, 'workers still running after the stop timeout; killing them');
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  serveClusterMetrics();
  for (const notice of notices) log(notice.level, notice.fields, notice.msg);
  log('info', { workers: count }, 'starting workers');
  fork();
}
