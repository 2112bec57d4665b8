// The OpenAPI document as a file, and its lint.
//   node scripts/openapi.ts              writes the document to a temporary file and lints it with
//                                        Redocly CLI (redocly.yaml: the recommended ruleset); exits
//                                        non-zero on any error or warning (part of npm run check)
//   node scripts/openapi.ts --out FILE   writes the document to FILE (- for stdout) and stops
// The document comes from the real app, built on a throwaway SQLite database in a temporary directory.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.ts';
import { keyring } from '../src/crypto.ts';
import { openStore } from '../src/store/index.ts';
import { buildApp } from '../src/app.ts';

const root = new URL('..', import.meta.url).pathname;

async function openApiDocument(dir: string): Promise<string> {
  const secret = 'openapi-document-only-secret-0123456789';
  // as `npm start` serves it on a laptop: no PUBLIC_URL, so the issuer is http://localhost:<PORT>
  const config = loadConfig({
    IDP_SECRET: secret,
    LOG_LEVEL: 'silent',
    DATABASE_URL: join(dir, 'idp.sqlite'),
  });
  const store = await openStore(config.databaseUrl);
  try {
    const { app } = await buildApp({ config, store, keys: keyring(secret) });
    try {
      const res = await app.inject({ method: 'GET', url: '/openapi.json' });
      if (res.statusCode !== 200) throw new Error(`/openapi.json answered ${res.statusCode}`);
      return `${JSON.stringify(res.json(), null, 2)}\n`;
    } finally {
      await app.close();
    }
  } finally {
    await store.close();
  }
}

function lint(file: string): number {
  const result = spawnSync(
    join(root, 'node_modules/.bin/redocly'),
    ['lint', '--config', join(root, 'redocly.yaml'), '--max-problems', '200', file],
    {
      stdio: 'inherit',
      // no usage reports and no update check: the lint runs offline
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    },
  );
  return result.status ?? 1;
}

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const dir = mkdtempSync(join(tmpdir(), 'idp-openapi-'));
try {
  const document = await openApiDocument(dir);
  if (values.out === '-') process.stdout.write(document);
  else if (values.out) writeFileSync(values.out, document);
  else {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, document);
    process.exitCode = lint(file);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
