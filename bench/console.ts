// npm run bench -- console [--quick] [--sqlite|--postgres] [--no-write]
// The staff console's queries, through the store functions (src/store/user-search.ts,
// src/store/reports.ts) on SQLite and PostgreSQL: one organization of 100,000 people with
// realistic names and addresses and 1,000,000 passkeys (a small organization beside it). User
// search over 200 prefixes of eppn, names and addresses; the organization report as the report
// API runs it (three functions under Promise.all); one CSV list walked in pages of 5000; the cost
// of migration 010's upkeep to each passkey write. Goal: search p95 and report p95 under
// 200 ms on both databases. Figures go to bench/RESULTS.md, query plans to bench/PLANS.md.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CompiledQuery, sql, type Insertable, type KyselyPlugin, type PluginTransformQueryArgs } from 'kysely';
import { openStore, type Store } from '../src/store/index.ts';
import { insertUsers } from '../src/store/directory.ts';
import { deleteOrganizationPasskey, insertPasskeys, recordPasskeyUse } from '../src/store/passkeys.ts';
import { searchUsers } from '../src/store/user-search.ts';
import { passkeyListPage, passkeysByModel, passkeyTotals, userTotals } from '../src/store/reports.ts';
import type { PasskeysTable, UsersTable } from '../src/store/schema.ts';
import { addOrganization } from '../src/directory/index.ts';
import { row, runLine, withFreshPostgres, writeResultsSection } from './lib.ts';

const ORG = 1;
const REALM = 'uni.example.org';
const DAY = 86_400_000;
const UNUSED_DAYS = 180;
/** what the console asks for: one more than it shows */
const SEARCH_LIMIT = 51;
const SEARCHES = 200;
const REPORTS = 20;
const PAGE = 5000;
const WRITES = 200;
const GOAL_MS = 200;
const BATCH = 1000;
const BATCHES_PER_TRANSACTION = 20;

// ---- the people and their passkeys -----------------------------------------------------------

// prettier-ignore
const FIRST = [
  'Ada', 'Aksel', 'Alma', 'Amir', 'Anna', 'Astrid', 'Åse', 'Bjørn', 'Camilla', 'Chen', 'Dag', 'Elias', 'Emma',
  'Erik', 'Fatima', 'Frida', 'Geir', 'Hanna', 'Hege', 'Ingrid', 'Isak', 'Jakob', 'Jonas', 'Kari', 'Kristian',
  'Lars', 'Leah', 'Linnea', 'Magnus', 'Maja', 'Marit', 'Mohammed', 'Nora', 'Ola', 'Oskar', 'Per', 'Priya',
  'Ragnhild', 'Sara', 'Siri', 'Sofie', 'Søren', 'Thea', 'Tobias', 'Tor', 'Ulrik', 'Vilde', 'Wei', 'Yusuf', 'Øystein',
];
// prettier-ignore
const LAST = [
  'Aas', 'Andersen', 'Bakke', 'Berg', 'Dahl', 'Eriksen', 'Fjeld', 'Haugen', 'Hansen', 'Holm', 'Johansen', 'Karlsen',
  'Khan', 'Kristiansen', 'Larsen', 'Li', 'Lund', 'Moen', 'Nguyen', 'Nilsen', 'Olsen', 'Pedersen', 'Rasmussen',
  'Solberg', 'Strand', 'Sæther', 'Tangen', 'Vik', 'Wang', 'Ødegård', 'Østby', 'Ås',
];
/** AAGUIDs with their weight in the population: platform password managers, Windows, keys, unknown. */
const AAGUIDS: [string, number][] = [
  ['ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4', 30],
  ['fbfc3007-154e-4ecc-8c0b-6e020557d7bd', 25],
  ['00000000-0000-0000-0000-000000000000', 12],
  ['08987058-cadc-4b81-b6e1-30de50dcbe96', 10],
  ['cb69481e-8ff7-4039-93ec-0a2729a154a8', 6],
  ['ee882879-721c-4913-9775-3dfcce97072a', 5],
  ['bada5566-a7aa-401f-bd96-45619a55120d', 4],
  ['d548826e-79b4-db40-a3d8-11116f7e8349', 3],
  ['531126d6-e717-415c-9320-3d9aa6981239', 2],
  ['adce0002-35bc-c60a-648b-0b25f1f05503', 2],
  ['b93fd961-f2e6-462f-b122-82002247de78', 1],
];

