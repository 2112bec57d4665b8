// Token issuance: client_credentials requests per second with 50 connections, beside the
// Fastify constant-JSON floor, on SQLite and PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { runCli } from '../src/cli/index.ts';
import { load, machine, printLoad, startFloor, startService, type LoadResult } from './lib.ts';

const SECRET = 'bench-secret-0123456789-abcdefghijklmnop';
const ADMIN_PG = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

async function cli(databaseUrl: string, args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await runCli(args, { out: (l) => (out += l), err: (l) => (err += l), readStdin: async () => '' }, { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, LOG_LEVEL: 'silent' });
  if (code !== 0) throw new Error(err);
  return out;
}

async function measure(label: string, databaseUrl: string, port: number, duration: number): Promise<LoadResult> {
  await cli(databaseUrl, ['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example']);
  const client = JSON.parse(await cli(databaseUrl, ['client', 'add', '--name', 'bench', '--scopes', 'passkey.read passkey.delete', '--orgs', '1', '--json']));
  const service = await startService({ DATABASE_URL: databaseUrl, IDP_SECRET: SECRET }, port);
  try {
    const request = {
      url: `${service.url}/oauth/token`,
      method: 'POST' as const,
      headers: {
        authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials&scope=passkey.read',
    };
    const check = await fetch(request.url, { method: 'POST', headers: request.headers, body: request.body });
    if (check.status !== 200) throw new Error(`token endpoint answered ${check.status}: ${await check.text()}`);
    await load('warm-up', { ...request, connections: 50, duration: 3 });
    return await load(label, { ...request, connections: 50, duration });
  } finally {
    await service.stop();
  }
}

export async function main(args: string[]) {
  const duration = args.includes('--quick') ? 5 : 20;
  console.log(`# token issuance benchmark — ${new Date().toISOString()} — ${machine()}`);
  console.log(`# autocannon, 50 connections, ${duration} s per target, client_credentials with client_secret_basic\n`);
  const results: LoadResult[] = [];

  const floor = await startFloor();
  await load('warm-up', { url: floor.url, connections: 50, duration: 3 });
  const floorResult = await load('Fastify constant JSON (floor)', { url: floor.url, connections: 50, duration });
  await floor.close();
  results.push(floorResult);

  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-token-'));
  try {
    results.push(await measure('POST /oauth/token (SQLite)', join(dir, 'idp.sqlite'), 18081, duration));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const admin = new pg.Client({ connectionString: ADMIN_PG });
  let pgAvailable = true;
  try {
    await admin.connect();
  } catch {
    pgAvailable = false;
    console.log('# PostgreSQL not reachable: skipped');
  }
  if (pgAvailable) {
    const name = `idp_bench_token_${process.pid}`;
    await admin.query(`create database ${name}`);
    const url = new URL(ADMIN_PG);
    url.pathname = `/${name}`;
    try {
      results.push(await measure('POST /oauth/token (PostgreSQL)', url.toString(), 18082, duration));
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  }
  printLoad(results, floorResult);
}
