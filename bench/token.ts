// Token issuance: client_credentials requests per second with 50 connections, beside the
// Fastify constant-JSON floor, on SQLite and PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/index.ts';
import {
  load,
  loadTable,
  machine,
  runLine,
  startFlags,
  startFloor,
  startService,
  withFreshPostgres,
  writeResultsSection,
  type LoadResult,
} from './lib.ts';

const SECRET = 'bench-secret-0123456789-abcdefghijklmnop';

async function cli(databaseUrl: string, args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const code = await runCli(
    args,
    { out: (l) => (out += l), err: (l) => (err += l), readStdin: async () => '' },
    { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, LOG_LEVEL: 'silent' },
  );
  if (code !== 0) throw new Error(err);
  return out;
}

async function measure(label: string, databaseUrl: string, port: number, duration: number): Promise<LoadResult> {
  await cli(databaseUrl, ['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example']);
  const client = JSON.parse(
    await cli(databaseUrl, [
      'client',
      'add',
      '--name',
      'bench',
      '--scopes',
      'passkey.read passkey.delete',
      '--orgs',
      '1',
      '--json',
    ]),
  );
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
  const head = `autocannon, 50 connections, ${duration} s per target (after a 3 s warm-up), \`client_credentials\` with \`client_secret_basic\`, scope \`passkey.read\`; the service and the floor each in their own process, started with the flags of \`npm start\` (${startFlags().join(' ')}) for the service.`;
  console.log(`# token issuance benchmark — ${machine()}\n# ${head}\n`);
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
  const onPg = await withFreshPostgres('idp_bench_token', (url) =>
    measure('POST /oauth/token (PostgreSQL)', url, 18082, duration),
  );
  if (onPg) results.push(onPg);

  const table = loadTable(results, floorResult);
  console.log(table);
  const sqlite = results[1]!;
  const verdict = `Goal: at least 2,000 tokens/s on this machine — SQLite ${sqlite.requestsPerSec >= 2000 ? 'met' : 'MISSED'} (${sqlite.requestsPerSec}/s)${onPg ? `, PostgreSQL ${onPg.requestsPerSec >= 2000 ? 'met' : 'MISSED'} (${onPg.requestsPerSec}/s)` : ''}.`;
  console.log(`\n# ${verdict}`);
  if (!args.includes('--quick') && !args.includes('--no-write')) {
    writeResultsSection(
      '## Token issuance',
      ['## Token issuance', '', runLine(), head, '', table, '', verdict, ''].join('\n'),
    );
    console.log('written to bench/RESULTS.md');
  }
}
