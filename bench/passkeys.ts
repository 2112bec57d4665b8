// npm run bench -- passkeys [--quick] [--sqlite|--postgres] [--no-write] [--service-node-options="..."]
// The passkey administration API over one large organization, on SQLite and PostgreSQL:
// seeding rate, first page vs a deep page (keyset pagination must not slow down with depth),
// a full walk following Link headers with the service's peak RSS, and one user's list under
// 50 connections beside the Fastify constant-JSON floor. Figures go to bench/RESULTS.md, query plans to bench/PLANS.md.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import type { Insertable } from 'kysely';
import { keyring } from '../src/crypto.ts';
import { openStore, type Store } from '../src/store/index.ts';
import { insertUsers } from '../src/store/directory.ts';
import { insertPasskeys } from '../src/store/passkeys.ts';
import type { PasskeysTable } from '../src/store/schema.ts';
import { addOrganization } from '../src/directory/index.ts';
import { createClient } from '../src/clients/index.ts';
import {
  load,
  machine,
  printLoad,
  row,
  runLine,
  startFlags,
  startFloor,
  startService,
  SECRET,
  writeResultsSection,
  type LoadResult,
  type Service,
} from './lib.ts';

const PG_ADMIN = process.env.BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
export const REALM = 'bench.example.org';
export const ORG = 1;
const PER_PAGE = 1000;
const LATENCY_SAMPLES = 200;
const BATCH = 1000; // rows per INSERT (14 columns: well under both dialects' parameter limits)
const BATCHES_PER_TRANSACTION = 20;
const AAGUIDS = [
  '00000000-0000-0000-0000-000000000000',
  'cb69481e-8ff7-4039-93ec-0a2729a154a8',
  'adce0002-35bc-c60a-648b-0b25f1f05503',
  'fbfc3007-154e-4ecc-8c0b-6e020557d7bd',
];

