// npm run bench -- soak [--minutes N | --seconds N] [--db sqlite|postgres] [--workers N] [--users N]
//   [--ramp S] [--interval S] [--no-write]
// A long run of the compiled service under a mixed workload, over HTTP: complete passkey sign-ins
// (bench/signin-flow.ts), client_credentials token requests, userinfo calls with the access tokens
// the sign-ins got, the passkey API (one user's list; a passkey deleted and a new one registered
// through a recovery link made with the recovery link API), SCIM user creations and PATCHes.
// First the capacity: the mix in a closed loop at full concurrency for --ramp seconds (default 20),
// counting completed operations per second. Then an open loop at half that rate for the duration
// (default 60 minutes): operations start on a fixed schedule whether or not earlier ones have
// finished, and each one's latency runs from its scheduled start, so a stall shows as latency
// instead of as fewer requests. Every --interval seconds (default 60) a line: operations, errors,
// p50/p99 of every operation, the resident memory of the service's processes (workers included).
// The verdict: no errors; resident memory at the end within 10% above its value after the first 5
// minutes (20% of a run shorter than 25 minutes), each the median of the per-second samples over a
// window of that length: the one after the first and the last, as GC makes resident memory a
// sawtooth of several minutes that a shorter window would sample at any phase; the last interval's p99 within 1.5 times
// the median of the intervals' p99s. Exit code 1 when it fails. Writes its section of
// bench/RESULTS.md unless --no-write.
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { keyring, type Keyring } from '../src/crypto.ts';
import { openStore, type Store } from '../src/store/index.ts';
import { createClient } from '../src/clients/index.ts';
import { createScimToken } from '../src/directory/provisioning.ts';
import {
  machine,
  row,
  runLine,
  SECRET,
  startFlags,
  startService,
  treeRssMb,
  withFreshPostgres,
  writeResultsSection,
} from './lib.ts';
import { accessToken } from './passkeys.ts';
import {
  expectStatus,
  FlowError,
  newCredential,
  registerPasskey,
  seedSignIns,
  signIn,
  userinfo,
  type RelyingParty,
  type Target,
  type VirtualUser,
} from './signin-flow.ts';

const ORG = 1;
const ADMIN_SCOPE = 'passkey.read passkey.delete recovery.manage';
/** The goal's bounds: memory growth and the last interval's p99 against the median. */
export const GOALS = { rssGrowth: 0.1, p99Ratio: 1.5, baselineSeconds: 300, baselineShare: 0.2 };

/** The kinds of operation, and the mix: one round of the schedule, cycled. */
export const KINDS = [
  'sign-in',
  'token',
  'userinfo',
  'passkeys.list',
  'passkey.replace',
  'scim.create',
  'scim.patch',
] as const;
export type Kind = (typeof KINDS)[number];
export const MIX: Kind[] = [
  'sign-in',
  'userinfo',
  'passkeys.list',
  'token',
  'userinfo',
  'scim.create',
  'sign-in',
  'userinfo',
  'passkeys.list',
  'scim.patch',
  'userinfo',
  'passkey.replace',
];

/** What the workload needs: sign-in users, users whose passkeys are replaced, an admin client, a SCIM token. */
export interface Prepared {
  rp: RelyingParty;
  signInUsers: { user: VirtualUser; recoveryUrl: string }[];
  churnUsers: { user: VirtualUser; recoveryUrl: string }[];
  admin: { clientId: string; secret: string };
  scimToken: string;
}

/** Seeds the directory through its own functions (bench/signin-flow.ts for the users and the relying party). */
export async function prepare(store: Store, keys: Keyring, publicUrl: string, users: number): Promise<Prepared> {
  const churn = Math.max(2, Math.ceil(users / 4));
  const seeded = await seedSignIns(store, keys, publicUrl, users + churn);
  const { client, secret } = await createClient(store, keys, {
    name: 'Soak administration',
    scopes: ADMIN_SCOPE.split(' '),
    orgs: [ORG],
  });
  const { token } = await createScimToken(store, ORG, 'Soak');
  return {
    rp: seeded.rp,
    signInUsers: seeded.users.slice(0, users),
    churnUsers: seeded.users.slice(users),
    admin: { clientId: client.clientId, secret: secret! },
    scimToken: token,
  };
}

