// npm run bench [-- --quick] [--no-write]: the comparison, in one run. The Fastify constant-JSON
// floor, a stock oidc-provider (bench/peer-server.ts: in-memory adapter, ES256 JWT access tokens)
// and this service on SQLite and on PostgreSQL, one process and WORKERS=2: client_credentials
// tokens, OIDC userinfo and one user's passkeys (10 passkeys, 20,000 in the organization), each with
// 50 connections; the time from `npm start` to ready, and memory. Prints the table with each
// figure's ratio beside its goal, writes bench/results.json, and (full runs) the README table.
//
// The machine is shared and its speed drifts within minutes, so every ratio is taken against
// reference runs right before and right after the run it judges: the peer around each token run,
// the floor around each userinfo and passkey run, and for WORKERS=2 a one-process run right after.
// The floor and the peer keep running, idle, between their runs. A second peer, started with the
// Node flags of `npm start`, runs around each token run too: what the service's memory limits cost
// the library itself, shown beside the goal, not judged. The service and the peer are also loaded
// both at once, side by side on the same cores: a drift of the machine's speed then touches both
// alike, so that ratio shows what a token costs each of them; it too is shown, not judged. Each
// load run also records the CPU the server's processes and the load generator (autocannon, in
// this process) used.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.ts';
import {
  cpuSeconds,
  load,
  machine,
  mergeResults,
  npmStartReadyMs,
  row,
  SECRET,
  startFlags,
  startFloor,
  startPeer,
  startService,
  withFreshPostgres,
  type ChildServer,
  type LoadResult,
  type LoadOptions,
  type Service,
} from './lib.ts';
import { PEER_CLIENT } from './peer-client.ts';
import { accessToken, ORG, REALM, seed } from './passkeys.ts';
import { mintToken } from './userinfo.ts';

const CONNECTIONS = 50;
const PASSKEYS = 20_000;
const USERS = 2_000;
/** how long after the last load run the settled resident set is read */
const SETTLE_MS = 3000;
/** how many `npm start` runs the time to ready is the median of (after one that is not counted) */
const READY_RUNS = 5;
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/** A load run, with the CPU (in cores: CPU seconds per second) the server and the load generator used. */
interface Run extends LoadResult {
  cores?: { server: number; load: number };
}

interface Figure {
  target: string;
  result?: Run;
  /** a figure that is not a load run (milliseconds, MB) */
  value?: string;
  /** the reference runs before and after, and what the ratio is to */
  reference?: { name: 'floor' | 'peer' | 'peer, same flags' | 'peer, same time' | 'one process'; runs: Run[] };
  ratio?: number;
  goal: string;
  met?: boolean;
}

