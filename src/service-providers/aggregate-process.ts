// Verifying a large aggregate in a child process of its own. A federation aggregate is tens of
// megabytes (eduGAIN's 50-100 MB) and its DOM, the signature library's own parse and the
// re-parsed verified copy take about 40 times that in heap: far above the 256 MiB `npm start`
// gives the service. The child gets a heap sized for the document, and whatever happens to it
// (out of memory, a crash, a timeout) is a failed refresh, never the service going down. Small
// documents (MDQ answers, test aggregates) are verified in-process.
import { fork } from 'node:child_process';
import { AppError } from '../errors.ts';
import { verifyAggregate, type AggregateOptions, type VerifiedAggregate } from '../saml/metadata/index.ts';

/** Documents up to this size are verified in-process. */
export const ISOLATE_ABOVE_BYTES = 2 * 1024 * 1024;
const TIMEOUT_MS = 10 * 60_000;

/**
 * Heap for the child: 100 times the document, at least 768 MiB. Measured: a 9.4 MiB aggregate of
 * 5,000 SPs used about 370 MB of heap; a tighter limit only makes the collector work harder.
 */
export function childHeapMb(bytes: number): number {
  return Math.max(768, Math.ceil((bytes / (1024 * 1024)) * 100));
}

export interface ChildRequest {
  body: Uint8Array;
  options: AggregateOptions;
}

export type ChildAnswer =
  { ok: true; aggregate: VerifiedAggregate } | { ok: false; status: number; message: string; reason?: string };

// The child's entry point: TypeScript beside this file when run from the sources, the bundle's
// aggregate-worker.js beside the chunk this is bundled into otherwise (scripts/build.ts).
const WORKER = import.meta.url.endsWith('.ts')
  ? new URL('./aggregate-worker.ts', import.meta.url)
  : new URL('./aggregate-worker.js', import.meta.url);

/** verifyAggregate, in a child process for a document above `isolateAbove` bytes. */
export async function verifyAggregateIsolated(
  body: Uint8Array,
  options: AggregateOptions,
  isolateAbove = ISOLATE_ABOVE_BYTES,
): Promise<VerifiedAggregate> {
  if (body.byteLength <= isolateAbove) return verifyAggregate(body, options);
  const answer = await runChild({ body, options }, childHeapMb(body.byteLength));
  if (answer.ok) return answer.aggregate;
  throw new AppError(answer.status, answer.message);
}

function runChild(request: ChildRequest, heapMb: number): Promise<ChildAnswer> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [], {
      execArgv: [`--max-old-space-size=${heapMb}`],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    });
    let answered = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
    child.once('message', (message) => {
      answered = true;
      resolve(message as ChildAnswer);
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      if (!answered) reject(new AppError(502, `the aggregate could not be verified: ${err.message}`));
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (answered) return;
      const why = signal === 'SIGKILL' ? 'took too long' : `stopped (${signal ?? `exit code ${code}`}), out of memory?`;
      reject(new AppError(502, `verifying the aggregate ${why}`));
    });
    child.send(request);
  });
}
