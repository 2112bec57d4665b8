// SCIM provisioning: user creations (POST /scim/v2/Users, each a new user with a provisioning
// token) per second with 10 connections, then userName eq lookups per second among the users made,
// on SQLite and PostgreSQL. Prints figures; --duration <s> (default 10), --write adds them to RESULTS.md.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import {
  cli,
  loadTable,
  runLine,
  SECRET,
  startService,
  withFreshPostgres,
  writeResultsSection,
  type LoadResult,
} from './lib.ts';

const CONNECTIONS = 10;

function result(label: string, r: autocannon.Result): LoadResult {
  return {
    label,
    requestsPerSec: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors,
    non2xx: r.non2xx,
    total: r.requests.total,
  };
}

async function measure(label: string, databaseUrl: string, port: number, duration: number): Promise<LoadResult[]> {
  await cli(databaseUrl, ['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example']);
  const { token } = JSON.parse(await cli(databaseUrl, ['scim', 'token', 'create', '--org', '1', '--json'])) as {
    token: string;
  };
  const service = await startService({ DATABASE_URL: databaseUrl, IDP_SECRET: SECRET }, port);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/scim+json' };
  let n = 0;
  try {
    const create = await autocannon({
      url: `${service.url}/scim/v2/Users`,
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          method: 'POST',
          headers,
          setupRequest: (req) => {
            const i = n++;
            return {
              ...req,
              body: JSON.stringify({
                schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
                userName: `user${i}@example.org`,
                externalId: `ext-${i}`,
                name: { givenName: 'Bench', familyName: `User ${i}` },
                emails: [{ value: `user${i}@example.org`, primary: true }],
              }),
            };
          },
        },
      ],
    });
    let m = 0;
    const lookup = await autocannon({
      url: service.url,
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          method: 'GET',
          headers,
          setupRequest: (req) => ({
            ...req,
            path: `/scim/v2/Users?filter=${encodeURIComponent(`userName eq "user${m++ % Math.max(1, n)}@example.org"`)}`,
          }),
        },
      ],
    });
    return [
      result(`${label}: POST /Users (create)`, create),
      result(`${label}: GET /Users?filter=userName eq`, lookup),
    ];
  } finally {
    await service.stop();
  }
}

export async function main(args: string[]): Promise<void> {
  const at = args.indexOf('--duration');
  const duration = at >= 0 ? Number(args[at + 1]) : 10;
  const results: LoadResult[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'idp-bench-scim-'));
  try {
    results.push(...(await measure('SQLite', join(dir, 'idp.sqlite'), 18431, duration)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const pg = await withFreshPostgres('idp_bench_scim', (url) => measure('PostgreSQL', url, 18432, duration));
  if (pg) results.push(...pg);
  const table = loadTable(results);
  console.log(table);
  if (args.includes('--write'))
    writeResultsSection(
      '## SCIM provisioning',
      `## SCIM provisioning\n\n${runLine()} ${CONNECTIONS} connections, ${duration} s each (\`npm run bench -- scim\`).\n\n${table}\n`,
    );
}
