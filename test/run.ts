// npm test: the whole suite on SQLite, and on PostgreSQL too when one is reachable
// (TEST_POSTGRES_URL, else the local default). Under CI=true PostgreSQL is required.
import { globSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import pg from 'pg';
import { writeTimings, type TestSummary } from './timings-reporter.ts';

const candidate =
  process.env.TEST_POSTGRES_URL || process.env.DATABASE_URL?.match(/^postgres/)
    ? process.env.TEST_POSTGRES_URL || process.env.DATABASE_URL
    : 'postgres://postgres@127.0.0.1:5432/postgres';

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

const env = { ...process.env };
delete env.DATABASE_URL;
// Every test file is a process of its own that loads much the same modules (and the services the
// tests start load them again): V8's compile cache on disk spares compiling and type-stripping
// them anew each time. It is keyed by the files' contents, so a changed file is compiled again.
env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'node-compile-cache');
if (candidate && (await reachable(candidate))) {
  env.TEST_POSTGRES_URL = candidate;
  console.log(
    `# PostgreSQL: ${candidate.replace(/\/\/[^@]*@/, '//')} (store-touching tests run on SQLite and PostgreSQL)`,
  );
} else if (process.env.CI === 'true') {
  console.error('PostgreSQL is not reachable and CI=true: failing the run');
  process.exit(1);
} else {
  delete env.TEST_POSTGRES_URL;
  console.log('# PostgreSQL not reachable: SKIPPED the PostgreSQL runs; the suite runs on SQLite only');
}

const args = process.argv.slice(2);
// Longest first: test/timings.json holds how long each file took in an earlier run (written by
// `TEST_TIMINGS=test/timings.json npm test`), and the run starts the files in that order, so none of
// the long ones is left running alone at the end while the other places in the run stand idle. A
// file not listed there yet starts first (it may be long), the browser and relying-party tests
// (test/e2e) among them first of all.
const recorded = new Map<string, number>();
try {
  const { files } = JSON.parse(readFileSync(join(import.meta.dirname, 'timings.json'), 'utf8')) as {
    files: { file: string; seconds: number }[];
  };
  for (const { file, seconds } of files) recorded.set(file, seconds);
} catch {
  // no timings: the order below falls back to test/e2e first
}
const took = (file: string) => recorded.get(file) ?? Infinity;
const e2eFirst = (file: string) => (file.startsWith('test/e2e/') ? 0 : 1);
const files = args.length
  ? args
  : [...globSync('test/**/*.test.ts'), ...globSync('src/**/*.test.ts')]
      .sort()
      .sort((a, b) => e2eFirst(a) - e2eFirst(b))
      .sort((a, b) => (took(a) === took(b) ? 0 : took(b) - took(a)));
// The files start in this order (`node --test` would sort them by name), each in a process of its own.
for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name];
Object.assign(process.env, env);
const stream = run({ files: files.map((file) => resolve(file)), concurrency: 3, timeout: 300_000 });
// TEST_TIMINGS=<file>: also write each file's duration there (test/timings-reporter.ts).
const summaries: TestSummary[] = [];
let success = false;
stream.on('test:summary', (summary: TestSummary & { success: boolean }) => {
  summaries.push(summary);
  if (summary.file === undefined) success = summary.success;
});
const report = stream.compose(new spec());
report.pipe(process.stdout);
report.on('end', () => {
  if (process.env.TEST_TIMINGS) console.log(writeTimings(summaries, process.env.TEST_TIMINGS));
  process.exitCode = success ? 0 : 1;
});
