// Token issuance and introspection: client_credentials requests and introspections of a live
// opaque access token per second with 50 connections, beside the Fastify constant-JSON floor, on
// SQLite and PostgreSQL.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { keyring } from '../src/crypto.ts';
import { openStore } from '../src/store/index.ts';
import { loadKeySet } from '../src/oauth/keys.ts';
import { keyTiming } from '../src/oauth/key-manager.ts';
import { basicAccounts, createProvider } from '../src/oauth/provider.ts';
import {
  cli,
  load,
  loadTable,
  machine,
  runLine,
  startFlags,
  startFloor,
  startService,
  SECRET,
  withFreshPostgres,
  writeResultsSection,
  type LoadResult,
} from './lib.ts';

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/**
 * A signed-in user's opaque access token for a sign-in client, stored exactly as the token endpoint
 * stores one (a grant and the token, through the provider's own models and storage adapter).
 */
async function userAccessToken(databaseUrl: string, publicUrl: string, clientId: string): Promise<string> {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    IDP_SECRET: SECRET,
    PUBLIC_URL: publicUrl,
    LOG_LEVEL: 'silent',
  });
  const store = await openStore(databaseUrl);
  try {
    const keys = keyring(SECRET);
    const provider = createProvider(
      config,
      store,
      keys,
      await loadKeySet(store, keys, keyTiming(config)),
      basicAccounts,
    );
    const grant = new provider.Grant({ accountId: 'bench-user', clientId });
    grant.addOIDCScope('openid');
    const grantId = await grant.save();
    const client = await provider.Client.find(clientId);
    if (!client) throw new Error('the sign-in client is not registered');
    return await new provider.AccessToken({
      accountId: 'bench-user',
      client,
      grantId,
      scope: 'openid',
      gty: 'authorization_code',
    }).save();
  } finally {
    await store.close();
  }
}

async function measure(
  label: string,
  databaseUrl: string,
  port: number,
  duration: number,
): Promise<[LoadResult, LoadResult]> {
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
  const rp = JSON.parse(
    await cli(databaseUrl, [
      'client',
      'add',
      '--name',
      'bench rp',
      '--redirect-uri',
      'https://rp.example/cb',
      '--json',
    ]),
  );
  const service = await startService({ DATABASE_URL: databaseUrl, IDP_SECRET: SECRET }, port);
  try {
    const request = {
      url: `${service.url}/oauth/token`,
      method: 'POST' as const,
      headers: {
        authorization: basic(client.client_id, client.client_secret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials&scope=passkey.read',
    };
    const check = await fetch(request.url, { method: 'POST', headers: request.headers, body: request.body });
    if (check.status !== 200) throw new Error(`token endpoint answered ${check.status}: ${await check.text()}`);
    await load('warm-up', { ...request, connections: 50, duration: 3 });
    const issued = await load(`POST /oauth/token (${label})`, { ...request, connections: 50, duration });

    const token = await userAccessToken(databaseUrl, service.url, rp.client_id);
    const introspection = {
      url: `${service.url}/oauth/introspect`,
      method: 'POST' as const,
      headers: {
        authorization: basic(rp.client_id, rp.client_secret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
    };
    const seen = await fetch(introspection.url, { ...introspection });
    const answer = (await seen.json()) as { active?: boolean };
    if (seen.status !== 200 || answer.active !== true)
      throw new Error(`introspection answered ${seen.status}: ${JSON.stringify(answer)}`);
    await load('warm-up', { ...introspection, connections: 50, duration: 3 });
    return [issued, await load(`POST /oauth/introspect (${label})`, { ...introspection, connections: 50, duration })];
  } finally {
    await service.stop();
  }
}

export async function main(args: string[]) {
  const duration = args.includes('--quick') ? 5 : 20;
  const head = `autocannon, 50 connections, ${duration} s per target (after a 3 s warm-up), \`client_credentials\` with \`client_secret_basic\`, scope \`passkey.read\`; introspection of a live opaque access token by the client it was issued to (\`client_secret_basic\`, \`token_type_hint=access_token\`); the service and the floor each in their own process, started with the flags of \`npm start\` (${startFlags().join(' ')}) for the service.`;
  console.log(`# token issuance and introspection benchmark — ${machine()}\n# ${head}\n`);
  const results: LoadResult[] = [];

  const floor = await startFloor();
  await load('warm-up', { url: floor.url, connections: 50, duration: 3 });
  const floorResult = await load('Fastify constant JSON (floor)', { url: floor.url, connections: 50, duration });
  await floor.close();
  results.push(floorResult);

  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-token-'));
  try {
    results.push(...(await measure('SQLite', join(dir, 'idp.sqlite'), 18081, duration)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pgResults = await withFreshPostgres('idp_bench_token', (url) => measure('PostgreSQL', url, 18082, duration));
  if (pgResults) results.push(...pgResults);
  const onPg = pgResults?.[0];

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