/** A pool of virtual users: one operation at a time per user (its cookie jar and signature counter). */
class Pool {
  private free: VirtualUser[];
  private waiting: ((u: VirtualUser) => void)[] = [];
  constructor(users: VirtualUser[]) {
    this.free = [...users];
  }
  async use<T>(fn: (u: VirtualUser) => Promise<T>): Promise<T> {
    const user = this.free.shift() ?? (await new Promise<VirtualUser>((resolve) => this.waiting.push(resolve)));
    try {
      return await fn(user);
    } finally {
      const next = this.waiting.shift();
      if (next) next(user);
      else this.free.push(user);
    }
  }
}

/** The workload against a running service: registers the passkeys over HTTP, then runs one operation of a kind at a time. */
export class Workload {
  private signIns: Pool;
  private churn: Pool;
  private adminToken = '';
  private userTokens: string[] = [];
  private scimUsers: string[] = [];
  private scimCount = 0;
  private turn = 0;

  readonly target: Target;
  readonly prepared: Prepared;

  constructor(target: Target, prepared: Prepared) {
    this.target = target;
    this.prepared = prepared;
    this.signIns = new Pool(prepared.signInUsers.map((s) => s.user));
    this.churn = new Pool(prepared.churnUsers.map((s) => s.user));
  }

  /** Every user's passkey registered through its recovery link, a first sign-in each, an admin token, a SCIM user. */
  async start(): Promise<void> {
    for (const { user, recoveryUrl } of [...this.prepared.signInUsers, ...this.prepared.churnUsers])
      await registerPasskey(this.target, user, recoveryUrl);
    for (const { user } of this.prepared.signInUsers) await this.run('sign-in', user);
    await this.run('token');
    await this.run('scim.create');
  }

  /** The next operation of the mix. */
  next(): Kind {
    return MIX[this.turn++ % MIX.length]!;
  }