/** mulberry32: a small seeded generator, so every run seeds the same people and queries. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The ASCII spelling of a name for an address: ø as o, å as a, æ as ae. */
function ascii(s: string): string {
  return s
    .toLowerCase()
    .replace(/ø/g, 'o')
    .replace(/å/g, 'a')
    .replace(/æ/g, 'ae')
    .replace(/[^a-z]/g, '');
}

interface Person {
  eppn: string;
  name: string;
  display: string | null;
  email: string | null;
}

function person(random: () => number, i: number, realm: string): Person {
  const first = FIRST[Math.floor(random() * FIRST.length)]!;
  const last = LAST[Math.floor(random() * LAST.length)]!;
  const eppn = `${ascii(first).slice(0, 4)}${ascii(last).slice(0, 4)}${i}@${realm}`;
  const r = random();
  const email =
    r < 0.08 ? null : r < 0.7 ? `${ascii(first)}.${ascii(last)}${i}@${realm}` : `${ascii(first)}${i}@mail.example.com`;
  return { eppn, name: `${first} ${last}`, display: random() < 0.1 ? `${first[0]}. ${last}` : null, email };
}

async function seedUsers(store: Store, orgId: number, realm: string, count: number, seed: number) {
  const random = generator(seed);
  const people: Person[] = [];
  const ids: number[] = [];
  const now = Date.now();
  for (let start = 0; start < count; start += BATCH * BATCHES_PER_TRANSACTION) {
    await store.db.transaction().execute(async (trx) => {
      for (let b = start; b < Math.min(count, start + BATCH * BATCHES_PER_TRANSACTION); b += BATCH) {
        const rows: Insertable<UsersTable>[] = [];
        for (let i = b; i < Math.min(count, b + BATCH); i++) {
          const p = person(random, i, realm);
          people.push(p);
          rows.push({
            sub: randomUUID(),
            org_id: orgId,
            eppn: p.eppn,
            name: p.name,
            display_name: p.display,
            email: p.email,
            nin: null,
            password_hash: random() < 0.4 ? '$scrypt$bench' : null,
            photo_handle: null,
            created_at: now - Math.floor(random() * 1000) * DAY,
            updated_at: now,
            disabled_at: random() < 0.02 ? now - DAY : null,
          });
        }
        ids.push(...(await insertUsers(trx, rows)));
      }
    });
  }
  return { ids, people };
}

function pickAaguid(random: () => number): string {
  let r = random() * AAGUIDS.reduce((n, [, w]) => n + w, 0);
  for (const [aaguid, weight] of AAGUIDS) if ((r -= weight) < 0) return aaguid;
  return AAGUIDS[0]![0];
}

/** Most passkeys were used this month; a tenth never; some for months, some not for years. */
function lastUsed(random: () => number, created: number, now: number): number | null {
  const r = random();
  if (r < 0.1) return null;
  const since = r < 0.75 ? 30 * DAY * random() : r < 0.92 ? (30 + 335 * random()) * DAY : (now - created) * random();
  return Math.max(created, Math.floor(now - since));
}

function passkey(random: () => number, orgId: number, userId: number, i: number, now: number) {
  const credentialId = Buffer.alloc(20);
  credentialId.writeUInt32BE(orgId, 0);
  credentialId.writeUInt32BE(i, 4);
  credentialId.writeDoubleBE(random(), 8);
  const created = now - Math.floor(random() * 1100 * DAY);
  const synced = random() < 0.6 ? 1 : 0;
  return {
    user_id: userId,
    org_id: orgId,
    credential_id: new Uint8Array(credentialId),
    public_key: new Uint8Array(77).fill(7),
    sign_count: synced ? 0 : i % 500,
    transports: synced ? '["hybrid","internal"]' : '["usb","nfc"]',
    label: synced ? 'Phone' : 'Security key',
    aaguid: pickAaguid(random),
    backup_eligible: synced,
    backup_state: synced,
    mfa_verified: random() < 0.92 ? 1 : 0,
    created_at: created,
    last_used_at: lastUsed(random, created, now),
  } satisfies Insertable<PasskeysTable>;
}

