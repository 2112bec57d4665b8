// npm run bench -- signin [--quick] [--no-write] [--db sqlite|postgres] [--workers 1|2]
//   [--mode passkey|password] [--users N] [--duration S] [--warm-up S] [--profile DIR]
// Complete sign-ins per second over HTTP (bench/signin-flow.ts: the authorization request with
// PKCE, the sign-in page, passkey options and assertion or the password form, the code at the
// redirect URI, the token endpoint, userinfo), 20 virtual users each with a cookie jar of their
// own and a software authenticator, against the compiled service in a child process: passkey and
// password, SQLite and PostgreSQL, one process and WORKERS=2. Each cell reports sign-ins per
// second, p50/p99 of the whole flow and of each step, and the CPU each sign-in cost the service's
// processes (on PostgreSQL also the backends serving its connections, read from /proc), beside
// Keycloak's published figure. Prints the tables, merges its figures into bench/results.json
// under "signin", and (full runs) writes its section of bench/RESULTS.md.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { keyring } from '../src/crypto.ts';
import { openStore } from '../src/store/index.ts';
import {
  ADMIN_PG,
  cpuSeconds,
  machine,
  mergeResults,
  row,
  runLine,
  SECRET,
  startFlags,
  startService,
  withFreshPostgres,
  writeResultsSection,
} from './lib.ts';
import {
  registerPasskey,
  seedSignIns,
  signIn,
  STEPS,
  type RelyingParty,
  type SignInMode,
  type Step,
  type Target,
  type VirtualUser,
} from './signin-flow.ts';

/** Keycloak's published sizing: 15 password sign-ins per second per vCPU (about 67 ms of CPU each). */
const KEYCLOAK_PER_VCPU = 15;
const GOALS = {
  passkeySqliteCpuMs: 5,
  passkeyPostgresCpuMs: 12,
  p99Ms: 250,
  passwordPerCore: 30,
};

interface Options {
  quick: boolean;
  write: boolean;
  users: number;
  duration: number;
  warmUp: number;
  dbs: ('sqlite' | 'postgres')[];
  workers: number[];
  modes: SignInMode[];
  profileDir?: string;
}

function option(args: string[], name: string): string | undefined {
  const at = args.indexOf(`--${name}`);
  return at < 0 ? undefined : args[at + 1];
}

function parseOptions(args: string[]): Options {
  const quick = args.includes('--quick');
  const list = <T extends string>(name: string, all: T[]) => {
    const given = option(args, name);
    return given ? all.filter((v) => given.split(',').includes(v)) : all;
  };
  return {
    quick,
    write: !args.includes('--no-write'),
    users: Number(option(args, 'users') ?? 20),
    duration: Number(option(args, 'duration') ?? (quick ? 3 : 10)),
    warmUp: Number(option(args, 'warm-up') ?? (quick ? 1 : 15)),
    dbs: list('db', ['sqlite', 'postgres']),
    workers: list('workers', ['1', '2']).map(Number),
    modes: list('mode', ['passkey', 'password']),
    profileDir: option(args, 'profile'),
  };
}

const quantile = (sorted: number[], q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
const round1 = (n: number) => Math.round(n * 10) / 10;

interface Latency {
  p50: number;
  p99: number;
}

function latency(values: number[]): Latency {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round1(quantile(sorted, 0.5)), p99: round1(quantile(sorted, 0.99)) };
}

interface Cell {
  database: 'SQLite' | 'PostgreSQL';
  workers: number;
  mode: SignInMode;
  users: number;
  seconds: number;
  signIns: number;
  errors: number;
  firstError?: string;
  perSecond: number;
  flow: Latency;
  steps: Partial<Record<Step, Latency>>;
  /** CPU milliseconds per sign-in: the service's processes, and PostgreSQL's backends serving them */
  cpuMs: { service: number; database?: number; total: number };
  /** PostgreSQL: transactions (statements outside one count one each) and rows written per sign-in */
  statements?: { transactions: number; rowsWritten: number };
  /** complete sign-ins per second one core of CPU gives at that cost */
  perCore: number;
  /** the load generator's own CPU, in cores, during the run */
  loadGeneratorCores: number;
  loadAverage: number[];
}

