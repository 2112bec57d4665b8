// Benchmark helpers: a service in a child process, the Fastify constant-JSON floor, autocannon runs.
import { connect } from 'node:net';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import pg from 'pg';
import autocannon from 'autocannon';

/** The IDP_SECRET of every benchmark database and service. */
/** Runs an admin command against a benchmark database; its standard output, or an error with its message. */
export async function cli(databaseUrl: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  const { runCli } = await import('../src/cli/index.ts');
  let out = '';
  let err = '';
  const code = await runCli(
    args,
    { out: (l) => (out += l), err: (l) => (err += l), readStdin: async () => '' },
    { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, LOG_LEVEL: 'silent', ...env },
  );
  if (code !== 0) throw new Error(err);
  return out;
}

export const SECRET = 'bench-secret-0123456789-abcdefghijklmnopqrstuv';

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

export interface ChildServer {
  url: string;
  pid: number;
  close(): Promise<void>;
}

/** A benchmark server script run as its own process (with these Node flags), which prints its port on stdout. */
async function startChild(script: string, path: string, flags: string[] = []): Promise<ChildServer> {
  const child = spawn(process.execPath, [...flags, new URL(script, import.meta.url).pathname], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    child.once('exit', () => reject(new Error(`${script} exited`)));
  });
  return {
    url: `http://127.0.0.1:${port}${path}`,
    pid: child.pid!,
    close: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * Fastify returning a constant small JSON: the framework's floor on this machine. It runs in a
 * child process, as the service does, so both compete with the load generator the same way.
 */
export function startFloor(): Promise<ChildServer> {
  return startChild('./floor-server.ts', '/floor');
}

/**
 * The stock oidc-provider of bench/peer-server.ts; the url is its token endpoint. With Node's
 * defaults, or with the given Node flags (those of `npm start`, to see what they cost the library).
 */
export function startPeer(flags: string[] = []): Promise<ChildServer> {
  return startChild('./peer-server.ts', '/oauth/token', flags);
}

export interface Service {
  url: string;
  pid: number;
  child: ChildProcess;
  /** milliseconds from spawning the process to the first 200 from /readyz (polled every 10 ms) */
  readyMs: number;
  /** resident set size of the service process in MB */
  rssMb(): number;
  stop(): Promise<void>;
}

/** The Node flags of `npm start` (package.json), so the benchmarks measure the service as it is run. */
export function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  };
  const match = /^node((?: --[\w-]+(?:=\S+)?)*) (?:dist\/)?src\/main\.[jt]s serve$/.exec(pkg.scripts.start);
  if (!match) throw new Error(`unexpected start script: ${pkg.scripts.start}`);
  return match[1]!.trim().split(' ').filter(Boolean);
}

/** The environment of a benchmarked service on a loopback port: `env` on top of this process's. */
function serviceEnv(env: Record<string, string>, port: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    LOG_LEVEL: 'warn',
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    ...env,
  };
}