/**
 * `count` passkeys over the first 85% of the users (the rest have none), each owner's together,
 * between about 8 and 24 each (the first owners the most).
 */
async function seedPasskeys(store: Store, orgId: number, userIds: number[], count: number, seed: number) {
  const random = generator(seed);
  const owners = Math.max(1, Math.floor(userIds.length * 0.85));
  const ownerOf = (i: number) => {
    const x = i / count;
    return Math.min(owners - 1, Math.floor(owners * (0.5 * x + 0.5 * x * x)));
  };
  const now = Date.now();
  for (let start = 0; start < count; start += BATCH * BATCHES_PER_TRANSACTION) {
    await store.db.transaction().execute(async (trx) => {
      for (let b = start; b < Math.min(count, start + BATCH * BATCHES_PER_TRANSACTION); b += BATCH) {
        const rows: Insertable<PasskeysTable>[] = [];
        for (let i = b; i < Math.min(count, b + BATCH); i++)
          rows.push(passkey(random, orgId, userIds[ownerOf(i)]!, i, now));
        await insertPasskeys(trx, rows);
      }
    });
    if (start > 0 && start % 200_000 === 0) process.stdout.write(`  seeded ${start} passkeys\n`);
  }
}

/** The large organization and a small one beside it (a hundredth of each); the large one's people. */
export async function seed(store: Store, users: number, passkeys: number): Promise<Person[]> {
  await addOrganization(store, { id: ORG, realm: REALM, name: 'Benchmark University' });
  await addOrganization(store, { id: ORG + 1, realm: 'college.example.org', name: 'Benchmark College' });
  const big = await seedUsers(store, ORG, REALM, users, 1);
  const small = await seedUsers(store, ORG + 1, 'college.example.org', Math.ceil(users / 100), 2);
  await seedPasskeys(store, ORG, big.ids, passkeys, 3);
  await seedPasskeys(store, ORG + 1, small.ids, Math.ceil(passkeys / 100), 4);
  return big.people;
}

// ---- measuring -------------------------------------------------------------------------------

/** 1-4 leading characters of eppns, first names, surnames, display names and addresses, as typed. */
export function searchQueries(people: Person[], n: number): string[] {
  const random = generator(5);
  const queries: string[] = [];
  while (queries.length < n) {
    const p = people[Math.floor(random() * people.length)]!;
    const sources = [p.eppn, p.name, p.name.split(' ')[1]!, p.display ?? p.name, p.email ?? p.eppn];
    const text = sources[queries.length % sources.length]!;
    const q = text.slice(0, 1 + (queries.length % 4));
    queries.push(random() < 0.3 ? q.toUpperCase() : q);
  }
  return queries;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Timing {
  p50: number;
  p95: number;
  max: number;
}

async function timed(runs: number, fn: (i: number) => Promise<unknown>): Promise<Timing> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await fn(i);
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 10) / 10;
  return { p50: r(percentile(ms, 50)), p95: r(percentile(ms, 95)), max: r(ms.at(-1)!) };
}

function report(store: Store, cutoff: number) {
  return Promise.all([userTotals(store.db, ORG), passkeyTotals(store.db, ORG, cutoff), passkeysByModel(store.db, ORG)]);
}

/** Runs fn and returns the statements it ran (compiled), without changing what it does. */
async function statementsOf(store: Store, fn: (db: Store['db']) => Promise<unknown>): Promise<CompiledQuery[]> {
  // Every builder made from the wrapped instance passes here, subqueries included; only the
  // statements that ran have results.
  const built = new Map<unknown, PluginTransformQueryArgs>();
  const ran: PluginTransformQueryArgs[] = [];
  const plugin: KyselyPlugin = {
    transformQuery: (args) => (built.set(args.queryId, args), args.node),
    transformResult: async (args) => {
      const query = built.get(args.queryId);
      if (query) ran.push(query);
      return args.result;
    },
  };
  await fn(store.db.withPlugin(plugin));
  return ran.map((q) => store.db.getExecutor().compileQuery(q.node, q.queryId));
}

