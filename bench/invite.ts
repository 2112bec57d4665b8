// npm run bench -- invite [--users <n>] [--workers <n>] [--sqlite|--postgres] [--write]
// Invitations by e-mail (docs/email.md): an organization of <n> users (default 100,000, each with an
// address) invited with `invite --org <id>` (the admin CLI's command, in this process), then the
// compiled service (the flags of `npm start`, a child process) delivering the queued messages
// through SMTP_URL to a real SMTP server (npm smtp-server, in this process, counting what it
// receives). Goal: 500 messages delivered per second or more, on SQLite and PostgreSQL; the passkey
// API (one user's passkeys, with a client's token) is asked every 100 ms meanwhile, to show the
// service answering throughout. --write puts the figures
// in bench/RESULTS.md and bench/results.json (under "invite").
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { SMTPServer } from 'smtp-server';
import { keyring } from '../src/crypto.ts';
import { createClient } from '../src/clients/index.ts';
import { openStore } from '../src/store/index.ts';
import { accessToken } from './passkeys.ts';
import {
  cli,
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

const GOAL_PER_S = 500;
const ORG = 1;
const REALM = 'invite.example.org';
const FROM = 'IdP <no-reply@invite.example.org>';
const DELIVERY_TIMEOUT_MS = 15 * 60_000;

interface Options {
  users: number;
  /** WORKERS of the service: each runs a delivery job */
  workers: number;
  dbs: ('sqlite' | 'postgres')[];
  write: boolean;
}

interface Figures {
  database: string;
  users: number;
  queued: number;
  queue_s: number;
  delivered: number;
  deliver_s: number;
  per_s: number;
  api_p50_ms: number;
  api_p99_ms: number;
  api_max_ms: number;
  api_failed: number;
}

function parseOptions(args: string[]): Options {
  const at = args.indexOf('--users');
  const users = at >= 0 ? Number(args[at + 1]) : 100_000;
  if (!Number.isSafeInteger(users) || users < 1) throw new Error('--users must be a positive number');
  const w = args.indexOf('--workers');
  const workers = w >= 0 ? Number(args[w + 1]) : 1;
  if (!Number.isSafeInteger(workers) || workers < 1) throw new Error('--workers must be a positive number');
  const only = args.includes('--sqlite') ? 'sqlite' : args.includes('--postgres') ? 'postgres' : undefined;
  return { users, workers, dbs: only ? [only] : ['sqlite', 'postgres'], write: args.includes('--write') };
}

/** An SMTP server on a loopback port that takes every message and counts it. */
async function countingSmtp(): Promise<{ port: number; count(): number; stop(): Promise<void> }> {
  let received = 0;
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    // no limit on connections or messages: the service's pool decides how many it opens
    onData(stream, _session, callback) {
      stream.on('data', () => {});
      stream.on('end', () => {
        received++;
        callback();
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return { port, count: () => received, stop: () => new Promise<void>((r) => server.close(() => r())) };
}

/** The organization and its users, written in multi-row inserts (not what is measured), and a client of the passkey API. */
async function seed(url: string, users: number): Promise<{ clientId: string; secret: string }> {
  const store = await openStore(url);
  try {
    await cli(url, ['org', 'add', '--id', String(ORG), '--realm', REALM, '--name', 'Invitations']);
    const now = Date.now();
    for (let i = 0; i < users; i += 1000) {
      const rows = Array.from({ length: Math.min(1000, users - i) }, (_, j) => ({
        sub: randomUUID(),
        org_id: ORG,
        eppn: `user${i + j}@${REALM}`,
        name: `User ${i + j}`,
        email: `user${i + j}@${REALM}`,
        nin: null,
        password_hash: null,
        photo_handle: null,
        created_at: now,
        updated_at: now,
      }));
      await store.db.insertInto('users').values(rows).execute();
    }
    const { client, secret } = await createClient(store, keyring(SECRET), {
      name: 'Passkey API during the invitations',
      scopes: ['passkey.read'],
      orgs: [ORG],
    });
    return { clientId: client.clientId, secret: secret! };
  } finally {
    await store.close();
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! : 0;

async function measure(database: string, url: string, port: number, o: Options): Promise<Figures> {
  const apiClient = await seed(url, o.users);
  const smtp = await countingSmtp();
  const env = {
    DATABASE_URL: url,
    IDP_SECRET: SECRET,
    SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
    SMTP_FROM: FROM,
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    WORKERS: String(o.workers),
  };
  try {
    const queueStart = performance.now();
    const out = await cli(url, ['invite', '--org', String(ORG), '--json'], env);
    const queue_s = (performance.now() - queueStart) / 1000;
    const queued = (JSON.parse(out) as { queued: number }).queued;
    console.log(`${database}: ${queued} invitations queued in ${queue_s.toFixed(1)} s`);
    const prof = process.env.BENCH_CPU_PROF;
    const service = await startService(env, port, [
      ...startFlags(),
      ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : []),
    ]);
    const deliverStart = performance.now();
    const token = await accessToken(service.url, apiClient.clientId, apiClient.secret);
    const passkeysOfOne = `${service.url}/2/passkey/${ORG}?eppn=${encodeURIComponent(`user0@${REALM}`)}`;
    const latencies: number[] = [];
    let failed = 0;
    let probing = true;
    const probe = (async () => {
      while (probing) {
        const t = performance.now();
        const ok = await fetch(passkeysOfOne, { headers: { authorization: `Bearer ${token}` } }).then(
          (r) => r.ok,
          () => false,
        );
        latencies.push(performance.now() - t);
        if (!ok) failed++;
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    let last = 0;
    try {
      while (smtp.count() < queued) {
        if (performance.now() - deliverStart > DELIVERY_TIMEOUT_MS) break;
        await new Promise((r) => setTimeout(r, 100));
        if (smtp.count() - last >= 10_000 || smtp.count() === queued) {
          last = smtp.count();
          console.log(`  ${last} delivered after ${((performance.now() - deliverStart) / 1000).toFixed(1)} s`);
        }
      }
    } finally {
      probing = false;
      await probe;
      await service.stop();
    }
    const deliver_s = (performance.now() - deliverStart) / 1000;
    const delivered = smtp.count();
    latencies.sort((a, b) => a - b);
    const round = (x: number) => Math.round(x * 10) / 10;
    return {
      database,
      users: o.users,
      queued,
      queue_s: round(queue_s),
      delivered,
      deliver_s: round(deliver_s),
      per_s: Math.round(delivered / deliver_s),
      api_p50_ms: round(percentile(latencies, 0.5)),
      api_p99_ms: round(percentile(latencies, 0.99)),
      api_max_ms: round(latencies.at(-1) ?? 0),
      api_failed: failed,
    };
  } finally {
    await smtp.stop();
  }
}

function table(figures: Figures[]): string {
  return [
    row([
      'database',
      'queued (invite)',
      'delivered',
      'delivery rate',
      'goal',
      'passkey API p50 / p99 / max ms, failed',
    ]),
    row(['---', '---', '---', '---', '---', '---']),
    ...figures.map((f) =>
      row([
        f.database,
        `${f.queued.toLocaleString('en')} in ${f.queue_s} s (${Math.round(f.queued / f.queue_s)}/s)`,
        `${f.delivered.toLocaleString('en')} in ${f.deliver_s} s`,
        `${f.per_s}/s`,
        `>= ${GOAL_PER_S}/s: ${f.per_s >= GOAL_PER_S && f.delivered === f.queued ? 'met' : 'MISSED'}`,
        `${f.api_p50_ms} / ${f.api_p99_ms} / ${f.api_max_ms}, ${f.api_failed}`,
      ]),
    ),
  ].join('\n');
}

async function writeJson(figures: object): Promise<void> {
  await mergeResults({ invite: figures });
}

export async function main(args: string[]): Promise<void> {
  const o = parseOptions(args);
  const figures: Figures[] = [];
  if (o.dbs.includes('sqlite')) {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-invite-'));
    try {
      figures.push(await measure('SQLite', join(dir, 'idp.sqlite'), 18121, o));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (o.dbs.includes('postgres')) {
    const f = await withFreshPostgres('idp_bench_invite', (url) => measure('PostgreSQL', url, 18122, o));
    if (f) figures.push(f);
  }
  const result = table(figures);
  console.log(`\n${runLine()}\n\n${result}`);
  if (!o.write) return;
  await writeJson({ started: new Date().toISOString(), machine: machine(), goal_per_s: GOAL_PER_S, figures });
  writeResultsSection(
    '## Invitations by e-mail',
    [
      '## Invitations by e-mail',
      '',
      runLine(),
      `\`npm run bench -- invite --users ${o.users} --workers ${o.workers}\`: ${o.users.toLocaleString('en')} users with an address invited with \`invite --org <id>\` (the admin CLI's command), then delivered by the compiled service (flags of \`npm start\`, a child process) through SMTP_URL to a real SMTP server (npm smtp-server in the benchmark's process, counting). The delivery rate is from the service's start to the last message received; the passkey API (one user's passkeys, with a client's token) was asked every 100 ms meanwhile.`,
      '',
      result,
      '',
    ].join('\n'),
  );
  console.log('written to bench/RESULTS.md and bench/results.json');
}