/** utime + stime of one process in milliseconds (Linux: USER_HZ is 100); 0 when it is gone. */
function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** The CPU of the PostgreSQL backends connected to the database, by pid. */
async function backendCpu(database: string | undefined): Promise<Map<number, number>> {
  const cpu = new Map<number, number>();
  if (!database) return cpu;
  const admin = new pg.Client({ connectionString: ADMIN_PG });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ pid: number }>(
      'select pid from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
      [database],
    );
    for (const { pid } of rows) cpu.set(pid, processCpuMs(pid));
  } finally {
    await admin.end();
  }
  return cpu;
}

interface DatabaseCounters {
  transactions: number;
  rowsWritten: number;
}

/**
 * The database's transaction and row-change counters (pg_stat_database): each statement outside a
 * transaction is a transaction of its own, so the first counts round trips that commit. Backends
 * report their counts when they go idle, at most once a second: read a second and a half after a run.
 */
async function databaseCounters(database: string): Promise<DatabaseCounters> {
  const admin = new pg.Client({ connectionString: ADMIN_PG });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ transactions: string; rows_written: string }>(
      `select xact_commit + xact_rollback as transactions, tup_inserted + tup_updated + tup_deleted as rows_written
       from pg_stat_database where datname = $1`,
      [database],
    );
    return { transactions: Number(rows[0]!.transactions), rowsWritten: Number(rows[0]!.rows_written) };
  } finally {
    await admin.end();
  }
}

/** CPU milliseconds the backends used between two readings (a backend that appeared in between counts from 0). */
function backendDelta(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, ms] of after) sum += ms - (before.get(pid) ?? 0);
  return sum;
}

interface Run {
  totals: number[];
  steps: Partial<Record<Step, number[]>>;
  errors: number;
  firstError?: string;
  seconds: number;
}

/** Every user signs in again and again until the time is up. */
async function drive(target: Target, rp: RelyingParty, users: VirtualUser[], mode: SignInMode, seconds: number) {
  const run: Run = { totals: [], steps: {}, errors: 0, seconds: 0 };
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    users.map(async (user) => {
      while (performance.now() < deadline) {
        const begun = performance.now();
        try {
          const { times } = await signIn(target, rp, user, mode);
          run.totals.push(performance.now() - begun);
          for (const [step, ms] of Object.entries(times) as [Step, number][]) (run.steps[step] ??= []).push(ms);
        } catch (err) {
          run.errors += 1;
          run.firstError ??= err instanceof Error ? err.message : String(err);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    }),
  );
  run.seconds = (performance.now() - started) / 1000;
  return run;
}

interface Setting {
  database: Cell['database'];
  workers: number;
  pid: number;
  pgDatabase?: string;
}

async function measureCell(
  setting: Setting,
  flow: { target: Target; rp: RelyingParty; users: VirtualUser[] },
  mode: SignInMode,
  o: Options,
): Promise<Cell> {
  await drive(flow.target, flow.rp, flow.users, mode, o.warmUp);
  const serviceBefore = cpuSeconds(setting.pid) ?? NaN;
  const backendsBefore = await backendCpu(setting.pgDatabase);
  const countersBefore = setting.pgDatabase ? await databaseCounters(setting.pgDatabase) : undefined;
  const ownBefore = process.cpuUsage();
  const run = await drive(flow.target, flow.rp, flow.users, mode, o.duration);
  const own = process.cpuUsage(ownBefore);
  const serviceMs = ((cpuSeconds(setting.pid) ?? NaN) - serviceBefore) * 1000;
  const databaseMs = setting.pgDatabase
    ? backendDelta(backendsBefore, await backendCpu(setting.pgDatabase))
    : undefined;
  const n = Math.max(1, run.totals.length);
  let counters: Cell['statements'];
  if (setting.pgDatabase && countersBefore) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const after = await databaseCounters(setting.pgDatabase);
    counters = {
      transactions: round1((after.transactions - countersBefore.transactions) / n),
      rowsWritten: round1((after.rowsWritten - countersBefore.rowsWritten) / n),
    };
  }
  const service = round1(serviceMs / n);
  const database = databaseMs === undefined ? undefined : round1(databaseMs / n);
  const total = round1(service + (database ?? 0));
  return {
    database: setting.database,
    workers: setting.workers,
    mode,
    users: flow.users.length,
    seconds: round1(run.seconds),
    signIns: run.totals.length,
    errors: run.errors,
    firstError: run.firstError,
    perSecond: round1(run.totals.length / run.seconds),
    flow: latency(run.totals),
    steps: Object.fromEntries(STEPS.filter((s) => run.steps[s]).map((s) => [s, latency(run.steps[s]!)])),
    cpuMs: { service, database, total },
    statements: counters,
    perCore: round1(1000 / total),
    loadGeneratorCores: round1((own.user + own.system) / 1000 / 1000 / run.seconds),
    loadAverage: loadavg().map(round1),
  };
}