/**
 * The plan of each statement: SQLite's query plan, PostgreSQL's as run (EXPLAIN ANALYZE), replayed
 * in one transaction with the settings the function made (SET LOCAL) in force.
 */
async function plans(store: Store, label: string, fn: (db: Store['db']) => Promise<unknown>): Promise<string> {
  const out = [`-- ${label}`];
  const statements = await statementsOf(store, fn);
  await store.db.transaction().execute(async (trx) => {
    for (const q of statements) {
      if (/^set /i.test(q.sql)) {
        await trx.executeQuery(q);
        out.push(q.sql);
        continue;
      }
      const explain =
        store.dialect === 'postgres' ? 'explain (analyze, costs off, timing off, summary off) ' : 'explain query plan ';
      const r = await trx.executeQuery<Record<string, string>>(
        CompiledQuery.raw(explain + q.sql, [...q.parameters] as unknown[]),
      );
      out.push(...r.rows.map((x) => x['QUERY PLAN'] ?? x.detail ?? JSON.stringify(x)));
    }
  });
  return out.join('\n');
}

interface Writes {
  insert: Timing;
  signIn: Timing;
  remove: Timing;
}

/** One passkey registered, used to sign in and removed, each in its own transaction, as the service does them. */
async function writes(store: Store, userId: number): Promise<Writes> {
  const random = generator(6);
  const ids: number[] = [];
  const insert = await timed(WRITES, async (i) => {
    const rows = [{ ...passkey(random, ORG, userId, 10_000_000 + i, Date.now()), sign_count: 0 }];
    ids.push(...(await store.db.transaction().execute((trx) => insertPasskeys(trx, rows))));
  });
  const signIn = await timed(WRITES, (i) =>
    store.db.transaction().execute((trx) => recordPasskeyUse(trx, ids[i]!, 0, true, Date.now())),
  );
  const remove = await timed(WRITES, (i) =>
    store.db.transaction().execute((trx) => deleteOrganizationPasskey(trx, ORG, ids[i]!)),
  );
  return { insert, signIn, remove };
}

/** Drops what migration 010 added to every passkey write (the database is thrown away afterwards). */
async function dropPasskeyUpkeep(store: Store): Promise<void> {
  for (const t of ['passkey_counts_insert', 'passkey_counts_delete', 'passkey_counts_update'])
    await sql.raw(`drop trigger ${t}${store.dialect === 'postgres' ? ' on passkeys' : ''}`).execute(store.db);
  await sql`drop index passkeys_org_unused`.execute(store.db);
}

interface Result {
  dialect: 'sqlite' | 'postgres';
  users: number;
  passkeys: number;
  seedSeconds: number;
  asSeeded?: Timing;
  search: Timing;
  report: Timing;
  unused: number;
  walk: { seconds: number; rows: number; pages: number };
  withUpkeep: Writes;
  withoutUpkeep: Writes;
  plans: string;
}

