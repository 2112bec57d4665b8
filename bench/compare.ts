// npm run bench [-- --quick] [--no-write]: the comparison, in one run. The Fastify constant-JSON
// floor, a stock oidc-provider (bench/peer-server.ts: in-memory adapter, ES256 JWT access tokens)
// and this service on SQLite and on PostgreSQL, one process and WORKERS=2: client_credentials
// tokens, OIDC userinfo and one user's passkeys (10 passkeys, 20,000 in the organization), each with
// 50 connections; start-up time and memory. Prints the table with each figure's ratios to the floor
// and to the peer beside its goal, writes bench/results.json, and (full runs) the README table.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.ts';
import {
  load,
  machine,
  row,
  SECRET,
  startFlags,
  startFloor,
  startPeer,
  startService,
  withFreshPostgres,
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
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

interface Figure {
  target: string;
  result?: LoadResult;
  /** a figure that is not a load run (milliseconds, MB) */
  value?: string;
  floorRatio?: number;
  peerRatio?: number;
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

/** One answer must be 200 before a load run counts; then a warm-up, then the run. */
async function measure(label: string, o: LoadOptions, duration: number): Promise<LoadResult> {
  const check = await fetch(o.url, { method: o.method ?? 'GET', headers: o.headers, body: o.body });
  if (check.status !== 200) throw new Error(`${label}: ${check.status} ${(await check.text()).slice(0, 200)}`);
  await load('warm-up', { ...o, duration: Math.min(3, duration) });
  const result = await load(label, { ...o, duration });
  console.log(
    `  ${label}: ${result.requestsPerSec} req/s, p50 ${result.p50} ms, p99 ${result.p99} ms, errors ${result.errors}, non-2xx ${result.non2xx}`,
  );
  return result;
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

async function serviceFigures(
  dialect: 'SQLite' | 'PostgreSQL',
  databaseUrl: string,
  port: number,
  duration: number,
): Promise<{
  token: LoadResult;
  userinfo: LoadResult;
  passkeys: LoadResult;
  tokens2?: LoadResult;
  readyMs: number;
  restMb: number;
  afterMb: number;
  settledMb: number;
}> {
  console.log(`\n# ${dialect}: seeding ${PASSKEYS} passkeys over ${USERS} users`);
  const publicUrl = `http://127.0.0.1:${port}`;
  const prepared = await prepare(databaseUrl, publicUrl);
  const env = { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, ACCESS_TOKEN_TTL: '3600' };
  let service: Service = await startService(env, port);
  try {
    // at rest: no request since ready
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const restMb = service.rssMb();
    const token = await measure(
      `${dialect}: POST /oauth/token`,
      tokenRequest(`${service.url}/oauth/token`, prepared.client.id, prepared.client.secret),
      duration,
    );
    const userinfo = await measure(
      `${dialect}: GET /openid/userinfo`,
      {
        url: `${service.url}/openid/userinfo`,
        connections: CONNECTIONS,
        duration,
        headers: { authorization: `Bearer ${prepared.userinfoToken}` },
      },
      duration,
    );
    const bearer = await accessToken(service.url, prepared.client.id, prepared.client.secret);
    const passkeys = await measure(
      `${dialect}: GET /2/passkey/${ORG}?eppn=<one user>`,
      {
        url: `${service.url}/2/passkey/${ORG}?eppn=${encodeURIComponent(`user42@${REALM}`)}`,
        connections: CONNECTIONS,
        duration,
        headers: { authorization: `Bearer ${bearer}` },
      },
      duration,
    );
    const afterMb = service.rssMb();
    // what the service keeps once the load has stopped (it gives memory back after an idle second)
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    const settledMb = service.rssMb();
    const readyMs = service.readyMs;
    await service.stop();

    service = await startService({ ...env, WORKERS: '2' }, port);
    const tokens2 = await measure(
      `${dialect}: POST /oauth/token, WORKERS=2`,
      tokenRequest(`${service.url}/oauth/token`, prepared.client.id, prepared.client.secret),
      duration,
    );
    return { token, userinfo, passkeys, tokens2, readyMs, restMb, afterMb, settledMb };
  } finally {
    await service.stop();
  }
}

const mean = (a: LoadResult, b: LoadResult) => (a.requestsPerSec + b.requestsPerSec) / 2;
const fixed = (n: number) => n.toFixed(2);

function table(figures: Figure[]): string {
  const lines = [
    row(['target', 'req/s', 'p50 ms', 'p99 ms', 'errors, non-2xx', 'x floor', 'x peer', 'goal', 'met']),
    row(['---', '---', '---', '---', '---', '---', '---', '---', '---']),
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
        f.floorRatio === undefined ? '-' : fixed(f.floorRatio),
        f.peerRatio === undefined ? '-' : fixed(f.peerRatio),
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

  const floorRun = async (label: string) => {
    const server = await startFloor();
    try {
      return await measure(label, { url: server.url, connections: CONNECTIONS, duration }, duration);
    } finally {
      await server.close();
    }
  };
  const peerRun = async (label: string) => {
    const server = await startPeer();
    try {
      return await measure(label, tokenRequest(server.url, PEER_CLIENT.id, PEER_CLIENT.secret), duration);
    } finally {
      await server.close();
    }
  };
  const floorStart = await floorRun('Fastify constant JSON (floor)');
  const peerStart = await peerRun('stock oidc-provider: POST /oauth/token (peer)');

  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-compare-'));
  let sqlite;
  try {
    sqlite = await serviceFigures('SQLite', join(dir, 'idp.sqlite'), 18101, duration);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const postgres = await withFreshPostgres('idp_bench_compare', (url) =>
    serviceFigures('PostgreSQL', url, 18102, duration),
  );

  // The floor and the peer again at the end: the machine is shared, so ratios use the mean of both runs.
  const peerEnd = await peerRun('stock oidc-provider: POST /oauth/token (peer, again)');
  const floorEnd = await floorRun('Fastify constant JSON (floor, again)');

  const floor = mean(floorStart, floorEnd);
  const peer = mean(peerStart, peerEnd);
  const figures: Figure[] = [
    {
      target: 'Fastify constant JSON (floor), first',
      result: floorStart,
      floorRatio: floorStart.requestsPerSec / floor,
      goal: '-',
    },
    {
      target: 'Fastify constant JSON (floor), last',
      result: floorEnd,
      floorRatio: floorEnd.requestsPerSec / floor,
      goal: '-',
    },
    {
      target: 'stock oidc-provider tokens (peer), first',
      result: peerStart,
      floorRatio: peerStart.requestsPerSec / floor,
      peerRatio: peerStart.requestsPerSec / peer,
      goal: '-',
    },
    {
      target: 'stock oidc-provider tokens (peer), last',
      result: peerEnd,
      floorRatio: peerEnd.requestsPerSec / floor,
      peerRatio: peerEnd.requestsPerSec / peer,
      goal: '-',
    },
  ];
  const services = [
    ['SQLite', sqlite, { token: 1.0, passkeys: 0.15 }],
    ['PostgreSQL', postgres, { token: 0.9, passkeys: 0.1 }],
  ] as const;
  for (const [dialect, s, goal] of services) {
    if (!s) continue;
    const ok = (r: LoadResult) => r.errors === 0 && r.non2xx === 0;
    figures.push(
      {
        target: `${dialect}: client_credentials tokens`,
        result: s.token,
        floorRatio: s.token.requestsPerSec / floor,
        peerRatio: s.token.requestsPerSec / peer,
        goal: `>= ${fixed(goal.token)} x peer`,
        met: ok(s.token) && s.token.requestsPerSec / peer >= goal.token,
      },
      {
        target: `${dialect}: userinfo`,
        result: s.userinfo,
        floorRatio: s.userinfo.requestsPerSec / floor,
        goal: '>= 0.50 x floor, p99 <= 25 ms',
        met: ok(s.userinfo) && s.userinfo.requestsPerSec / floor >= 0.5 && s.userinfo.p99 <= 25,
      },
      {
        target: `${dialect}: one user's passkeys`,
        result: s.passkeys,
        floorRatio: s.passkeys.requestsPerSec / floor,
        goal: `>= ${fixed(goal.passkeys)} x floor`,
        met: ok(s.passkeys) && s.passkeys.requestsPerSec / floor >= goal.passkeys,
      },
    );
    if (s.tokens2) {
      const scale = s.tokens2.requestsPerSec / s.token.requestsPerSec;
      figures.push({
        target: `${dialect}: tokens, WORKERS=2 (${fixed(scale)} x one process)`,
        result: s.tokens2,
        floorRatio: s.tokens2.requestsPerSec / floor,
        peerRatio: s.tokens2.requestsPerSec / peer,
        goal: '>= 1.6 x one process',
        met: ok(s.tokens2) && scale >= 1.6,
      });
    }
    figures.push(
      {
        target: `${dialect}: ready after spawn (ms)`,
        value: String(s.readyMs),
        goal: '<= 1000 ms',
        met: s.readyMs <= 1000,
      },
      { target: `${dialect}: RSS at rest (MB)`, value: String(s.restMb), goal: '<= 130 MB', met: s.restMb <= 130 },
      { target: `${dialect}: RSS right after the runs above (MB)`, value: String(s.afterMb), goal: '-' },
      {
        target: `${dialect}: RSS ${SETTLE_MS / 1000} s after the runs above (MB)`,
        value: String(s.settledMb),
        goal: '<= 170 MB',
        met: s.settledMb <= 170,
      },
    );
  }
  const out = table(figures);
  const head = `Run ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${machine()}; load average at the end ${loadavg()
    .map((x) => x.toFixed(1))
    .join(
      ' ',
    )}. autocannon, ${CONNECTIONS} connections, ${duration} s per target after a warm-up; each server in its own process, the service with the flags of \`npm start\` (${startFlags().join(' ')}); ratios against the mean of the first and last runs of the floor (${Math.round(floor)} req/s) and of the peer (${Math.round(peer)} req/s).${quick ? ' QUICK RUN: not reference figures.' : ''}`;
  console.log(`\n${head}\n\n${out}`);
  if (args.includes('--no-write')) return;
  writeFileSync(
    new URL('./results.json', import.meta.url),
    `${JSON.stringify({ started: started.toISOString(), machine: machine(), connections: CONNECTIONS, duration, quick, floor, peer, figures }, null, 2)}\n`,
  );
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
