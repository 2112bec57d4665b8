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
/** deletions per round and organization */
const ROUND = 500;
const WARM_UP = 200;

/** Two organizations alike, USERS users and `perOrg` passkeys each; the passkey ids per organization. */
async function seed(databaseUrl: string, perOrg: number): Promise<[number[], number[]]> {
  const store = await openStore(databaseUrl);
  try {
    const ids: [number[], number[]] = [[], []];
    for (const org of [1, 2]) {
      await addOrganization(store, { id: org, realm: `org${org}.example`, name: `Org ${org}` });
      const users: number[] = [];
      for (let i = 0; i < USERS; i++)
        users.push((await addUser(store, { orgId: org, eppn: `u${i}@org${org}.example`, name: `U ${i}` })).id);
      await store.db.transaction().execute(async (trx) => {
        for (let start = 0; start < perOrg; start += 500) {
          const rows = [];
          for (let i = start; i < Math.min(perOrg, start + 500); i++)
            rows.push(passkeyRow(users[i % USERS]!, org, { label: `key ${i}` }));
          ids[org - 1]!.push(...(await insertPasskeys(trx, rows)));
        }
      });
    }
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

async function deleteAll(
  url: string,
  token: string,
  org: number,
  ids: number[],
): Promise<{ ms: number; latencies: number[] }> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < ids.length) {
        const id = ids[next++]!;
        const t = performance.now();
        const res = await fetch(`${url}/2/passkey/${org}/${id}`, {
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

/**
 * Rounds of deletions alternate between the organization without a webhook and the one with one,
 * so both see the same machine (its speed drifts over a run); the job delivering the second one's
 * events runs through the first one's rounds too, which counts against the goal, not for it.
 */
async function measure(label: string, databaseUrl: string, port: number, rounds: number): Promise<Phase[]> {
  const ids = await seed(databaseUrl, rounds * ROUND + WARM_UP);
  const client = JSON.parse(
    await cli(
      databaseUrl,
      ['client', 'add', '--name', 'bench', '--scopes', 'passkey.delete', '--orgs', '1,2', '--json'],
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
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  await cli(databaseUrl, ['webhook', 'add', '--org', '2', '--url', receiverUrl, '--events', 'passkey.deleted'], LOCAL);
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
    await deleteAll(service.url, token, 1, ids[0].slice(0, WARM_UP));
    await deleteAll(service.url, token, 2, ids[1].slice(0, WARM_UP));
    const totals = [
      { ms: 0, latencies: [] as number[] },
      { ms: 0, latencies: [] as number[] },
    ];
    const started = performance.now();
    for (let round = 0; round < rounds; round++)
      for (const org of [1, 2]) {
        const slice = ids[org - 1]!.slice(WARM_UP + round * ROUND, WARM_UP + (round + 1) * ROUND);
        const r = await deleteAll(service.url, token, org, slice);
        totals[org - 1]!.ms += r.ms;
        totals[org - 1]!.latencies.push(...r.latencies);
      }
    const expected = WARM_UP + rounds * ROUND;
    const deadline = performance.now() + 120_000;
    while (received < expected && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const phase = (name: string, r: { ms: number; latencies: number[] }): Phase => {
      const sorted = [...r.latencies].sort((a, b) => a - b);
      return {
        label: `${label}: ${name}`,
        perSecond: Math.round(sorted.length / (r.ms / 1000)),
        p50: Math.round(percentile(sorted, 0.5) * 10) / 10,
        p99: Math.round(percentile(sorted, 0.99) * 10) / 10,
      };
    };
    return [
      phase('DELETE, organization without a webhook', totals[0]!),
      {
        ...phase('DELETE, organization with a webhook for passkey.deleted', totals[1]!),
        eventsPerSecond: Math.round((received - WARM_UP) / ((lastAt - started) / 1000)),
      },
    ];
  } finally {
    const exited = new Promise((r) => service.child.once('exit', r));
    service.child.kill();
    await exited;
    receiver.close();
  }
}

export async function main(args: string[]) {
  const rounds = args.includes('--quick') ? 2 : 8;
  const head = `The compiled service (flags of npm start: ${startFlags().join(' ')}); two organizations of ${USERS} users, the second with a webhook for passkey.deleted to a receiver in the benchmark process (answers 200 at once); ${CONCURRENCY} concurrent DELETE /2/passkey/<org>/<id> calls in ${rounds} rounds of ${ROUND} per organization, alternating (after ${WARM_UP} each to warm up). Events/s: deliveries received per second from the first measured deletion to the last delivery (the rounds of the organization without a webhook included, so about half the rate a steady stream of events would reach).`;
  console.log(`# events benchmark — ${machine()}\n# ${head}\n`);
  const results: Phase[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-events-'));
  try {
    results.push(...(await measure('SQLite', join(dir, 'idp.sqlite'), 18091, rounds)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pg = await withFreshPostgres('idp_bench_events', (url) => measure('PostgreSQL', url, 18092, rounds));
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