async function measure(dialect: 'sqlite' | 'postgres', url: string, users: number, passkeys: number): Promise<Result> {
  console.log(`\n## ${dialect}: seeding ${users} users and ${passkeys} passkeys`);
  const store = await openStore(url);
  try {
    const started = performance.now();
    const people = await seed(store, users, passkeys);
    const seedSeconds = (performance.now() - started) / 1000;
    console.log(`  seeded in ${seedSeconds.toFixed(1)} s`);
    const cutoff = Date.now() - UNUSED_DAYS * DAY;
    let asSeeded: Timing | undefined;
    if (dialect === 'postgres') {
      // Right after a bulk load the visibility map is empty and there are no statistics;
      // autovacuum sets both within minutes. Measured both ways.
      asSeeded = await timed(5, () => report(store, cutoff));
      await sql`vacuum analyze`.execute(store.db);
    }
    const queries = searchQueries(people, SEARCHES);
    for (const q of queries.slice(0, 20)) await searchUsers(store.db, ORG, q, SEARCH_LIMIT);
    const search = await timed(queries.length, (i) => searchUsers(store.db, ORG, queries[i]!, SEARCH_LIMIT));
    console.log(`  search: p50 ${search.p50} ms, p95 ${search.p95} ms, max ${search.max} ms`);
    for (let i = 0; i < 3; i++) await report(store, cutoff);
    const reportTiming = await timed(REPORTS, () => report(store, cutoff));
    const unused = (await passkeyTotals(store.db, ORG, cutoff)).unusedSince;
    console.log(`  report: p50 ${reportTiming.p50} ms, p95 ${reportTiming.p95} ms (${unused} passkeys unused)`);
    const walkStarted = performance.now();
    let afterId = 0;
    let rows = 0;
    let pages = 0;
    for (;;) {
      const page = await passkeyListPage(store.db, ORG, 'unused', { afterId, limit: PAGE, cutoff });
      pages++;
      rows += page.length;
      if (page.length < PAGE) break;
      afterId = page.at(-1)!.id;
    }
    const walk = { seconds: (performance.now() - walkStarted) / 1000, rows, pages };
    console.log(`  unused list: ${rows} rows in ${pages} pages, ${walk.seconds.toFixed(2)} s`);
    const plan = [
      await plans(store, `search '${queries[0]}'`, (db) => searchUsers(db, ORG, queries[0]!, SEARCH_LIMIT)),
      await plans(store, `search '${queries[3]}'`, (db) => searchUsers(db, ORG, queries[3]!, SEARCH_LIMIT)),
      await plans(store, 'report: userTotals', (db) => userTotals(db, ORG)),
      await plans(store, 'report: passkeyTotals', (db) => passkeyTotals(db, ORG, cutoff)),
      await plans(store, 'report: passkeysByModel', (db) => passkeysByModel(db, ORG)),
      await plans(store, `unused list, page after id ${Math.floor(passkeys / 2)}`, (db) =>
        passkeyListPage(db, ORG, 'unused', { afterId: Math.floor(passkeys / 2), limit: PAGE, cutoff }),
      ),
    ].join('\n');
    const someone = (
      await store.db.selectFrom('users').select('id').where('org_id', '=', ORG).limit(1).executeTakeFirstOrThrow()
    ).id;
    const withUpkeep = await writes(store, someone);
    await dropPasskeyUpkeep(store);
    const withoutUpkeep = await writes(store, someone);
    const w = (x: Writes) => `${x.insert.p50} / ${x.signIn.p50} / ${x.remove.p50}`;
    console.log(
      `  one passkey insert / sign-in / delete p50 ms: ${w(withUpkeep)} (without 010's upkeep ${w(withoutUpkeep)})`,
    );
    return {
      dialect,
      users,
      passkeys,
      seedSeconds,
      asSeeded,
      search,
      report: reportTiming,
      unused,
      walk,
      withUpkeep,
      withoutUpkeep,
      plans: plan,
    };
  } finally {
    await store.close();
  }
}

// ---- the results -----------------------------------------------------------------------------

const HEADING = '## Staff console (store)';

const NOTES = [
  'Notes:',
  '- The report reads counts kept by triggers on passkeys (migration 010: `passkey_counts` by model, synced or not and',
  '  verified or not; `users.passkey_count` behind partial indexes for users without a passkey or a sign-in method).',
  '  What still grows with the organization is the unused count, an index-only range of the passkeys not used since the',
  '  date (the row below the report), and counting its users.',
  '- PostgreSQL right after a bulk load: index-only scans visit the table until vacuum sets the visibility map, and the',
  '  planner has no statistics; autovacuum does both within minutes of a large insert or update.',
  '- The last two rows are what that upkeep costs each passkey write. A sign-in changes last_used_at, which is in',
  '  passkeys_org_unused, so on PostgreSQL it is no longer a HOT update.',
  '- The machine may be shared (see the load average): compare figures within one run.',
];

function met(t: Timing): string {
  return t.p95 < GOAL_MS ? 'met' : 'MISSED';
}

