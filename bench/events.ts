// Events: what the outbox costs the request that causes an event, and how fast the delivery job
// empties it. On SQLite and PostgreSQL, the compiled service deletes passkeys through the passkey
// API (DELETE /2/passkey/<org>/<id>, 16 at a time) first with no webhook, then with a webhook to a
// local receiver; latency and throughput of the deletions side by side, and events delivered per
// second from the first deletion until the receiver has them all.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/index.ts';
import { addOrganization, addUser } from '../src/directory/index.ts';
import { insertPasskeys } from '../src/store/passkeys.ts';
import { passkeyRow } from '../test/passkey-admin/fixtures.ts';
import {
  cli,
  machine,
  row,
  runLine,
  SECRET,
  startFlags,
  startService,
  withFreshPostgres,
  writeResultsSection,
} from './lib.ts';

/** The receiver is on loopback over plain http: allowed while PUBLIC_URL is on localhost. */
const LOCAL = { PUBLIC_URL: 'http://127.0.0.1:8080' };

const USERS = 200;
const CONCURRENCY = 16;

async function seed(databaseUrl: string, perPhase: number): Promise<number[]> {
  const store = await openStore(databaseUrl);
  try {
    await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
    const users: number[] = [];
    for (let i = 0; i < USERS; i++)
      users.push((await addUser(store, { orgId: 1, eppn: `u${i}@example.org`, name: `U ${i}` })).id);
    const ids: number[] = [];
    await store.db.transaction().execute(async (trx) => {
      for (let start = 0; start < 2 * perPhase; start += 500) {
        const rows = [];
        for (let i = start; i < Math.min(2 * perPhase, start + 500); i++)
          rows.push(passkeyRow(users[i % USERS]!, 1, { label: `key ${i}` }));
        ids.push(...(await insertPasskeys(trx, rows)));
      }
    });
    return ids;
  } finally {
    await store.close();
  }
}

interface Phase {
  label: string;
  perSecond: number;
  p50: number;
  p99: number;
  /** events delivered per second, first deletion to last delivery */
  eventsPerSecond?: number;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

async function deleteAll(url: string, token: string, ids: number[]): Promise<{ ms: number; latencies: number[] }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const t = performance.now();
        const res = await fetch(`${url}/2/passkey/1/${id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${token}` },
        });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`DELETE answered ${res.status}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { ms: performance.now() - started, latencies: latencies.sort((a, b) => a - b) };
}

async function measure(label: string, databaseUrl: string, port: number, perPhase: number): Promise<Phase[]> {
  const ids = await seed(databaseUrl, perPhase);
  const client = JSON.parse(
    await cli(
      databaseUrl,
      ['client', 'add', '--name', 'bench', '--scopes', 'passkey.delete', '--orgs', '1', '--json'],
      LOCAL,
    ),
  );
  let received = 0;
  let lastAt = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      lastAt = performance.now();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const service = await startService({ DATABASE_URL: databaseUrl, IDP_SECRET: SECRET }, port);
  try {
    const tokenRes = await fetch(`${service.url}/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials&scope=passkey.delete',
    });
    const { access_token: token } = (await tokenRes.json()) as { access_token: string };
    // warm-up: a few deletions from the first half
    await deleteAll(service.url, token, ids.slice(0, 200));
    const without = await deleteAll(service.url, token, ids.slice(200, perPhase));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    await cli(
      databaseUrl,
      ['webhook', 'add', '--org', '1', '--url', receiverUrl, '--events', 'passkey.deleted'],
      LOCAL,
    );
    const withEvents = await deleteAll(service.url, token, ids.slice(perPhase));
    const started = performance.now() - withEvents.ms;
    const deadline = performance.now() + 120_000;
    while (received < perPhase && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const eventsPerSecond = Math.round(received / ((lastAt - started) / 1000));
    const phase = (name: string, r: { ms: number; latencies: number[] }, n: number): Phase => ({
      label: `${label}: ${name}`,
      perSecond: Math.round(n / (r.ms / 1000)),
      p50: Math.round(percentile(r.latencies, 0.5) * 10) / 10,
      p99: Math.round(percentile(r.latencies, 0.99) * 10) / 10,
    });
    return [
      phase('DELETE, no webhook', without, perPhase - 200),
      { ...phase('DELETE, a webhook for passkey.deleted', withEvents, perPhase), eventsPerSecond },
    ];
  } finally {
    const exited = new Promise((r) => service.child.once('exit', r));
    service.child.kill();
    await exited;
    receiver.close();
  }
}

export async function main(args: string[]) {
  const perPhase = args.includes('--quick') ? 1000 : 4000;
  const head = `The compiled service (flags of npm start: ${startFlags().join(' ')}), ${CONCURRENCY} concurrent DELETE /2/passkey/1/<id> calls over ${USERS} users; ${perPhase - 200} deletions without a webhook (after 200 to warm up), then ${perPhase} with a webhook for passkey.deleted to a receiver in the benchmark process (answers 200 at once). Events/s: deliveries received per second from the first deletion of the second phase to the last delivery.`;
  console.log(`# events benchmark — ${machine()}\n# ${head}\n`);
  const results: Phase[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-events-'));
  try {
    results.push(...(await measure('SQLite', join(dir, 'idp.sqlite'), 18091, perPhase)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pg = await withFreshPostgres('idp_bench_events', (url) => measure('PostgreSQL', url, 18092, perPhase));
  if (pg) results.push(...pg);
  const lines = [
    row(['target', 'deletions/s', 'p50 ms', 'p99 ms', 'events delivered/s']),
    row(['---', '---', '---', '---', '---']),
    ...results.map((r) => row([r.label, r.perSecond, r.p50, r.p99, r.eventsPerSecond ?? '-'])),
  ];
  const verdicts: string[] = [];
  for (let i = 0; i + 1 < results.length; i += 2) {
    const [off, on] = [results[i]!, results[i + 1]!];
    const slower = 1 - on.perSecond / off.perSecond;
    verdicts.push(
      `${off.label.split(':')[0]}: with events ${(slower * 100).toFixed(1)}% ${slower >= 0 ? 'slower' : 'faster'} (goal: under 10% slower) — ${slower < 0.1 ? 'met' : 'MISSED'}`,
    );
  }
  const table = lines.join('\n');
  console.log(table);
  for (const v of verdicts) console.log(`# ${v}`);
  if (!args.includes('--quick') && !args.includes('--no-write')) {
    writeResultsSection(
      '## Events',
      ['## Events', '', runLine(), head, '', table, '', ...verdicts.map((v) => `- ${v}`), ''].join('\n'),
    );
    console.log('written to bench/RESULTS.md');
  }
}