/** Polls /readyz every 10 ms until it answers 200; throws if the process exits or 30 s pass. */
async function untilReady(child: ChildProcess, url: string, started: number): Promise<void> {
  for (;;) {
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false, // not listening yet
    );
    if (ready) return;
    if (child.exitCode !== null) throw new Error('the service exited during start-up');
    if (performance.now() - started > 30_000) throw new Error('the service was not ready within 30 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Throws when something already listens on the port: the readiness check would otherwise take
 * that server (another benchmark's service, say) for the one just started, and measure it.
 */
export async function assertPortFree(port: number): Promise<void> {
  const taken = await new Promise<boolean>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
  if (taken) throw new Error(`port ${port} is in use by another process (another benchmark?): stop it first`);
}

/**
 * Starts the compiled service as `npm start` does (`node <flags> dist/src/main.js serve`, built by
 * `npm run bench` before it runs; other Node flags when given: flags on the command line win over
 * NODE_OPTIONS) in a child process, and waits for /readyz.
 */
export async function startService(
  env: Record<string, string>,
  port: number,
  flags: string[] = startFlags(),
): Promise<Service> {
  await assertPortFree(port);
  const started = performance.now();
  const child = spawn(process.execPath, [...flags, 'dist/src/main.js', 'serve'], {
    env: serviceEnv(env, port),
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await untilReady(child, url, started);
  } catch (err) {
    child.kill();
    throw err;
  }
  return {
    url,
    pid: child.pid!,
    child,
    readyMs: Math.round(performance.now() - started),
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

/**
 * Milliseconds from spawning `npm start` (in the project directory: the compiled service with the
 * flags of package.json) to the first 200 from /readyz, polled every 10 ms; the service is stopped
 * (SIGTERM to npm's process group) before the next start. The first start is not counted: after
 * `npm run bench` rebuilt the service, it fills Node's compile cache.
 */
export async function npmStartReadyMs(env: Record<string, string>, port: number, runs: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i <= runs; i++) {
    await assertPortFree(port);
    const started = performance.now();
    const child = spawn('npm', ['start'], {
      env: serviceEnv(env, port),
      stdio: ['ignore', 'ignore', 'inherit'],
      detached: true,
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await untilReady(child, `http://127.0.0.1:${port}`, started);
      if (i > 0) times.push(Math.round(performance.now() - started));
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
      await exited;
      // npm may exit before the service it started has closed its port
      while (
        await fetch(`http://127.0.0.1:${port}/healthz`).then(
          () => true,
          () => false,
        )
      )
        await new Promise((r) => setTimeout(r, 20));
    }
  }
  return times;
}

/** Linux's USER_HZ: the unit of the CPU times in /proc/<pid>/stat (100 on every Linux platform Node runs on). */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds (user and system, every thread) a process and its descendants (the workers of
 * WORKERS=2) have used so far, from /proc; undefined where /proc cannot tell (not Linux).
 */
export function cpuSeconds(pid: number): number | undefined {
  try {
    return cpuTicks(pid) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** The process and, recursively, its children (the workers of WORKERS=2); throws when the process is gone. */
function processTree(pid: number): number[] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return [
    pid,
    ...(children ? children.split(' ') : []).flatMap((child) => {
      try {
        return processTree(Number(child));
      } catch {
        return []; // a child that exited meanwhile
      }
    }),
  ];
}

/** utime + stime of a process and, recursively, of its children; throws when the process is gone. */
function cpuTicks(pid: number): number {
  return processTree(pid).reduce((sum, each) => {
    try {
      const stat = readFileSync(`/proc/${each}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return sum + Number(fields[11]) + Number(fields[12]);
    } catch {
      if (each === pid) throw new Error(`process ${pid} is gone`);
      return sum; // a child that exited meanwhile
    }
  }, 0);
}

/**
 * Resident memory (VmRSS) in MB of a process and its descendants (the workers of WORKERS=2), from
 * /proc; undefined where /proc cannot tell (not Linux, or the process is gone).
 */
export function treeRssMb(pid: number): number | undefined {
  try {
    const kb = processTree(pid).reduce((sum, each) => {
      try {
        return sum + Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${each}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        return sum;
      }
    }, 0);
    return Math.round(kb / 1024);
  } catch {
    return undefined;
  }
}

export function machine(): string {
  return `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

export const ADMIN_PG = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Runs fn with the URL of a fresh PostgreSQL database, dropped afterwards; undefined when PostgreSQL is unreachable. */
export async function withFreshPostgres<T>(prefix: string, fn: (url: string) => Promise<T>): Promise<T | undefined> {
  const admin = new pg.Client({ connectionString: ADMIN_PG });
  try {
    await admin.connect();
  } catch {
    console.log('# PostgreSQL not reachable: skipped');
    return undefined;
  }
  const name = `${prefix}_${process.pid}`;
  await admin.query(`create database ${name}`);
  const url = new URL(ADMIN_PG);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

/**
 * Replaces (or appends) the section under `heading` in bench/RESULTS.md (or `file`, such as
 * PLANS.md for the query plans behind the figures), leaving the rest alone.
 */
export function writeResultsSection(heading: string, section: string, file = 'RESULTS.md'): void {
  const path = new URL(`./${file}`, import.meta.url);
  const title = file === 'RESULTS.md' ? 'Benchmark results' : 'Query plans behind the benchmark results';
  const current = existsSync(path) ? readFileSync(path, 'utf8') : `# ${title}\n`;
  const start = current.indexOf(heading);
  let next;
  if (start < 0) next = `${current.trimEnd()}\n\n${section}`;
  else {
    const end = current.indexOf('\n## ', start + 1);
    next = current.slice(0, start) + section + (end < 0 ? '' : `\n${current.slice(end + 1)}`);
  }
  writeFileSync(path, `${next.trimEnd()}\n`);
}

/** The run's date, machine and load, for the head of a results section. */
export function runLine(): string {
  return `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${machine()}; load average at the end ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}.`;
}

export function row(cells: (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

export function loadTable(results: LoadResult[], floor?: LoadResult): string {
  const lines = [
    row(['target', 'req/s', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', 'ratio to floor']),
    row(['---', '---', '---', '---', '---', '---', '---']),
  ];
  for (const r of results) {
    lines.push(
      row([
        r.label,
        r.requestsPerSec,
        r.p50,
        r.p99,
        r.errors,
        r.non2xx,
        floor ? (r.requestsPerSec / floor.requestsPerSec).toFixed(2) : '-',
      ]),
    );
  }
  return lines.join('\n');
}

export function printLoad(results: LoadResult[], floor?: LoadResult): void {
  console.log(loadTable(results, floor));
}

/**
 * Merges figures into bench/results.json under their own keys, keeping what the other benchmarks wrote
 * there, and writes the file as the project's formatter writes it (so `npm run check` passes as it is).
 */
export async function mergeResults(figures: Record<string, unknown>): Promise<void> {
  const path = new URL('./results.json', import.meta.url);
  const current = existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>) : {};
  const { format, resolveConfig } = await import('prettier');
  const options = { ...(await resolveConfig(path)), filepath: path.pathname };
  writeFileSync(path, await format(JSON.stringify({ ...current, ...figures }), options));
}