  async run(kind: Kind, user?: VirtualUser): Promise<void> {
    switch (kind) {
      case 'sign-in':
        return user ? this.signIn(user) : this.signIns.use((u) => this.signIn(u));
      case 'token':
        this.adminToken = await accessToken(
          this.target.url,
          this.prepared.admin.clientId,
          this.prepared.admin.secret,
          ADMIN_SCOPE,
        );
        return;
      case 'userinfo': {
        const token = this.userTokens[Math.floor(Math.random() * this.userTokens.length)]!;
        await userinfo(this.target, token);
        return;
      }
      case 'passkeys.list': {
        const { user } = this.prepared.signInUsers[Math.floor(Math.random() * this.prepared.signInUsers.length)]!;
        const passkeys = (await this.admin(
          'GET',
          `/2/passkey/${ORG}?eppn=${encodeURIComponent(user.eppn)}`,
        )) as unknown[];
        if (passkeys.length !== 1) throw new FlowError(`passkeys.list: ${passkeys.length} passkeys, not 1`);
        return;
      }
      case 'passkey.replace':
        return this.churn.use(async (u) => {
          await this.admin('DELETE', `/2/passkey/${ORG}?eppn=${encodeURIComponent(u.eppn)}`);
          const link = (await this.admin('POST', `/2/recovery-link/${ORG}`, { eppn: u.eppn }, 201)) as { url: string };
          u.credential = newCredential();
          await registerPasskey(this.target, u, link.url);
        });
      case 'scim.create': {
        const i = this.scimCount++;
        const made = (await this.scim(
          'POST',
          '/scim/v2/Users',
          {
            schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
            userName: `scim${i}-${process.pid}@signin.example.org`,
            externalId: `soak-${process.pid}-${i}`,
            name: { givenName: 'Soak', familyName: `User ${i}` },
            emails: [{ value: `scim${i}@example.org`, primary: true }],
          },
          201,
        )) as { id: string };
        this.scimUsers.push(made.id);
        return;
      }
      case 'scim.patch': {
        const id = this.scimUsers[Math.floor(Math.random() * this.scimUsers.length)]!;
        await this.scim('PATCH', `/scim/v2/Users/${id}`, {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'replace', path: 'name.givenName', value: `Soak ${Date.now()}` }],
        });
        return;
      }
    }
  }

  private async signIn(user: VirtualUser): Promise<void> {
    const { accessToken: token } = await signIn(this.target, this.prepared.rp, user, 'passkey');
    // the newest tokens, at most two per user: userinfo calls use live tokens
    this.userTokens.push(token);
    if (this.userTokens.length > this.prepared.signInUsers.length * 2) this.userTokens.shift();
  }

  private admin(method: string, path: string, body?: object, status = 200): Promise<unknown> {
    return this.json(`${method} ${path.split('?')[0]}`, method, path, `Bearer ${this.adminToken}`, body, status);
  }

  private scim(method: string, path: string, body: object, status = 200): Promise<unknown> {
    return this.json(`${method} ${path}`, method, path, `Bearer ${this.prepared.scimToken}`, body, status, true);
  }

  private async json(
    step: string,
    method: string,
    path: string,
    authorization: string,
    body: object | undefined,
    status: number,
    scim = false,
  ): Promise<unknown> {
    const res = await fetch(new URL(path, this.target.url), {
      method,
      headers: {
        authorization,
        ...(body ? { 'content-type': scim ? 'application/scim+json' : 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    expectStatus(step, res, status, text);
    return JSON.parse(text);
  }
}

interface Sample {
  kind: Kind;
  /** milliseconds from the scheduled start (open loop) or the start (closed loop) to the answer */
  ms: number;
  error?: string;
}

export interface Interval {
  /** 1-based */
  index: number;
  /** seconds since the run began, at the interval's end */
  at: number;
  operations: number;
  errors: number;
  p50: number;
  p99: number;
  /** the median of the resident memory sampled every second during the interval (GC makes it a sawtooth) */
  rssMb: number | undefined;
  /** the median of the service's V8 heap in use, read from its /metrics during the interval */
  heapMb?: number | undefined;
}

export interface SoakResult {
  capacity: number;
  rate: number;
  seconds: number;
  intervals: Interval[];
  kinds: { kind: Kind; operations: number; errors: number; p50: number; p99: number }[];
  operations: number;
  errors: number;
  firstErrors: string[];
  rss: { baselineMb?: number; baselineAt: number; endMb?: number };
  verdict: { errors: boolean; memory: boolean; p99: boolean; met: boolean; p99Median: number };
}

const quantile = (sorted: number[], q: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
const round1 = (n: number) => Math.round(n * 10) / 10;
/** the median of sorted numbers (NaN for none) */
const median = (sorted: number[]) =>
  sorted.length % 2
    ? sorted[(sorted.length - 1) / 2]!
    : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;

function latency(samples: Sample[]): { p50: number; p99: number } {
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  return { p50: round1(quantile(sorted, 0.5)), p99: round1(quantile(sorted, 0.99)) };
}

async function timedRun(workload: Workload, kind: Kind, scheduled: number): Promise<Sample> {
  try {
    await workload.run(kind);
    return { kind, ms: performance.now() - scheduled };
  } catch (err) {
    return { kind, ms: performance.now() - scheduled, error: `${kind}: ${err instanceof Error ? err.message : err}` };
  }
}

/** Completed operations per second of the mix with `concurrency` operations always in flight. */
export async function measureCapacity(workload: Workload, concurrency: number, seconds: number): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  let done = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const sample = await timedRun(workload, workload.next(), performance.now());
        if (!sample.error) done++;
      }
    }),
  );
  return done / ((performance.now() - started) / 1000);
}