interface DialectResult {
  dialect: 'sqlite' | 'postgres';
  passkeys: number;
  users: number;
  seedSeconds: number;
  seedRate: number;
  plan: string;
  usesOrgIndex: boolean;
  first: { p50: number; p99: number };
  deep: { p50: number; p99: number };
  walkSeconds: number;
  walkCount: number;
  walkPages: number;
  walkExactlyOnce: boolean;
  rssStartMb: number;
  rssPeakMb: number;
  tuned: Walk;
  oneUser: LoadResult;
  floor: LoadResult;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function ms(n: number): number {
  return Math.round(n * 100) / 100;
}

async function freshDatabase(dialect: 'sqlite' | 'postgres'): Promise<{ url: string; drop(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-'));
    return { url: join(dir, 'idp.sqlite'), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `idp_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(PG_ADMIN);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: PG_ADMIN });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/** users then passkeys, multi-row inserts in transactions; passkey i belongs to user i mod users. */
export async function seed(
  store: Store,
  passkeys: number,
  users: number,
): Promise<{ seconds: number; secret: string; clientId: string }> {
  const keys = keyring(SECRET);
  await addOrganization(store, { id: ORG, realm: REALM, name: 'Benchmark University' });
  const { client, secret } = await createClient(store, keys, {
    name: 'bench admin',
    scopes: ['passkey.read', 'passkey.delete'],
    orgs: [ORG],
  });
  const started = performance.now();
  const userIds: number[] = [];
  const now = Date.now();
  for (let start = 0; start < users; start += BATCH * BATCHES_PER_TRANSACTION) {
    await store.db.transaction().execute(async (trx) => {
      for (let b = start; b < Math.min(users, start + BATCH * BATCHES_PER_TRANSACTION); b += BATCH) {
        const rows = [];
        for (let i = b; i < Math.min(users, b + BATCH); i++) {
          rows.push({
            sub: randomUUID(),
            org_id: ORG,
            eppn: `user${i}@${REALM}`,
            name: `User ${i}`,
            email: null,
            nin: null,
            password_hash: null,
            photo_handle: null,
            created_at: now,
            updated_at: now,
          });
        }
        userIds.push(...(await insertUsers(trx, rows)));
      }
    });
  }
  const publicKey = new Uint8Array(randomBytes(77));
  const base = Date.UTC(2024, 0, 1);
  for (let start = 0; start < passkeys; start += BATCH * BATCHES_PER_TRANSACTION) {
    await store.db.transaction().execute(async (trx) => {
      for (let b = start; b < Math.min(passkeys, start + BATCH * BATCHES_PER_TRANSACTION); b += BATCH) {
        const rows: Insertable<PasskeysTable>[] = [];
        for (let i = b; i < Math.min(passkeys, b + BATCH); i++) {
          const credentialId = Buffer.alloc(16);
          credentialId.writeUInt32BE(i, 0);
          randomBytes(12).copy(credentialId, 4);
          rows.push({
            user_id: userIds[i % users]!,
            org_id: ORG,
            credential_id: new Uint8Array(credentialId),
            public_key: publicKey,
            sign_count: i % 100,
            transports: '["internal","hybrid"]',
            label: `Passkey ${i}`,
            aaguid: AAGUIDS[i % AAGUIDS.length]!,
            backup_eligible: 1,
            backup_state: i % 2,
            mfa_verified: i % 3 === 0 ? 0 : 1,
            created_at: base + i * 1000,
            last_used_at: i % 2 === 0 ? null : base + i * 2000,
          });
        }
        await insertPasskeys(trx, rows);
      }
    });
    if (start > 0 && start % 200_000 === 0) process.stdout.write(`  seeded ${start} passkeys\n`);
  }
  return { seconds: (performance.now() - started) / 1000, secret: secret as string, clientId: client.clientId };
}

/** Plans of the list endpoints' queries (as the store builds them): a deep organization page, one user's page. */
async function queryPlans(store: Store, afterId: number): Promise<string> {
  const columns =
    'passkeys.id, users.eppn, passkeys.label, passkeys.created_at, passkeys.last_used_at, passkeys.mfa_verified, passkeys.aaguid from passkeys inner join users on users.id = passkeys.user_id';
  const queries = {
    [`organization page, id > ${afterId}`]: `select ${columns} where passkeys.org_id = ${ORG} and passkeys.id > ${afterId} order by passkeys.id limit ${PER_PAGE + 1}`,
    // as src/store/passkeys.ts builds it: the organization with the client's grant, the user found by eppn first
    "one user's page": `select organizations.id as org_id, organizations.realm, exists (select clients.client_id from clients where clients.client_id = 'bench' and clients.disabled_at is null) as client_active, exists (select client_orgs.org_id from client_orgs where client_orgs.client_id = 'bench' and client_orgs.org_id = ${ORG} and client_orgs.kind = 'admin') as granted, passkeys.id, passkeys.label, passkeys.created_at, passkeys.last_used_at, passkeys.mfa_verified, passkeys.aaguid from organizations left join passkeys on (passkeys.user_id = (select users.id from users where users.eppn = 'user4242@${REALM}' and users.org_id = ${ORG}) and passkeys.id > 0) where organizations.id = ${ORG} order by passkeys.id limit ${PER_PAGE + 1}`,
    'organization page of a small organization': `select ${columns} where passkeys.org_id = 2 and passkeys.id > 0 order by passkeys.id limit ${PER_PAGE + 1}`,
  };
  const out: string[] = [];
  if (store.dialect === 'postgres') await sql.raw('analyze').execute(store.db);
  for (const [label, query] of Object.entries(queries)) {
    out.push(`-- ${label}`);
    if (store.dialect === 'postgres') {
      const r = await sql
        .raw<{ 'QUERY PLAN': string }>(`explain (analyze, buffers, costs off, timing off) ${query}`)
        .execute(store.db);
      out.push(...r.rows.map((x) => x['QUERY PLAN']));
    } else {
      const r = await sql.raw<{ detail: string }>(`explain query plan ${query}`).execute(store.db);
      out.push(...r.rows.map((x) => x.detail));
    }
  }
  return out.join('\n');
}

/** A client_credentials access token of the client, with `scope`. */
export async function accessToken(
  base: string,
  clientId: string,
  secret: string,
  scope = 'passkey.read',
): Promise<string> {
  const res = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
  });
  if (!res.ok) throw new Error(`token request failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

function nextUrl(res: Response): string | undefined {
  const link = res.headers.get('link');
  return link ? /^<([^>]+)>; rel="next"$/.exec(link)?.[1] : undefined;
}

async function getPage(url: string, auth: string): Promise<{ items: { id: number }[]; next?: string; ms: number }> {
  const t = performance.now();
  const res = await fetch(url, { headers: { authorization: auth } });
  const text = await res.text();
  const elapsed = performance.now() - t;
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${text.slice(0, 200)}`);
  return { items: JSON.parse(text), next: nextUrl(res), ms: elapsed };
}

/** Page 900 of the full size; the same relative depth (90%) for a quick run. */
function deepPageOf(passkeys: number): number {
  return Math.round((passkeys / PER_PAGE) * 0.9);
}

interface Walk {
  seconds: number;
  count: number;
  pages: number;
  ordered: boolean;
  deepUrl?: string;
  rssStartMb: number;
  rssPeakMb: number;
}

/** Follows Link headers from the first page to the last, sampling the service's RSS every 100 ms. */
async function walk(service: Service, firstUrl: string, auth: string, deepPage: number): Promise<Walk> {
  const rssStartMb = service.rssMb();
  let rssPeakMb = rssStartMb;
  const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, service.rssMb())), 100);
  let url: string | undefined = firstUrl;
  let pages = 0;
  let count = 0;
  let lastId = 0;
  let ordered = true;
  let deepUrl: string | undefined;
  const started = performance.now();
  while (url) {
    pages++;
    if (pages === deepPage) deepUrl = url;
    const page = await getPage(url, auth);
    for (const p of page.items) {
      if (p.id <= lastId) ordered = false;
      lastId = p.id;
    }
    count += page.items.length;
    url = page.next;
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  rssPeakMb = Math.max(rssPeakMb, service.rssMb());
  return { seconds, count, pages, ordered, deepUrl, rssStartMb, rssPeakMb };
}

/** npm start's flags without the heap cap (V8 then sizes the heap from the machine's memory). */
const uncappedFlags = () => startFlags().filter((f) => !f.startsWith('--max-heap-size='));

function serviceEnv(url: string, nodeOptions: string): Record<string, string> {
  return {
    DATABASE_URL: url,
    IDP_SECRET: SECRET,
    ACCESS_TOKEN_TTL: '3600',
    PAGINATION_TOKEN_TTL: '3600',
    LOG_LEVEL: 'warn',
    NODE_OPTIONS: nodeOptions,
  };
}

async function runDialect(
  dialect: 'sqlite' | 'postgres',
  passkeys: number,
  users: number,
  port: number,
  loadSeconds: number,
  serviceNodeOptions: string,
): Promise<DialectResult> {
  const DEEP_PAGE = deepPageOf(passkeys);
  console.log(`\n## ${dialect}: seeding ${passkeys} passkeys over ${users} users`);
  const database = await freshDatabase(dialect);
  let service: Service | undefined;
  try {
    const store = await openStore(database.url);
    const seeded = await seed(store, passkeys, users);
    console.log(
      `  seeded in ${seeded.seconds.toFixed(1)} s (${Math.round(passkeys / seeded.seconds)} passkeys/s, users included)`,
    );
    const plan = await queryPlans(store, Math.floor(passkeys * 0.9));
    await store.close();
    console.log(`  query plans:\n    ${plan.replace(/\n/g, '\n    ')}`);

    service = await startService(serviceEnv(database.url, serviceNodeOptions), port);
    const auth = `Bearer ${await accessToken(service.url, seeded.clientId, seeded.secret)}`;
    const firstUrl = `${service.url}/2/passkey/${ORG}?per_page=${PER_PAGE}`;
    for (let i = 0; i < 20; i++) await getPage(firstUrl, auth);
    const w = await walk(service, firstUrl, auth, DEEP_PAGE);
    console.log(
      `  walk: ${w.count} passkeys in ${w.pages} pages, ${w.seconds.toFixed(2)} s, peak RSS ${w.rssPeakMb} MB (at start ${w.rssStartMb} MB)`,
    );
    if (!w.deepUrl) throw new Error(`fewer than ${DEEP_PAGE} pages`);
    const deepUrl = w.deepUrl;

    // First page and the deep page, interleaved so both see the same machine state.
    const first: number[] = [];
    const deep: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      first.push((await getPage(firstUrl, auth)).ms);
      deep.push((await getPage(deepUrl, auth)).ms);
    }
    first.sort((a, b) => a - b);
    deep.sort((a, b) => a - b);
    const f = { p50: ms(percentile(first, 50)), p99: ms(percentile(first, 99)) };
    const d = { p50: ms(percentile(deep, 50)), p99: ms(percentile(deep, 99)) };
    console.log(
      `  first page p50 ${f.p50} ms p99 ${f.p99} ms; page ${DEEP_PAGE} p50 ${d.p50} ms p99 ${d.p99} ms; deep/first p50 ${(d.p50 / f.p50).toFixed(2)}`,
    );

    // The floor right before the measurement it is compared with: the machine may be shared.
    const floorServer = await startFloor();
    const floor = await load('Fastify constant-JSON floor', {
      url: floorServer.url,
      connections: 50,
      duration: loadSeconds,
    });
    await floorServer.close();
    const oneUser = await load(`${dialect}: one user's passkeys`, {
      url: `${service.url}/2/passkey/${ORG}?eppn=${encodeURIComponent(`user4242@${REALM}`)}`,
      connections: 50,
      duration: loadSeconds,
      headers: { authorization: auth },
    });
    printLoad([oneUser, floor], floor);
    await service.stop();

    // The same walk again on a fresh service without npm start's heap cap, for contrast.
    service = await startService(serviceEnv(database.url, ''), port, uncappedFlags());
    for (let i = 0; i < 20; i++) await getPage(firstUrl, auth);
    const tuned = await walk(service, firstUrl, auth, DEEP_PAGE);
    console.log(
      `  walk with ${uncappedFlags().join(' ')}: ${tuned.count} passkeys, ${tuned.seconds.toFixed(2)} s, peak RSS ${tuned.rssPeakMb} MB (at start ${tuned.rssStartMb} MB)`,
    );

    return {
      dialect,
      passkeys,
      users,
      seedSeconds: seeded.seconds,
      seedRate: Math.round(passkeys / seeded.seconds),
      plan,
      usesOrgIndex: plan.split('-- ')[1]!.includes('passkeys_org'),
      first: f,
      deep: d,
      walkSeconds: w.seconds,
      walkCount: w.count,
      walkPages: w.pages,
      walkExactlyOnce: w.ordered && w.count === passkeys && tuned.ordered && tuned.count === passkeys,
      rssStartMb: w.rssStartMb,
      rssPeakMb: w.rssPeakMb,
      tuned,
      oneUser,
      floor,
    };
  } finally {
    await service?.stop();
    await database.drop();
  }
}

const NOTES = [
  'Notes:',
  '- With every passkey in one organization, PostgreSQL reads a page through the primary key with `org_id` as a filter that removes',
  '  nothing (1001 rows read for 1001 returned, see the plan); for a small organization (the third plan, an empty one) it uses',
  '  `passkeys_org (org_id, id)`. Either way a page costs the same at any depth.',
  "- Most of the service's RSS is code (about 125 MB at rest). Uncapped, V8 lets the heap grow with the garbage of a long",
  '  walk; `npm start` caps the heap (`--max-heap-size=256`) so it collects earlier. See docs/passkey-api.md, "Performance and memory".',
];

function report(results: DialectResult[], quick: boolean, serviceNodeOptions: string): string {
  const lines: string[] = [];
  const n = results[0]?.passkeys ?? 0;
  const DEEP_PAGE = deepPageOf(n);
  lines.push('## Passkey API', '');
  lines.push(
    `Run ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${machine()}; load average at the end ${loadavg()
      .map((x) => x.toFixed(1))
      .join(
        ' ',
      )} (the machine may be shared: compare figures within one run).${quick ? ' QUICK RUN (reduced size), not the reference figures.' : ''}`,
  );
  lines.push(
    `One organization, ${n.toLocaleString('en')} passkeys over ${(results[0]?.users ?? 0).toLocaleString('en')} users; the compiled service (\`node dist/src/main.js serve\`, as npm start runs it) in a child process; per_page=${PER_PAGE}; latencies measured by the client, ${LATENCY_SAMPLES} sequential requests each, first page and page ${DEEP_PAGE} interleaved.${serviceNodeOptions ? ` Service started with NODE_OPTIONS="${serviceNodeOptions}".` : ` Service started with the Node flags of npm start (${startFlags().join(' ')}).`}`,
    '',
  );
  lines.push(row(['measure', ...results.map((r) => r.dialect), 'goal']));
  lines.push(row(['---', ...results.map(() => '---'), '---']));
  lines.push(
    row([
      'seeding (multi-row inserts, users included)',
      ...results.map((r) => `${r.seedRate.toLocaleString('en')} passkeys/s (${r.seedSeconds.toFixed(1)} s)`),
      '-',
    ]),
  );
  lines.push(row(['first page p50 / p99 ms', ...results.map((r) => `${r.first.p50} / ${r.first.p99}`), '-']));
  lines.push(row([`page ${DEEP_PAGE} p50 / p99 ms`, ...results.map((r) => `${r.deep.p50} / ${r.deep.p99}`), '-']));
  lines.push(
    row([
      'deep / first (p50; p99)',
      ...results.map((r) => `${(r.deep.p50 / r.first.p50).toFixed(2)}; ${(r.deep.p99 / r.first.p99).toFixed(2)}`),
      '<= 1.3',
    ]),
  );
  lines.push(
    row([
      'full walk following Link',
      ...results.map(
        (r) =>
          `${r.walkCount.toLocaleString('en')} in ${r.walkPages} pages, ${r.walkSeconds.toFixed(1)} s${r.walkExactlyOnce ? '' : ' (NOT exactly once!)'}`,
      ),
      '1,000,000 in <= 30 s',
    ]),
  );
  lines.push(
    row([
      `service peak RSS during the walk (npm start flags: ${startFlags().join(' ')})`,
      ...results.map((r) => `${r.rssPeakMb} MB (${r.rssStartMb} MB before)`),
      '<= 200 MB',
    ]),
  );
  lines.push(
    row([
      `same walk, V8 heap uncapped (${uncappedFlags().join(' ')})`,
      ...results.map(
        (r) => `${r.tuned.rssPeakMb} MB (${r.tuned.rssStartMb} MB before), walk ${r.tuned.seconds.toFixed(1)} s`,
      ),
      '<= 200 MB',
    ]),
  );
  lines.push(
    row([
      "one user's passkeys, 50 connections: req/s, p99 ms",
      ...results.map(
        (r) =>
          `${r.oneUser.requestsPerSec.toLocaleString('en')} req/s, p99 ${r.oneUser.p99} ms (${(r.oneUser.requestsPerSec / r.floor.requestsPerSec).toFixed(2)} of floor; errors ${r.oneUser.errors}, non-2xx ${r.oneUser.non2xx})`,
      ),
      '-',
    ]),
  );
  lines.push(
    row([
      'Fastify constant-JSON floor, 50 connections, measured just before',
      ...results.map((r) => `${r.floor.requestsPerSec.toLocaleString('en')} req/s, p99 ${r.floor.p99} ms`),
      '-',
    ]),
  );
  lines.push(
    row([
      'organization page plan uses the (org_id, id) index',
      ...results.map((r) => (r.usesOrgIndex ? 'yes' : 'no (see PLANS.md)')),
      'yes',
    ]),
  );
  lines.push('');
  lines.push(...NOTES, '', 'Query plans: [PLANS.md](PLANS.md#passkey-api).', '');
  return lines.join('\n');
}

function planSection(results: DialectResult[]): string {
  const lines = ['## Passkey API', '', runLine(), ''];
  for (const r of results) lines.push(`${r.dialect}:`, '', '```', r.plan, '```', '');
  return lines.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const passkeys = quick ? 100_000 : 1_000_000;
  const users = passkeys / 10;
  const loadSeconds = quick ? 5 : 10;
  const dialects = (['sqlite', 'postgres'] as const).filter(
    (d) => !args.includes(d === 'sqlite' ? '--postgres' : '--sqlite'),
  );
  console.log(`# passkey API benchmark: ${passkeys} passkeys, ${users} users, ${machine()}`);

  const results: DialectResult[] = [];
  let port = 19301;
  const option = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const serviceNodeOptions = option('service-node-options') ?? '';
  for (const dialect of dialects)
    results.push(await runDialect(dialect, passkeys, users, port++, loadSeconds, serviceNodeOptions));

  const section = report(results, quick, serviceNodeOptions);
  console.log(`\n${section}`);
  if (!args.includes('--no-write')) {
    writeResultsSection('## Passkey API', section);
    writeResultsSection('## Passkey API', planSection(results), 'PLANS.md');
    console.log('written to bench/RESULTS.md');
  }
}
