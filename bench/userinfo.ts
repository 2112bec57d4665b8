// OIDC userinfo: GET /openid/userinfo with a valid user access token, 100 connections, beside the
// Fastify constant-JSON floor, on SQLite and PostgreSQL (and on SQLite with the claims cache off).
// Goal: >= 0.5 of the floor's requests/s and p99 <= 25 ms on SQLite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config.ts';
import { keyring } from '../src/crypto.ts';
import { openStore } from '../src/store/index.ts';
import { buildApp } from '../src/app.ts';
import { addOrganization, addUser } from '../src/directory/index.ts';
import { createClient } from '../src/clients/index.ts';
import { ATTRIBUTE_GROUPS } from '../src/vocabulary.ts';
import { insertUserId } from '../src/store/directory.ts';
import {
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

const CONNECTIONS = 100;
export const SCOPE = ['openid', 'profile', ...ATTRIBUTE_GROUPS].join(' ');

/**
 * Seeds a user and a client holding every group, and mints a user access token exactly as the
 * authorization code flow stores it, with the app running in this process against the database.
 * The user goes into `org` when it is given (an organization that exists), else into a new one.
 */
export async function mintToken(
  databaseUrl: string,
  publicUrl: string,
  org?: { id: number; realm: string },
): Promise<string> {
  const config = loadConfig({
    DATABASE_URL: databaseUrl,
    IDP_SECRET: SECRET,
    PUBLIC_URL: publicUrl,
    LOG_LEVEL: 'silent',
    ACCESS_TOKEN_TTL: '3600',
  });
  const store = await openStore(databaseUrl);
  const { app, provider } = await buildApp({ config, store, keys: keyring(SECRET) });
  try {
    if (!org) await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
    const { id: orgId, realm } = org ?? { id: 1, realm: 'example.org' };
    const user = await addUser(store, {
      orgId,
      eppn: `ada@${realm}`,
      name: 'Ada Lovelace',
      email: `ada@${realm}`,
      nin: '01017012345',
    });
    await insertUserId(store.db, user.id, 'github', 'ada');
    const { client } = await createClient(store, keyring(SECRET), {
      name: 'bench',
      groups: [...ATTRIBUTE_GROUPS],
      scopes: ['profile'],
      redirectUris: ['https://rp.example.com/callback'],
    });
    const p = provider.current();
    const grant = new p.Grant({ accountId: user.sub, clientId: client.clientId });
    grant.addOIDCScope(SCOPE);
    const grantId = await grant.save();
    const oidcClient = await p.Client.find(client.clientId);
    return await new p.AccessToken({
      accountId: user.sub,
      client: oidcClient!,
      grantId,
      scope: SCOPE,
      gty: 'authorization_code',
    }).save();
  } finally {
    await app.close();
    await store.close();
  }
}

async function measure(
  label: string,
  databaseUrl: string,
  port: number,
  duration: number,
  env: Record<string, string> = {},
): Promise<LoadResult> {
  const token = await mintToken(databaseUrl, `http://127.0.0.1:${port}`);
  const service = await startService(
    { DATABASE_URL: databaseUrl, IDP_SECRET: SECRET, ACCESS_TOKEN_TTL: '3600', ...env },
    port,
  );
  try {
    const request = { url: `${service.url}/openid/userinfo`, headers: { authorization: `Bearer ${token}` } };
    const check = await fetch(request.url, { headers: request.headers });
    const body = await check.text();
    if (check.status !== 200) throw new Error(`userinfo answered ${check.status}: ${body}`);
    console.log(`# ${label}: ${body.length} bytes of claims, e.g. ${body.slice(0, 120)}...`);
    await load('warm-up', { ...request, connections: CONNECTIONS, duration: 3 });
    const result = await load(label, { ...request, connections: CONNECTIONS, duration });
    console.log(`# ${label}: service RSS ${service.rssMb()} MB after the run`);
    return result;
  } finally {
    await service.stop();
  }
}

export async function main(args: string[]) {
  const duration = args.includes('--quick') ? 5 : 20;
  console.log(`# userinfo benchmark — ${new Date().toISOString()} — ${machine()}`);
  console.log(
    `# autocannon, ${CONNECTIONS} connections, ${duration} s per target, GET /openid/userinfo, client with every attribute group, scope "${SCOPE}"\n`,
  );
  const results: LoadResult[] = [];

  const floor = await startFloor();
  await load('warm-up', { url: floor.url, connections: CONNECTIONS, duration: 3 });
  const floorResult = await load('Fastify constant JSON (floor)', {
    url: floor.url,
    connections: CONNECTIONS,
    duration,
  });
  await floor.close();
  results.push(floorResult);

  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-userinfo-'));
  let sqlite: LoadResult | undefined;
  try {
    sqlite = await measure('GET /openid/userinfo (SQLite)', join(dir, 'idp.sqlite'), 18091, duration);
    results.push(sqlite);
    // The same without reusing claims: every call computes them (3 queries instead of 1).
    results.push(
      await measure(
        'GET /openid/userinfo (SQLite, USERINFO_CACHE_TTL=0)',
        join(dir, 'idp-nocache.sqlite'),
        18093,
        duration,
        { USERINFO_CACHE_TTL: '0' },
      ),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const onPg = await withFreshPostgres('idp_bench_userinfo', (url) =>
    measure('GET /openid/userinfo (PostgreSQL)', url, 18092, duration),
  );
  if (onPg) results.push(onPg);
  const table = loadTable(results, floorResult);
  console.log(`\n${table}`);
  if (sqlite) {
    const ratio = sqlite.requestsPerSec / floorResult.requestsPerSec;
    const met = ratio >= 0.5 && sqlite.p99 <= 25 && sqlite.errors === 0 && sqlite.non2xx === 0;
    const verdict = `Goal on SQLite (>= 0.5 of the floor's req/s, p99 <= 25 ms): ${met ? 'met' : 'MISSED'} (ratio ${ratio.toFixed(2)}, p99 ${sqlite.p99} ms).`;
    console.log(`\n# ${verdict}`);
    if (!args.includes('--quick') && !args.includes('--no-write')) {
      const head = `autocannon, ${CONNECTIONS} connections, ${duration} s per target, \`GET /openid/userinfo\` with a valid token (client holding every attribute group, scope \`${SCOPE}\`); the service and the floor each in their own process, the service with the flags of \`npm start\` (${startFlags().join(' ')}).`;
      writeResultsSection('## Userinfo', ['## Userinfo', '', runLine(), head, '', table, '', verdict, ''].join('\n'));
      console.log('written to bench/RESULTS.md');
    }
  }
}