export interface SoakOptions {
  seconds: number;
  interval: number;
  rate: number;
  capacity: number;
  /** resident memory of the service's processes in MB */
  rssMb: () => number | undefined;
  /** the service's V8 heap in use in MB, when it can be read */
  heapMb?: () => Promise<number | undefined>;
  /** more in flight than this counts as an error instead of starting (the service has stalled) */
  maxInFlight?: number;
  onInterval?: (i: Interval) => void;
}

/**
 * The open loop: operation n starts at start + n / rate whether or not earlier ones have finished
 * (a 5 ms timer starts every operation whose time has come), its latency counted from that time.
 */
export async function soak(workload: Workload, o: SoakOptions): Promise<SoakResult> {
  const maxInFlight = o.maxInFlight ?? 1000;
  const all: Sample[] = [];
  let current: Sample[] = [];
  const intervals: Interval[] = [];
  const rss: { at: number; mb: number | undefined }[] = [];
  const heap: { at: number; mb: number | undefined }[] = [];
  const started = performance.now();
  const end = started + o.seconds * 1000;
  let scheduledCount = 0;
  let inFlight = 0;
  const pending = new Set<Promise<void>>();
  const record = (s: Sample) => {
    all.push(s);
    current.push(s);
  };
  /** the median of the samples taken in (from, to] seconds, rounded */
  const medianOver = (samples: typeof rss, from: number, to: number) => {
    const mbs = samples
      .filter((r) => r.at > from && r.at <= to && r.mb !== undefined)
      .map((r) => r.mb!)
      .sort((a, b) => a - b);
    return mbs.length ? Math.round(median(mbs)) : undefined;
  };
  const closeInterval = () => {
    const at = (performance.now() - started) / 1000;
    rss.push({ at, mb: o.rssMb() });
    const l = latency(current);
    const interval: Interval = {
      index: intervals.length + 1,
      at: round1(at),
      operations: current.length,
      errors: current.filter((s) => s.error).length,
      ...l,
      rssMb: medianOver(rss, intervals.at(-1)?.at ?? 0, at),
      heapMb: o.heapMb ? medianOver(heap, intervals.at(-1)?.at ?? 0, at) : undefined,
    };
    intervals.push(interval);
    current = [];
    o.onInterval?.(interval);
  };
  const sampler = setInterval(() => rss.push({ at: (performance.now() - started) / 1000, mb: o.rssMb() }), 1000);
  const heapSampler = setInterval(() => {
    const at = (performance.now() - started) / 1000;
    void o.heapMb?.().then((mb) => heap.push({ at, mb }));
  }, 5000);
  let nextReport = started + o.interval * 1000;
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const now = performance.now();
      while (now < end) {
        const scheduled = started + (scheduledCount * 1000) / o.rate;
        if (scheduled > now) break;
        scheduledCount++;
        const kind = workload.next();
        if (inFlight >= maxInFlight) {
          record({ kind, ms: 0, error: `${kind}: not started, ${maxInFlight} operations in flight` });
          continue;
        }
        inFlight++;
        const p = timedRun(workload, kind, scheduled).then((s) => {
          inFlight--;
          record(s);
          pending.delete(p);
        });
        pending.add(p);
      }
      // the last interval closes once every operation has answered
      if (now >= nextReport && nextReport <= end - o.interval * 500) {
        closeInterval();
        nextReport += o.interval * 1000;
      }
      if (now >= end) {
        clearInterval(tick);
        resolve();
      }
    }, 5);
  });
  await Promise.all(pending);
  clearInterval(sampler);
  clearInterval(heapSampler);
  if (current.length) closeInterval();

  const baselineAt =
    o.seconds >= GOALS.baselineSeconds / GOALS.baselineShare ? GOALS.baselineSeconds : o.seconds * GOALS.baselineShare;
  // medians over a window as long as the warm-up: the one right after it, and the last one
  const total = (performance.now() - started) / 1000;
  const baseline = medianOver(rss, baselineAt, 2 * baselineAt);
  const endMb = medianOver(rss, total - baselineAt, total);
  const p99s = intervals.map((i) => i.p99).sort((a, b) => a - b);
  const p99Median = median(p99s);
  const errors = all.filter((s) => s.error);
  const verdict = {
    errors: errors.length === 0,
    memory: baseline !== undefined && endMb !== undefined && endMb <= baseline * (1 + GOALS.rssGrowth),
    p99: (intervals.at(-1)?.p99 ?? Infinity) <= p99Median * GOALS.p99Ratio,
    p99Median: round1(p99Median),
    met: false,
  };
  verdict.met = verdict.errors && verdict.memory && verdict.p99;
  return {
    capacity: round1(o.capacity),
    rate: round1(o.rate),
    seconds: round1((performance.now() - started) / 1000),
    intervals,
    kinds: KINDS.map((kind) => {
      const of = all.filter((s) => s.kind === kind);
      return { kind, operations: of.length, errors: of.filter((s) => s.error).length, ...latency(of) };
    }),
    operations: all.length,
    errors: errors.length,
    firstErrors: [...new Set(errors.map((s) => s.error!.slice(0, 300)))].slice(0, 5),
    rss: { baselineMb: baseline, baselineAt: round1(baselineAt), endMb },
    verdict,
  };
}

