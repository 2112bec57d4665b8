// Benchmark helpers: a service in a child process, the Fastify constant-JSON floor, autocannon runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

export interface LoadResult {
  label: string;
  requestsPerSec: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  total: number;
}

export interface LoadOptions {
  url: string;
  connections: number;
  duration: number; // seconds
  method?: 'GET' | 'POST' | 'DELETE';
  headers?: Record<string, string>;
  body?: string;
  /** several distinct requests, cycled */
  requests?: { method?: string; path?: string; headers?: Record<string, string>; body?: string }[];
}

export async function load(label: string, o: LoadOptions): Promise<LoadResult> {
  const result = await autocannon({
    url: o.url,
    connections: o.connections,
    duration: o.duration,
    method: o.method ?? 'GET',
    headers: o.headers,
    body: o.body,
    requests: o.requests as any,
  });
  return {
    label,
    requestsPerSec: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    total: result.requests.total,
  };
}

/**
 * Fastify returning a constant small JSON: the framework's floor on this machine. It runs in a
 * child process, as the service does, so both compete with the load generator the same way.
 */
export async function startFloor(): Promise<{ url: string; close(): Promise<void> }> {
  const child = spawn(process.execPath, [new URL('./floor-server.ts', import.meta.url).pathname], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d) => resolve(Number(String(d).trim())));
    child.once('exit', () => reject(new Error('floor server exited')));
  });
  return {
    url: `http://127.0.0.1:${port}/floor`,
    close: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export interface Service {
  url: string;
  pid: number;
  child: ChildProcess;
  /** resident set size of the service process in MB */
  rssMb(): number;
  stop(): Promise<void>;
}

/** The Node flags of `npm start` (package.json), so the benchmarks measure the service as it is run. */
export function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
  const match = /^node((?: --[\w-]+(?:=\S+)?)*) src\/main\.ts serve$/.exec(pkg.scripts.start);
  if (!match) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return match[1]!.trim().split(' ').filter(Boolean);
}

/** Starts `node src/main.ts serve` in a child process (the real service) and waits for /readyz. */
export async function startService(env: Record<string, string>, port: number): Promise<Service> {
  const child = spawn(process.execPath, [...startFlags(), 'src/main.ts', 'serve'], {
    env: { ...process.env, LOG_LEVEL: 'warn', PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.ok) break;
    } catch {}
    if (child.exitCode !== null) throw new Error('service exited during start-up');
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    pid: child.pid!,
    child,
    rssMb() {
      try {
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        return Math.round(kb / 1024);
      } catch {
        return 0;
      }
    },
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

export function machine(): string {
  return `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

export function row(cells: (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

export function printLoad(results: LoadResult[], floor?: LoadResult): void {
  console.log(row(['target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', 'ratio to floor']));
  console.log(row(['---', '---', '---', '---', '---', '---', '---']));
  for (const r of results) {
    console.log(row([r.label, r.requestsPerSec, r.p50, r.p99, r.errors, r.non2xx, floor ? (r.requestsPerSec / floor.requestsPerSec).toFixed(2) : '-']));
  }
}
