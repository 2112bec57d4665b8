// npm test: the whole suite on SQLite, and on PostgreSQL too when one is reachable
// (TEST_POSTGRES_URL, else the local default). Under CI=true PostgreSQL is required.
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';
import pg from 'pg';

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
const files = args.length ? args : [...globSync('test/**/*.test.ts'), ...globSync('src/**/*.test.ts')].sort();
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=3', '--test-timeout=300000', ...files], {
  stdio: 'inherit',
  env,
});
process.exit(result.status ?? 1);