export function intervalTable(r: SoakResult, unit: string): string {
  return [
    row([unit, 'operations', 'errors', 'p50 ms', 'p99 ms', 'RSS MB (median)', 'V8 heap used MB (median)']),
    row(Array(7).fill('---')),
    ...r.intervals.map((i) => row([i.index, i.operations, i.errors, i.p50, i.p99, i.rssMb ?? '-', i.heapMb ?? '-'])),
  ].join('\n');
}

export function kindTable(r: SoakResult): string {
  return [
    row(['operation', 'count', 'errors', 'p50 ms', 'p99 ms']),
    row(Array(5).fill('---')),
    ...r.kinds.map((k) => row([k.kind, k.operations, k.errors, k.p50, k.p99])),
  ].join('\n');
}

export function verdictLines(r: SoakResult): string[] {
  const v = r.verdict;
  const yes = (ok: boolean) => (ok ? 'met' : 'MISSED');
  return [
    `- no errors: ${yes(v.errors)} (${r.errors} of ${r.operations} operations)${r.firstErrors.length ? `; first: ${r.firstErrors.join(' | ')}` : ''}`,
    `- resident memory at the end within ${GOALS.rssGrowth * 100}% above its value after the first ${r.rss.baselineAt} s: ${yes(v.memory)} (medians of the per-second samples over ${r.rss.baselineAt} s windows: ${r.rss.baselineMb ?? '?'} MB in the one after the first, ${r.rss.endMb ?? '?'} MB in the last)`,
    `- last interval's p99 within ${GOALS.p99Ratio}x the median of the intervals' p99s: ${yes(v.p99)} (${r.intervals.at(-1)?.p99 ?? '?'} ms against ${v.p99Median} ms)`,
    `- verdict: ${v.met ? 'PASS' : 'FAIL'}`,
  ];
}

interface Options {
  seconds: number;
  interval: number;
  ramp: number;
  db: 'sqlite' | 'postgres';
  workers: number;
  users: number;
  write: boolean;
}

function option(args: string[], name: string): string | undefined {
  const at = args.indexOf(`--${name}`);
  return at < 0 ? undefined : args[at + 1];
}

