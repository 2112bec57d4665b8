// bcrypt, the one scheme node:crypto does not have, computed by bcryptjs in worker threads: a
// check of an imported bcrypt hash (a quarter of a second at cost 12) never runs on the event loop.
// The pool has as many workers as the hashing queue lets hashes run at once (hashing-queue.ts), so
// the queue's bound is the bound on bcrypt too; workers start on first use, keep the process alive
// only while they compute, and one that dies is replaced, failing only the hash it was computing.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

// CommonJS, evaluated in the worker: bcryptjs is loaded from the path the main thread resolved (the
// production install's node_modules, or the checkout's), so the bundle needs no file of its own.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcryptjs);
parentPort.on('message', (m) => {
  let answer;
  try {
    answer = { id: m.id, hash: bcrypt.hashSync(m.password, m.salt) };
  } catch (err) {
    answer = { id: m.id, error: String((err && err.message) || err) };
  }
  parentPort.postMessage(answer);
});
`;

interface Job {
  id: number;
  password: string;
  salt: string;
  resolve(hash: string): void;
  reject(err: Error): void;
}

interface PoolWorker {
  worker: Worker;
  job: Job | undefined;
}

let bcryptjsPath: string | undefined;
let size = 2;
const workers: PoolWorker[] = [];
const waiting: Job[] = [];
let nextId = 1;

/** Sets how many workers may compute at once (the hashing queue's concurrency). */
export function sizeBcryptPool(n: number): void {
  size = Math.max(1, n);
  // workers beyond the new size leave once idle
  for (const w of workers.filter((w) => !w.job).slice(0, Math.max(0, workers.length - size))) retire(w);
}

function retire(w: PoolWorker): void {
  workers.splice(workers.indexOf(w), 1);
  void w.worker.terminate();
}

function start(): PoolWorker {
  bcryptjsPath ??= createRequire(import.meta.url).resolve('bcryptjs');
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { bcryptjs: bcryptjsPath } });
  const w: PoolWorker = { worker, job: undefined };
  worker.on('message', (m: { id: number; hash?: string; error?: string }) => {
    const job = w.job;
    w.job = undefined;
    worker.unref();
    if (job && job.id === m.id) {
      if (m.hash !== undefined) job.resolve(m.hash);
      else job.reject(new Error(`bcrypt: ${m.error ?? 'failed'}`));
    }
    dispatch();
  });
  const lost = (err: Error) => {
    if (!workers.includes(w)) return;
    workers.splice(workers.indexOf(w), 1);
    w.job?.reject(err);
    w.job = undefined;
    dispatch();
  };
  worker.on('error', lost);
  worker.on('exit', (code) => lost(new Error(`bcrypt worker exited (${code})`)));
  // after the listeners (adding a 'message' listener refs the worker again); held while computing
  worker.unref();
  workers.push(w);
  return w;
}

function dispatch(): void {
  while (waiting.length > 0) {
    const idle = workers.find((w) => !w.job) ?? (workers.length < size ? start() : undefined);
    if (!idle) return;
    const job = waiting.shift()!;
    idle.job = job;
    idle.worker.ref();
    idle.worker.postMessage({ id: job.id, password: job.password, salt: job.salt });
  }
  // more workers than the pool's size (after it shrank): the idle ones leave
  for (const w of workers.filter((w) => !w.job).slice(0, Math.max(0, workers.length - size))) retire(w);
}

/** bcrypt of the password with the salt (`$2b$12$` and 22 characters), computed in a worker. */
export function bcryptHash(password: string, salt: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    waiting.push({ id: nextId++, password, salt, resolve, reject });
    dispatch();
  });
}

/** Workers running now, for tests. */
export const bcryptWorkers = (): number => workers.length;