/** One database: seeded once, passkeys registered over HTTP once, then each WORKERS setting and mode. */
async function measureDatabase(
  database: Cell['database'],
  databaseUrl: string,
  port: number,
  o: Options,
): Promise<Cell[]> {
  const publicUrl = `http://127.0.0.1:${port}`;
  const keys = keyring(SECRET);
  const store = await openStore(databaseUrl);
  const seeded = await seedSignIns(store, keys, publicUrl, o.users).finally(() => store.close());
  const target: Target = { url: publicUrl, publicUrl };
  const users = seeded.users.map((s) => s.user);
  const pgDatabase = databaseUrl.startsWith('postgres') ? new URL(databaseUrl).pathname.slice(1) : undefined;
  const cells: Cell[] = [];
  let registered = false;
  for (const workers of o.workers) {
    const flags = o.profileDir ? [...startFlags(), '--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : startFlags();
    const env = { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, WORKERS: String(workers) };
    const service = await startService(env, port, flags);
    try {
      if (!registered)
        for (const { user, recoveryUrl } of seeded.users) await registerPasskey(target, user, recoveryUrl);
      registered = true;
      for (const mode of o.modes) {
        const cell = await measureCell(
          { database, workers, pid: service.pid, pgDatabase },
          { target, rp: seeded.rp, users },
          mode,
          o,
        );
        console.log(`# ${describeCell(cell)}`);
        cells.push(cell);
      }
    } finally {
      await service.stop();
    }
  }
  return cells;
}

const label = (c: Cell) => `${c.database}, ${c.workers === 1 ? 'one process' : `WORKERS=${c.workers}`}, ${c.mode}`;

function describeCell(c: Cell): string {
  return `${label(c)}: ${c.perSecond}/s, p50 ${c.flow.p50} ms, p99 ${c.flow.p99} ms, CPU ${c.cpuMs.total} ms per sign-in, ${c.errors} errors${c.firstError ? ` (first: ${c.firstError.slice(0, 200)})` : ''}; load average ${c.loadAverage.join(' ')}`;
}

/** The goal that applies to a cell, and whether it was met. */
function goalOf(c: Cell): { goal: string; met: boolean } | undefined {
  if (c.workers !== 1) return undefined;
  const p99 = c.flow.p99 < GOALS.p99Ms;
  if (c.mode === 'passkey') {
    const limit = c.database === 'SQLite' ? GOALS.passkeySqliteCpuMs : GOALS.passkeyPostgresCpuMs;
    const what = c.database === 'SQLite' ? 'service' : 'service + database';
    return { goal: `<= ${limit} ms CPU (${what}), p99 < ${GOALS.p99Ms} ms`, met: c.cpuMs.total <= limit && p99 };
  }
  return { goal: `>= ${GOALS.passwordPerCore}/s per core`, met: c.perCore >= GOALS.passwordPerCore };
}

function summaryTable(cells: Cell[]): string {
  const lines = [
    row([
      'sign-in',
      'sign-ins/s',
      'p50 / p99 ms',
      'CPU ms per sign-in: service (+ PostgreSQL backends)',
      'PostgreSQL transactions / rows written per sign-in',
      'sign-ins/s per core of CPU',
      `Keycloak (${KEYCLOAK_PER_VCPU}/s per vCPU): ratio`,
      'errors',
      'load average',
      'goal',
      'met',
    ]),
    row(Array(11).fill('---')),
  ];
  for (const c of cells) {
    const goal = goalOf(c);
    lines.push(
      row([
        label(c),
        c.perSecond,
        `${c.flow.p50} / ${c.flow.p99}`,
        c.cpuMs.database === undefined
          ? c.cpuMs.service
          : `${c.cpuMs.service} + ${c.cpuMs.database} = ${c.cpuMs.total}`,
        c.statements ? `${c.statements.transactions} / ${c.statements.rowsWritten}` : '-',
        c.perCore,
        `${round1(c.perCore / KEYCLOAK_PER_VCPU)}x`,
        c.errors,
        c.loadAverage.join(' '),
        goal?.goal ?? '-',
        goal ? (goal.met ? 'yes' : 'no') : '-',
      ]),
    );
  }
  return lines.join('\n');
}

function stepTable(cells: Cell[]): string {
  const lines = [row(['sign-in', ...STEPS.map((s) => `${s} p50 / p99 ms`)]), row(Array(STEPS.length + 1).fill('---'))];
  for (const c of cells)
    lines.push(row([label(c), ...STEPS.map((s) => (c.steps[s] ? `${c.steps[s].p50} / ${c.steps[s].p99}` : '-'))]));
  return lines.join('\n');
}

/**
 * The token step's p99 while password sign-ins hash, beside its p99 in the passkey run of the same
 * setting (no hashing): hashing must not hold token signing up (goal: at most 1.5 times).
 */
function tokenLines(cells: Cell[]): string[] {
  const lines: string[] = [];
  for (const password of cells.filter((c) => c.mode === 'password')) {
    const passkey = cells.find(
      (c) => c.mode === 'passkey' && c.database === password.database && c.workers === password.workers,
    );
    const [under, without] = [password.steps.token?.p99, passkey?.steps.token?.p99];
    if (under === undefined || without === undefined) continue;
    const ratio = round1(under / without);
    lines.push(
      `- ${label(password)}: token step p99 ${under} ms, ${ratio}x its p99 in the passkey run (${without} ms); goal <= 1.5x: ${ratio <= 1.5 ? 'met' : 'missed'}`,
    );
  }
  return lines;
}

async function writeJson(figures: object): Promise<void> {
  await mergeResults({ signin: figures });
}

async function onFreshPostgres(o: Options): Promise<Cell[]> {
  return (await withFreshPostgres('idp_bench_signin', (url) => measureDatabase('PostgreSQL', url, 18112, o))) ?? [];
}

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  const started = new Date();
  const head = `${o.users} virtual users (each its own cookie jar and software P-256 authenticator) signing in again and again for ${o.duration} s per cell after ${o.warmUp} s of the same; the load generator (Node fetch) in the benchmark's process; the compiled service with the flags of \`npm start\` (${startFlags().join(' ')}) in a child process. CPU per sign-in: the service's processes (workers included), and on PostgreSQL the backends connected to its database, from /proc. Keycloak publishes ${KEYCLOAK_PER_VCPU} password sign-ins per second per vCPU (about 67 ms of CPU each).`;
  console.log(`# sign-in benchmark — ${machine()}; load average ${loadavg().map(round1).join(' ')}\n# ${head}\n`);
  const cells: Cell[] = [];
  if (o.dbs.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-signin-'));
    try {
      cells.push(...(await measureDatabase('SQLite', join(dir, 'idp.sqlite'), 18111, o)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (o.dbs.includes('postgres')) cells.push(...(await onFreshPostgres(o)));
  const summary = summaryTable(cells);
  const steps = stepTable(cells);
  const tokens = tokenLines(cells).join('\n');
  console.log(`\n${runLine()}\n\n${summary}\n\nSteps:\n\n${steps}\n\nToken requests under password load:\n\n${tokens}`);
  if (!o.write) return;
  await writeJson({ started: started.toISOString(), machine: machine(), quick: o.quick, head, goals: GOALS, cells });
  console.log('written to bench/results.json');
  if (o.quick || o.profileDir || cells.length < 8) return;
  writeResultsSection(
    '## Sign-ins',
    [
      '## Sign-ins',
      '',
      runLine(),
      head,
      '',
      summary,
      '',
      'Steps:',
      '',
      steps,
      '',
      'Token requests under password load:',
      '',
      tokens,
      '',
    ].join('\n'),
  );
  console.log('written to bench/RESULTS.md');
}
