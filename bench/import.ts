// npm run bench -- import [--quick] [--sqlite|--postgres] [--no-write]
// Bulk user import (docs/user-import.md): a generated 1,000,000-line CSV imported with
// `user import` (the compiled admin CLI in a child process, as an operator runs it) into a fresh
// database on SQLite and on PostgreSQL, while the running service's passkey API is asked for one
// user's passkeys by 4 clients in a loop: the import's time against the goals (60 s SQLite, 3 min
// PostgreSQL), and how the API answered meanwhile (requests, p50, p99, max, errors).
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openStore } from '../src/store/index.ts';
import { ADMIN_PG, row, runLine, SECRET, startFlags, startService, writeResultsSection, type Service } from './lib.ts';
import { accessToken, ORG, REALM, seed } from './passkeys.ts';

const GOALS = { sqlite: 60, postgres: 180 } as const;
const CLIENTS = 4;
const AFFILIATIONS = ['student', 'staff;member', 'faculty;member', 'affiliate'];

/** The CSV of the documented header, `lines` users of the benchmark realm. */
async function generate(path: string, lines: number): Promise<void> {
  const out = createWriteStream(path);
  out.write('eppn,given_name,family_name,email,affiliation,primary_affiliation,external_id\n');
  let chunk = '';
  for (let i = 0; i < lines; i++) {
    const affiliation = AFFILIATIONS[i % AFFILIATIONS.length]!;
    const name = i % 100 === 0 ? `"Person, ${i}"` : `Person${i}`;
    chunk += `import${i}@${REALM},Given${i},${name},import${i}@${REALM},${affiliation},${affiliation.split(';')[0]},hr-${i}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
      chunk = '';
    }
  }
  out.end(chunk);
  await new Promise<void>((r) => out.once('finish', () => r()));
}

async function freshDatabase(dialect: 'sqlite' | 'postgres'): Promise<{ url: string; drop(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'idp-bench-import-'));
    return { url: join(dir, 'idp.sqlite'), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `idp_bench_import_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_PG });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(ADMIN_PG);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_PG });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/** `user import` as an operator runs it (compiled, a process of its own); its JSON summary and wall time. */
function importFile(url: string, file: string): Promise<{ seconds: number; summary: Record<string, unknown> }> {
  const started = performance.now();
  const child = spawn(process.execPath, ['dist/src/main.js', 'user', 'import', '--org', String(ORG), '--json', file], {
    env: { ...process.env, DATABASE_URL: url, IDP_SECRET: SECRET, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) => {
      const seconds = (performance.now() - started) / 1000;
      if (code !== 0) return reject(new Error(`user import exited ${code}: ${out.slice(0, 500)}`));
      resolve({ seconds, summary: JSON.parse(out) as Record<string, unknown> });
    }),
  );
}

interface ApiFigures {
  requests: number;
  errors: number;
  p50: number;
  p99: number;
  max: number;
}