function parseOptions(args: string[]): Options {
  const number = (name: string, fallback: number) => {
    const given = option(args, name);
    if (given === undefined) return fallback;
    const n = Number(given);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, not ${given}`);
    return n;
  };
  const db = option(args, 'db') ?? 'sqlite';
  if (db !== 'sqlite' && db !== 'postgres') throw new Error(`--db must be sqlite or postgres, not ${db}`);
  const seconds = option(args, 'seconds') ? number('seconds', 0) : number('minutes', 60) * 60;
  return {
    seconds,
    interval: number('interval', 60),
    ramp: number('ramp', 20),
    db,
    workers: number('workers', 1),
    users: number('users', 20),
    write: !args.includes('--no-write'),
  };
}

async function onDatabase(databaseUrl: string, port: number, o: Options): Promise<SoakResult> {
  const publicUrl = `http://127.0.0.1:${port}`;
  const store = await openStore(databaseUrl);
  const prepared = await prepare(store, keyring(SECRET), publicUrl, o.users).finally(() => store.close());
  const service = await startService(
    {
      DATABASE_URL: databaseUrl,
      IDP_SECRET: SECRET,
      WORKERS: String(o.workers),
      // every virtual user comes from 127.0.0.1, where a real population comes from many addresses:
      // the per-address limits of sign-ins and WebAuthn ceremonies would refuse most of an hour's load
      LOGIN_RATE_LIMIT_IP: '1000000',
    },
    port,
  );
  try {
    const workload = new Workload({ url: publicUrl, publicUrl }, prepared);
    await workload.start();
    const capacity = await measureCapacity(workload, o.users, o.ramp);
    const rate = capacity / 2;
    console.log(
      `# capacity ${round1(capacity)} operations/s (${o.ramp} s closed loop, ${o.users} in flight); open loop at ${round1(rate)}/s for ${o.seconds} s; load average ${loadavg().map(round1).join(' ')}`,
    );
    const unit = o.interval === 60 ? 'minute' : `${o.interval} s`;
    console.log(`# ${unit} | operations | errors | p50 ms | p99 ms | RSS MB | heap MB`);
    return await soak(workload, {
      seconds: o.seconds,
      interval: o.interval,
      rate,
      capacity,
      rssMb: () => treeRssMb(service.pid),
      heapMb: () => heapUsedMb(publicUrl),
      onInterval: (i) =>
        console.log(
          `# ${i.index} | ${i.operations} | ${i.errors} | ${i.p50} | ${i.p99} | ${i.rssMb ?? '-'} | ${i.heapMb ?? '-'}; load average ${loadavg().map(round1).join(' ')}`,
        ),
    });
  } finally {
    await service.stop();
  }
}

/** The V8 heap in use of the process that answers, from its own /metrics (open to loopback). */
async function heapUsedMb(publicUrl: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(`${publicUrl}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
    const bytes = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text)?.[1];
    return bytes === undefined ? undefined : Math.round(Number(bytes) / 2 ** 20);
  } catch {
    return undefined;
  }
}

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  const dbName = o.db === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  const head = `${dbName}, ${o.workers === 1 ? 'one process' : `WORKERS=${o.workers}`}, the compiled service with the flags of \`npm start\` (${startFlags().join(' ')}). Mix per round of ${MIX.length}: ${KINDS.map((k) => `${MIX.filter((m) => m === k).length} ${k}`).join(', ')}. Capacity from ${o.ramp} s of the mix in a closed loop with ${o.users} operations in flight; then an open loop at half of it for ${round1(o.seconds / 60)} min, latency from each operation's scheduled start.`;
  console.log(`# soak — ${machine()}; load average ${loadavg().map(round1).join(' ')}\n# ${head}`);
  let result: SoakResult | undefined;
  if (o.db === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-soak-'));
    try {
      result = await onDatabase(join(dir, 'idp.sqlite'), 18121, o);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } else result = await withFreshPostgres('idp_bench_soak', (url) => onDatabase(url, 18122, o));
  if (!result) {
    process.exitCode = 1;
    return;
  }
  const unit = o.interval === 60 ? 'minute' : `${o.interval} s`;
  const summary = `Capacity ${result.capacity} operations/s; driven at ${result.rate}/s for ${result.seconds} s: ${result.operations} operations, ${result.errors} errors.`;
  const text = [
    summary,
    '',
    intervalTable(result, unit),
    '',
    'Per operation:',
    '',
    kindTable(result),
    '',
    ...verdictLines(result),
  ].join('\n');
  console.log(`\n${runLine()}\n\n${text}`);
  if (!result.verdict.met) process.exitCode = 1;
  if (!o.write) return;
  writeResultsSection('## Long run (soak)', ['## Long run (soak)', '', runLine(), head, '', text, ''].join('\n'));
  console.log('written to bench/RESULTS.md');
}
