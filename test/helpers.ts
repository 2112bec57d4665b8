// Shared test fixtures: stores on both dialects, a configured app, clients and tokens.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { loadConfig, type Config } from '../src/config.ts';
import { keyring, type Keyring } from '../src/crypto.ts';
import { openStore, type Store, type Dialect } from '../src/store/index.ts';
import { buildApp, type App } from '../src/app.ts';
import { addOrganization, addUser } from '../src/directory/index.ts';
import { createClient, type NewClient } from '../src/clients/index.ts';

export const TEST_SECRET = 'test-secret-0123456789-abcdefghijklmnop';
export const PUBLIC_URL = 'https://idp.example.test';

/** The dialects this run covers: SQLite always, PostgreSQL when TEST_POSTGRES_URL is set. */
export function dialects(): Dialect[] {
  return process.env.TEST_POSTGRES_URL ? ['sqlite', 'postgres'] : ['sqlite'];
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh, empty database: a temp SQLite file, or a new PostgreSQL database. */
export async function freshDatabase(dialect: Dialect): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'idp-test-'));
    return { url: join(dir, 'idp.sqlite'), drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const admin = process.env.TEST_POSTGRES_URL;
  if (!admin) throw new Error('TEST_POSTGRES_URL is not set');
  const name = `idp_test_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`create database ${name}`);
  await client.end();
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({ PUBLIC_URL: PUBLIC_URL, IDP_SECRET: TEST_SECRET, LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl, ...env });
}

export interface TestContext extends App {
  config: Config;
  store: Store;
  keys: Keyring;
  dialect: Dialect;
  close(): Promise<void>;
}

/** A migrated store and a built app on it; close() tears everything down. */
export async function startTestApp(dialect: Dialect, env: Record<string, string> = {}): Promise<TestContext> {
  const database = await freshDatabase(dialect);
  const config = testConfig(database.url, env);
  const store = await openStore(config.databaseUrl);
  const keys = keyring(TEST_SECRET);
  const built = await buildApp({ config, store, keys });
  await built.app.ready();
  return {
    ...built,
    config,
    store,
    keys,
    dialect,
    async close() {
      await built.app.close();
      await store.close();
      await database.drop();
    },
  };
}

export async function seedOrg(ctx: { store: Store }, id = 1, realm = 'example.org', name = 'Example University') {
  return addOrganization(ctx.store, { id, realm, name });
}

export async function seedUser(ctx: { store: Store }, orgId: number, eppn: string, extra: { name?: string; email?: string; nin?: string; password?: string } = {}) {
  return addUser(ctx.store, { orgId, eppn, name: extra.name ?? eppn.split('@')[0]!, email: extra.email, nin: extra.nin, password: extra.password });
}

export async function seedClient(ctx: { store: Store; keys: Keyring }, input: Partial<NewClient> = {}) {
  const { client, secret } = await createClient(ctx.store, ctx.keys, { name: 'Test client', ...input });
  return { clientId: client.clientId, secret: secret as string, client };
}

export function basicAuth(clientId: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** A client_credentials access token through the real token endpoint. */
export async function clientToken(ctx: App, clientId: string, secret: string, scope: string): Promise<string> {
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { authorization: basicAuth(clientId, secret), 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
  });
  if (res.statusCode !== 200) throw new Error(`token request failed: ${res.statusCode} ${res.body}`);
  return res.json().access_token;
}