/** CLIENTS loops asking for one user's passkeys until `until` settles. */
async function askWhile(url: string, auth: string, until: Promise<unknown>): Promise<ApiFigures> {
  let done = false;
  void until.finally(() => (done = true)).catch(() => {});
  const latencies: number[] = [];
  let errors = 0;
  const client = async () => {
    while (!done) {
      const t = performance.now();
      try {
        const res = await fetch(url, { headers: { authorization: auth } });
        await res.arrayBuffer();
        if (res.status !== 200) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  latencies.sort((a, b) => a - b);
  const at = (p: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)]! * 10) / 10;
  return { requests: latencies.length, errors, p50: at(0.5), p99: at(0.99), max: at(1) };
}

interface Result {
  dialect: 'sqlite' | 'postgres';
  seconds: number;
  rate: number;
  summary: Record<string, unknown>;
  before: ApiFigures;
  during: ApiFigures;
}

async function runDialect(dialect: 'sqlite' | 'postgres', file: string, lines: number, port: number): Promise<Result> {
  console.log(`\n## ${dialect}`);
  const database = await freshDatabase(dialect);
  let service: Service | undefined;
  try {
    const store = await openStore(database.url);
    // The organization, a client of the passkey API, and 100 users with 10 passkeys each.
    const seeded = await seed(store, 1000, 100);
    await store.close();
    service = await startService(
      { DATABASE_URL: database.url, IDP_SECRET: SECRET, ACCESS_TOKEN_TTL: '3600', LOG_LEVEL: 'warn' },
      port,
    );
    const auth = `Bearer ${await accessToken(service.url, seeded.clientId, seeded.secret)}`;
    const url = `${service.url}/2/passkey/${ORG}?eppn=${encodeURIComponent(`user42@${REALM}`)}`;
    const before = await askWhile(url, auth, new Promise((r) => setTimeout(r, 5000)));
    console.log(`  passkey API before: ${JSON.stringify(before)}`);
    const importing = importFile(database.url, file);
    const during = await askWhile(url, auth, importing);
    const { seconds, summary } = await importing;
    console.log(`  import: ${seconds.toFixed(1)} s, ${JSON.stringify({ ...summary, rejections: undefined })}`);
    console.log(`  passkey API during: ${JSON.stringify(during)}`);
    if (summary.created !== lines) throw new Error(`expected ${lines} created`);
    return { dialect, seconds, rate: Math.round(lines / seconds), summary, before, during };
  } finally {
    await service?.stop();
    await database.drop();
  }
}

function report(results: Result[], lines: number, fileMb: number, quick: boolean): string {
  const api = (f: ApiFigures) =>
    `${f.requests.toLocaleString('en')} requests, p50 ${f.p50} ms, p99 ${f.p99} ms, max ${f.max} ms, errors ${f.errors}`;
  const lines_ = [
    '## Bulk user import',
    '',
    `${runLine()}${quick ? ' QUICK RUN (reduced size), not the reference figures.' : ''}`,
    `A generated CSV of ${lines.toLocaleString('en')} users (${fileMb} MB, the documented header) imported by \`user import --json\` (the compiled CLI, a process of its own) into a fresh database holding 100 users with 1,000 passkeys; meanwhile ${CLIENTS} clients ask the running service (\`node ${startFlags().join(' ')} dist/src/main.js serve\`) for one user's passkeys in a loop (GET /2/passkey/<org>?eppn=..., a client token).`,
    '',
    row(['measure', ...results.map((r) => r.dialect), 'goal']),
    row(['---', ...results.map(() => '---'), '---']),
    row([
      `import of ${lines.toLocaleString('en')} new users`,
      ...results.map((r) => `${r.seconds.toFixed(1)} s (${r.rate.toLocaleString('en')} users/s)`),
      'SQLite < 60 s, PostgreSQL < 180 s',
    ]),
    row([
      'within the goal',
      ...results.map((r) => (r.seconds * (1_000_000 / lines) < GOALS[r.dialect] ? 'yes' : 'NO')),
      'yes',
    ]),
    row(['passkey API, 5 s before the import', ...results.map((r) => api(r.before)), '-']),
    row(['passkey API during the import', ...results.map((r) => api(r.during)), 'answers, no errors']),
    '',
    'Default mode: one transaction per 5,000 lines (multi-row inserts of 1,000 rows), so the service waits at most one',
    "batch's transaction to write on SQLite, and reads (WAL) never wait.",
  ];
  return lines_.join('\n');
}

export async function main(args: string[]): Promise<void> {
  const quick = args.includes('--quick');
  const lines = quick ? 100_000 : 1_000_000;
  const dialects = (['sqlite', 'postgres'] as const).filter(
    (d) => !args.includes(d === 'sqlite' ? '--postgres' : '--sqlite'),
  );
  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-import-file-'));
  const file = join(dir, 'users.csv');
  try {
    const t = performance.now();
    await generate(file, lines);
    const fileMb = Math.round(statSync(file).size / 2 ** 20);
    console.log(`# generated ${lines} lines (${fileMb} MB) in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const results: Result[] = [];
    let port = 19351;
    for (const dialect of dialects) results.push(await runDialect(dialect, file, lines, port++));
    const section = report(results, lines, fileMb, quick);
    console.log(`\n${section}`);
    if (!args.includes('--no-write')) {
      writeResultsSection('## Bulk user import', section);
      console.log('written to bench/RESULTS.md');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