function tokenRequest(url: string, id: string, secret: string): LoadOptions {
  return {
    url,
    connections: CONNECTIONS,
    duration: 0,
    method: 'POST',
    headers: { authorization: basic(id, secret), 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&scope=passkey.read',
  };
}

const fixed = (n: number) => n.toFixed(2);

/** Seconds of each load run, and of the warm-up with the same requests right before it. */
interface Timing {
  duration: number;
  warmUp: number;
}

/**
 * How long a server is loaded before a run counts. V8 compiles the hot functions of a request on
 * its background threads while the load goes on, and a fresh process (or one that gave memory
 * back, which discards compiled code) is still doing so well after the load began. Traced with
 * --trace-opt on the 2-core benchmark machine: after 3 s and after 6 s of tokens, the service's next
 * 8 s still spent 1.3 s of CPU compiling (the peer's, after 3 s: 1.2 s), on the cores the run is
 * measured on; after 10, 15 and 20 s: 0.43, 0.48 and 0.25 s. Every server gets the same warm-up per
 * process: WORKERS=2 is warmed twice as long, as each of its processes gets half the requests.
 */
const WARM_UP_SECONDS = 10;

/**
 * Load runs of several servers at once (or of one), each with its own requests: one answer of each
 * must be 200 before the runs count; then a warm-up of all together, then the runs, each server's
 * CPU recorded (the load generator's is for all of them together).
 */
async function measureTogether(runs: { label: string; o: LoadOptions; pid: number }[], timing: Timing): Promise<Run[]> {
  for (const { label, o } of runs) {
    const check = await fetch(o.url, { method: o.method ?? 'GET', headers: o.headers, body: o.body });
    if (check.status !== 200) throw new Error(`${label}: ${check.status} ${(await check.text()).slice(0, 200)}`);
  }
  await Promise.all(runs.map(({ o }) => load('warm-up', { ...o, duration: timing.warmUp })));
  const before = runs.map(({ pid }) => cpuSeconds(pid));
  const loadBefore = process.cpuUsage();
  const started = performance.now();
  const results: Run[] = await Promise.all(
    runs.map(({ label, o }) => load(label, { ...o, duration: timing.duration })),
  );
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(loadBefore);
  runs.forEach(({ label, pid }, i) => {
    const result = results[i]!;
    const [serverBefore, serverAfter] = [before[i], cpuSeconds(pid)];
    if (serverBefore !== undefined && serverAfter !== undefined)
      result.cores = {
        server: (serverAfter - serverBefore) / seconds,
        load: (used.user + used.system) / 1e6 / seconds,
      };
    const cores = result.cores
      ? `, CPU cores: server ${fixed(result.cores.server)}, load generator ${fixed(result.cores.load)}`
      : '';
    console.log(
      `  ${label}: ${result.requestsPerSec} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, errors ${result.errors}, non-2xx ${result.non2xx}${cores}`,
    );
  });
  return results;
}

/** One server's load run: see measureTogether. */
async function measure(label: string, o: LoadOptions, timing: Timing, serverPid: number): Promise<Run> {
  return (await measureTogether([{ label, o, pid: serverPid }], timing))[0]!;
}

interface Prepared {
  client: { id: string; secret: string };
  userinfoToken: string;
}

async function prepare(databaseUrl: string, publicUrl: string): Promise<Prepared> {
  const store = await openStore(databaseUrl);
  let seeded;
  try {
    seeded = await seed(store, PASSKEYS, USERS);
  } finally {
    await store.close();
  }
  const userinfoToken = await mintToken(databaseUrl, publicUrl, { id: ORG, realm: REALM });
  return { client: { id: seeded.clientId, secret: seeded.secret }, userinfoToken };
}

interface References {
  floor: ChildServer;
  peer: ChildServer;
  /** the same peer started with the service's Node flags (npm start's): not a goal, an explanation */
  peerWithFlags: ChildServer;
  timing: Timing;
}

interface ServiceFigures {
  token: Run;
  peerAround: Run[];
  peerWithFlagsAround: Run[];
  /** the service and the peer loaded at the same time */
  together: { token: Run; peer: Run };
  userinfo: Run;
  passkeys: Run;
  floorAround: Run[];
  tokens2: Run;
  tokens1: Run;
  readyMs: number;
  npmReadyMs: number[];
  restMb: number;
  afterMb: number;
  settledMb: number;
}

async function serviceFigures(
  dialect: 'SQLite' | 'PostgreSQL',
  databaseUrl: string,
  port: number,
  refs: References,
): Promise<ServiceFigures> {
  const { timing } = refs;
  console.log(`\n# ${dialect}: seeding ${PASSKEYS} passkeys over ${USERS} users`);
  const publicUrl = `http://127.0.0.1:${port}`;
  const prepared = await prepare(databaseUrl, publicUrl);
  const env = { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, ACCESS_TOKEN_TTL: '3600' };
  const peerRun = (when: string) =>
    measure(
      `${dialect}: stock oidc-provider tokens (peer), ${when}`,
      tokenRequest(refs.peer.url, PEER_CLIENT.id, PEER_CLIENT.secret),
      timing,
      refs.peer.pid,
    );
  const peerWithFlagsRun = (when: string) =>
    measure(
      `${dialect}: the peer with npm start's Node flags, ${when}`,
      tokenRequest(refs.peerWithFlags.url, PEER_CLIENT.id, PEER_CLIENT.secret),
      timing,
      refs.peerWithFlags.pid,
    );
  const floorRun = (when: string) =>
    measure(
      `${dialect}: Fastify constant JSON (floor), ${when}`,
      { url: refs.floor.url, connections: CONNECTIONS, duration: timing.duration },
      timing,
      refs.floor.pid,
    );
  const tokens = (service: Service, label: string, processes = 1) =>
    measure(
      label,
      tokenRequest(`${service.url}/oauth/token`, prepared.client.id, prepared.client.secret),
      // each worker gets as many warm-up requests as a single process does: the load is shared
      { ...timing, warmUp: timing.warmUp * processes },
      service.pid,
    );

  const npmReadyMs = await npmStartReadyMs(env, port, READY_RUNS);
  let service: Service = await startService(env, port);
  try {
    // at rest: no request since ready
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const restMb = service.rssMb();
    const peerBefore = await peerRun('before');
    const peerWithFlagsBefore = await peerWithFlagsRun('before');
    const token = await tokens(service, `${dialect}: POST /oauth/token`);
    const peerWithFlagsAfter = await peerWithFlagsRun('after');
    const peerAfter = await peerRun('after');
    const [tokenTogether, peerTogether] = (await measureTogether(
      [
        {
          label: `${dialect}: POST /oauth/token, loaded at the same time as the peer`,
          o: tokenRequest(`${service.url}/oauth/token`, prepared.client.id, prepared.client.secret),
          pid: service.pid,
        },
        {
          label: `${dialect}: the peer, loaded at the same time as the service`,
          o: tokenRequest(refs.peer.url, PEER_CLIENT.id, PEER_CLIENT.secret),
          pid: refs.peer.pid,
        },
      ],
      timing,
    )) as [Run, Run];
    const floorBefore = await floorRun('before userinfo');
    const userinfo = await measure(
      `${dialect}: GET /openid/userinfo`,
      {
        url: `${service.url}/openid/userinfo`,
        connections: CONNECTIONS,
        duration: timing.duration,
        headers: { authorization: `Bearer ${prepared.userinfoToken}` },
      },
      timing,
      service.pid,
    );
    const floorBetween = await floorRun('between userinfo and passkeys');
    const bearer = await accessToken(service.url, prepared.client.id, prepared.client.secret);
    const passkeys = await measure(
      `${dialect}: GET /2/passkey/${ORG}?eppn=<one user>`,
      {
        url: `${service.url}/2/passkey/${ORG}?eppn=${encodeURIComponent(`user42@${REALM}`)}`,
        connections: CONNECTIONS,
        duration: timing.duration,
        headers: { authorization: `Bearer ${bearer}` },
      },
      timing,
      service.pid,
    );
    const afterMb = service.rssMb();
    // what the service keeps once the load has stopped (it gives memory back after an idle second),
    // read while the floor's run after it goes on
    const settled = new Promise<number>((resolve) => setTimeout(() => resolve(service.rssMb()), SETTLE_MS));
    const floorAfter = await floorRun('after passkeys');
    const settledMb = await settled;
    const readyMs = service.readyMs;
    await service.stop();

    service = await startService({ ...env, WORKERS: '2' }, port);
    const tokens2 = await tokens(service, `${dialect}: POST /oauth/token, WORKERS=2`, 2);
    await service.stop();
    service = await startService(env, port);
    const tokens1 = await tokens(service, `${dialect}: POST /oauth/token, one process again`);
    return {
      token,
      peerAround: [peerBefore, peerAfter],
      peerWithFlagsAround: [peerWithFlagsBefore, peerWithFlagsAfter],
      together: { token: tokenTogether, peer: peerTogether },
      userinfo,
      passkeys,
      floorAround: [floorBefore, floorBetween, floorAfter],
      tokens2,
      tokens1,
      readyMs,
      npmReadyMs,
      restMb,
      afterMb,
      settledMb,
    };
  } finally {
    await service.stop();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
const mean = (runs: Run[]) => runs.reduce((sum, r) => sum + r.requestsPerSec, 0) / runs.length;
const ok = (r: Run) => r.errors === 0 && r.non2xx === 0;

function serviceRows(dialect: string, s: ServiceFigures, goal: { token: number; passkeys: number }): Figure[] {
  const [floorBefore, floorBetween, floorAfter] = s.floorAround as [Run, Run, Run];
  const peer = mean(s.peerAround);
  const peerWithFlags = mean(s.peerWithFlagsAround);
  const userinfoFloor = mean([floorBefore, floorBetween]);
  const passkeysFloor = mean([floorBetween, floorAfter]);
  const scale = s.tokens2.requestsPerSec / s.tokens1.requestsPerSec;
  return [
    ...s.peerAround.map((r, i) => ({
      target: `${dialect}: stock oidc-provider tokens (peer), ${i === 0 ? 'before' : 'after'}`,
      result: r,
      goal: '-',
    })),
    {
      target: `${dialect}: client_credentials tokens`,
      result: s.token,
      reference: { name: 'peer', runs: s.peerAround },
      ratio: s.token.requestsPerSec / peer,
      goal: `>= ${fixed(goal.token)} x peer`,
      met: ok(s.token) && s.token.requestsPerSec / peer >= goal.token,
    },
    ...s.peerWithFlagsAround.map((r, i) => ({
      target: `${dialect}: the peer with npm start's Node flags, ${i === 0 ? 'before' : 'after'}`,
      result: r,
      goal: '-',
    })),
    {
      target: `${dialect}: client_credentials tokens, to the peer with the same Node flags`,
      result: s.token,
      reference: { name: 'peer, same flags', runs: s.peerWithFlagsAround },
      ratio: s.token.requestsPerSec / peerWithFlags,
      goal: '-',
    },
    {
      target: `${dialect}: stock oidc-provider tokens (peer), loaded at the same time as the service`,
      result: s.together.peer,
      goal: '-',
    },
    {
      target: `${dialect}: client_credentials tokens, loaded at the same time as the peer`,
      result: s.together.token,
      reference: { name: 'peer, same time', runs: [s.together.peer] },
      ratio: s.together.token.requestsPerSec / s.together.peer.requestsPerSec,
      goal: '-',
    },
    {
      target: `${dialect}: userinfo`,
      result: s.userinfo,
      reference: { name: 'floor', runs: [floorBefore, floorBetween] },
      ratio: s.userinfo.requestsPerSec / userinfoFloor,
      goal: '>= 0.50 x floor, p99 <= 25 ms',
      met: ok(s.userinfo) && s.userinfo.requestsPerSec / userinfoFloor >= 0.5 && s.userinfo.p99 <= 25,
    },
    {
      target: `${dialect}: one user's passkeys`,
      result: s.passkeys,
      reference: { name: 'floor', runs: [floorBetween, floorAfter] },
      ratio: s.passkeys.requestsPerSec / passkeysFloor,
      goal: `>= ${fixed(goal.passkeys)} x floor`,
      met: ok(s.passkeys) && s.passkeys.requestsPerSec / passkeysFloor >= goal.passkeys,
    },
    {
      target: `${dialect}: tokens, WORKERS=2`,
      result: s.tokens2,
      reference: { name: 'one process', runs: [s.tokens1] },
      ratio: scale,
      goal: '>= 1.25 x one process',
      met: ok(s.tokens2) && scale >= 1.25,
    },
    { target: `${dialect}: tokens, one process right after`, result: s.tokens1, goal: '-' },
    {
      target: `${dialect}: ready after spawning npm start (ms; median of ${s.npmReadyMs.length}: ${s.npmReadyMs.join(', ')})`,
      value: String(median(s.npmReadyMs)),
      goal: '<= 1000 ms',
      met: median(s.npmReadyMs) <= 1000,
    },
    { target: `${dialect}: ready after spawning node directly (ms)`, value: String(s.readyMs), goal: '-' },
    { target: `${dialect}: RSS at rest (MB)`, value: String(s.restMb), goal: '<= 130 MB', met: s.restMb <= 130 },
    { target: `${dialect}: RSS right after the runs above (MB)`, value: String(s.afterMb), goal: '-' },
    {
      target: `${dialect}: RSS ${SETTLE_MS / 1000} s after the runs above (MB)`,
      value: String(s.settledMb),
      goal: '<= 170 MB',
      met: s.settledMb <= 170,
    },
  ];
}

function table(figures: Figure[]): string {
  const lines = [
    row([
      'target',
      'req/s',
      'p50 ms',
      'p99 ms',
      'errors, non-2xx',
      'CPU cores: server + load generator',
      'server CPU ms per request',
      'reference req/s (before / after)',
      'ratio',
      'goal',
      'met',
    ]),
    row(['---', '---', '---', '---', '---', '---', '---', '---', '---', '---', '---']),
  ];
  for (const f of figures) {
    const r = f.result;
    lines.push(
      row([
        f.target,
        r ? r.requestsPerSec : (f.value ?? '-'),
        r ? r.p50 : '-',
        r ? r.p99 : '-',
        r ? `${r.errors}, ${r.non2xx}` : '-',
        r?.cores ? `${fixed(r.cores.server)} + ${fixed(r.cores.load)}` : '-',
        r?.cores && r.requestsPerSec > 0 ? fixed((r.cores.server * 1000) / r.requestsPerSec) : '-',
        f.reference ? `${f.reference.name}: ${f.reference.runs.map((x) => x.requestsPerSec).join(' / ')}` : '-',
        // rounded down, so that a ratio shown at its goal meets it
        f.ratio === undefined ? '-' : (Math.floor(f.ratio * 100) / 100).toFixed(2),
        f.goal,
        f.met === undefined ? '-' : f.met ? 'yes' : 'no',
      ]),
    );
  }
  return lines.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const duration = quick ? 3 : 10;
  const started = new Date();
  console.log(`# comparison — ${machine()}; ${CONNECTIONS} connections, ${duration} s per target after a warm-up`);

  const floor = await startFloor();
  const peer = await startPeer();
  const peerWithFlags = await startPeer(startFlags());
  const refs: References = { floor, peer, peerWithFlags, timing: { duration, warmUp: quick ? 3 : WARM_UP_SECONDS } };
  let sqlite: ServiceFigures | undefined;
  let postgres: ServiceFigures | undefined;
  try {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-compare-'));
    try {
      sqlite = await serviceFigures('SQLite', join(dir, 'idp.sqlite'), 18101, refs);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    postgres = await withFreshPostgres('idp_bench_compare', (url) => serviceFigures('PostgreSQL', url, 18102, refs));
  } finally {
    await Promise.all([floor.close(), peer.close(), peerWithFlags.close()]);
  }

  const figures: Figure[] = [];
  if (sqlite) figures.push(...serviceRows('SQLite', sqlite, { token: 0.9, passkeys: 0.15 }));
  if (postgres) figures.push(...serviceRows('PostgreSQL', postgres, { token: 0.9, passkeys: 0.1 }));
  const out = table(figures);
  const head = `Run ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${machine()}; load average at the end ${loadavg()
    .map((x) => x.toFixed(1))
    .join(
      ' ',
    )}. autocannon (in the benchmark's own process), ${CONNECTIONS} connections, ${duration} s per run after a warm-up of ${refs.timing.warmUp} s with the same requests (V8 is still compiling a fresh process's hot code for several seconds of load; ${refs.timing.warmUp * 2} s for WORKERS=2, whose two processes share the load); each server in its own process, the service with the flags of \`npm start\` (${startFlags().join(' ')}). Each ratio is to the mean of the reference runs right before and after it (the peer for tokens, the floor for userinfo and passkeys; WORKERS=2 to a one-process run right after it). The peer also runs a second time with the Node flags of \`npm start\`, to show what the service's memory limits cost the library itself; that ratio has no goal. Then the service and the peer (Node's defaults) are loaded both at once, ${CONNECTIONS} connections each, after a warm-up together: both share the two cores and whatever drift the machine's speed has, so their ratio shows what a token costs each (CPU cores then are each server's own, the load generator's for both); it has no goal either. CPU cores: CPU seconds per second of the server's processes (all threads, workers included) and of the load generator during the run, on ${machine().split(' ')[0]} cores.${quick ? ' QUICK RUN: not reference figures.' : ''}`;
  console.log(`\n${head}\n\n${out}`);
  if (args.includes('--no-write')) return;
  // Other benchmarks keep their figures in the same file under keys of their own (signin, saml, invite).
  await mergeResults({
    started: started.toISOString(),
    machine: machine(),
    connections: CONNECTIONS,
    duration,
    warmUp: refs.timing.warmUp,
    quick,
    figures,
  });
  console.log('written to bench/results.json');
  if (quick) return;
  const readme = new URL('../README.md', import.meta.url);
  const text = readFileSync(readme, 'utf8');
  const start = text.indexOf('<!-- bench:start -->');
  const end = text.indexOf('<!-- bench:end -->');
  if (start < 0 || end < start) throw new Error('README.md has no <!-- bench:start --> ... <!-- bench:end --> section');
  writeFileSync(readme, `${text.slice(0, start)}<!-- bench:start -->\n${head}\n\n${out}\n${text.slice(end)}`);
  console.log('README.md table updated');
}