function section(results: Result[], quick: boolean): string {
  const first = results[0]!;
  const cells = (f: (r: Result) => string) => results.map(f);
  const lines = [
    HEADING,
    '',
    `${runLine()}${quick ? ' QUICK RUN (reduced size), not the reference figures.' : ''}`,
    `One organization of ${first.users.toLocaleString('en')} users and ${first.passkeys.toLocaleString('en')} passkeys (85% of the users have some, 8 to 24 each), and one a hundredth of its size; measured in the benchmark process through the store functions (\`searchUsers\`, the report's \`userTotals\` + \`passkeyTotals\` + \`passkeysByModel\` under Promise.all as the report API runs them, \`passkeyListPage\`). Search: ${SEARCHES} prefixes of 1-4 characters of eppns, names, surnames, display names and addresses (30% typed in upper case), limit ${SEARCH_LIMIT}, after 20 to warm up. Report: ${REPORTS} runs after 3, unused = not used for ${UNUSED_DAYS} days. PostgreSQL: \`vacuum analyze\` after seeding (what autovacuum does within minutes), the report also measured before it.`,
    '',
    row(['measure', ...cells((r) => r.dialect), 'goal']),
    row(['---', ...cells(() => '---'), '---']),
    row(['seeding (users and passkeys, multi-row inserts)', ...cells((r) => `${r.seedSeconds.toFixed(1)} s`), '-']),
    row([
      'search p50 / p95 / max ms',
      ...cells((r) => `${r.search.p50} / ${r.search.p95} / ${r.search.max} (${met(r.search)})`),
      `p95 < ${GOAL_MS} ms`,
    ]),
    row([
      'organization report p50 / p95 / max ms',
      ...cells((r) => `${r.report.p50} / ${r.report.p95} / ${r.report.max} (${met(r.report)})`),
      `p95 < ${GOAL_MS} ms`,
    ]),
    row([
      `passkeys not used for ${UNUSED_DAYS} days (the report's unused count)`,
      ...cells((r) => r.unused.toLocaleString('en')),
      '-',
    ]),
    row([
      'report right after seeding, before vacuum analyze: p50 / max ms',
      ...cells((r) => (r.asSeeded ? `${r.asSeeded.p50} / ${r.asSeeded.max}` : '-')),
      '-',
    ]),
    row([
      `CSV list 'unused', pages of ${PAGE}`,
      ...cells(
        (r) => `${r.walk.rows.toLocaleString('en')} rows, ${r.walk.pages} pages, ${r.walk.seconds.toFixed(2)} s`,
      ),
      '-',
    ]),
    row([
      'one passkey insert / sign-in (recordPasskeyUse) / delete, each its own transaction, p50 ms',
      ...cells((r) => `${r.withUpkeep.insert.p50} / ${r.withUpkeep.signIn.p50} / ${r.withUpkeep.remove.p50}`),
      '-',
    ]),
    row([
      "the same without migration 010's counting triggers and passkeys_org_unused index",
      ...cells((r) => `${r.withoutUpkeep.insert.p50} / ${r.withoutUpkeep.signIn.p50} / ${r.withoutUpkeep.remove.p50}`),
      '-',
    ]),
    '',
  ];
  lines.push(...NOTES, '', 'Query plans: [PLANS.md](PLANS.md#staff-console-store).', '');
  return lines.join('\n');
}

function planSection(results: Result[]): string {
  const lines = [HEADING, '', runLine(), ''];
  for (const r of results) lines.push(`${r.dialect}:`, '', '```', r.plans, '```', '');
  return lines.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const users = quick ? 10_000 : 100_000;
  const passkeys = users * 10;
  const results: Result[] = [];
  if (!args.includes('--postgres')) {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-console-'));
    try {
      results.push(await measure('sqlite', join(dir, 'idp.sqlite'), users, passkeys));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  if (!args.includes('--sqlite')) {
    const pg = await withFreshPostgres('idp_bench_console', (url) => measure('postgres', url, users, passkeys));
    if (pg) results.push(pg);
  }
  const text = section(results, quick);
  console.log(`\n${text}`);
  if (!args.includes('--no-write') && results.length > 0) {
    writeResultsSection(HEADING, text);
    writeResultsSection(HEADING, planSection(results), 'PLANS.md');
    console.log('written to bench/RESULTS.md');
  }
}
