// Shared test fixtures: stores on both dialects, a configured app, clients and tokens.
import { createHash, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
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
  if (dialect === 'sqlite') return sqliteDatabase();
  return postgresDatabase();
}

/** A temp SQLite file, empty or a copy of template. */
function sqliteDatabase(template?: string): TestDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'idp-test-'));
  const url = join(dir, 'idp.sqlite');
  if (template) copyFileSync(template, url);
  return { url, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

function adminUrl(): string {
  const admin = process.env.TEST_POSTGRES_URL;
  if (!admin) throw new Error('TEST_POSTGRES_URL is not set');
  return admin;
}

function databaseUrl(admin: string, name: string): string {
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * A new PostgreSQL database, empty or a copy of template. Its commits do not wait for the WAL to
 * reach the disk (synchronous_commit off): what a transaction makes visible, and when, is the same;
 * only surviving a crash of the database server, which no test does, is given up.
 */
async function postgresDatabase(template?: string): Promise<TestDatabase> {
  const admin = adminUrl();
  const name = `idp_test_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await whileInUse(() => client.query(`create database ${name}${template ? ` template ${template}` : ''}`));
    await client.query(`alter database ${name} set synchronous_commit = off`);
  } finally {
    await client.end();
  }
  return {
    url: databaseUrl(admin, name),
    async drop() {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/**
 * What the schema a migration run leaves depends on: every file of src/store. A migrated template
 * is kept per fingerprint, so a changed migration (on any branch sharing the database server) gets
 * a template of its own.
 */
const storeFingerprint = (() => {
  let fingerprint: string | undefined;
  return () => {
    if (fingerprint) return fingerprint;
    const dir = new URL('../src/store/', import.meta.url);
    const hash = createHash('sha256');
    for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()) {
      if (!name.endsWith('.ts')) continue;
      hash
        .update(name)
        .update('\0')
        .update(readFileSync(new URL(name, dir)))
        .update('\0');
    }
    return (fingerprint = hash.digest('hex').slice(0, 16));
  };
})();

/** Retries what PostgreSQL refuses while a closed pool's server processes are still exiting. */
async function whileInUse(run: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await run();
      return;
    } catch (err) {
      // 55006 object_in_use: "source database ... is being accessed by other users"
      if ((err as { code?: string }).code !== '55006' || attempt >= 50) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** A SQLite file migrated once per fingerprint (shared by the test processes), as a template. */
async function sqliteTemplate(): Promise<string> {
  const template = join(tmpdir(), `idp-test-template-${storeFingerprint()}.sqlite`);
  if (existsSync(template)) return template;
  const dir = mkdtempSync(join(tmpdir(), 'idp-template-'));
  try {
    const path = join(dir, 'idp.sqlite');
    await (await openStore(path)).close();
    if (existsSync(`${path}-wal`)) throw new Error('the migrated SQLite template kept its WAL open');
    renameSync(path, template); // atomic: another process copies a whole template or none
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return template;
}

let postgresTemplateReady: Promise<string> | undefined;

/**
 * A PostgreSQL database migrated once per fingerprint, as a template. Test processes running at
 * once agree through an advisory lock on who builds it; it gets its name only when complete.
 */
function postgresTemplate(admin: string): Promise<string> {
  postgresTemplateReady ??= (async () => {
    const name = `idp_template_${storeFingerprint()}`;
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query(`select pg_advisory_lock(hashtext('idp test template'))`);
      const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
      if (exists.rowCount) return name;
      const building = `idp_building_${randomBytes(6).toString('hex')}`;
      await client.query(`create database ${building}`);
      await (await openStore(databaseUrl(admin, building))).close();
      await whileInUse(() => client.query(`alter database ${building} rename to ${name}`));
      return name;
    } finally {
      await client.end(); // ends the advisory lock with the session
    }
  })();
  postgresTemplateReady.catch(() => (postgresTemplateReady = undefined));
  return postgresTemplateReady;
}

/**
 * A fresh database with the schema as migrations leave it: a copy of a template migrated once
 * (SQLite: a file; PostgreSQL: CREATE DATABASE ... TEMPLATE). Opening it runs the migrations too,
 * which find nothing left to do. Tests of migrating itself start from freshDatabase instead.
 */
export async function migratedDatabase(dialect: Dialect): Promise<TestDatabase> {
  if (dialect === 'sqlite') return sqliteDatabase(await sqliteTemplate());
  return postgresDatabase(await postgresTemplate(adminUrl()));
}

export function testConfig(databaseUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    PUBLIC_URL: PUBLIC_URL,
    IDP_SECRET: TEST_SECRET,
    LOG_LEVEL: 'silent',
    DATABASE_URL: databaseUrl,
    ...env,
  });
}

export interface TestContext extends App {
  config: Config;
  store: Store;
  keys: Keyring;
  dialect: Dialect;
  close(): Promise<void>;
}

/** A migrated store and a built app on it; close() tears everything down. */
export async function startTestApp(
  dialect: Dialect,
  env: Record<string, string> = {},
  options: { now?: () => number; listen?: number } = {},
): Promise<TestContext> {
  const database = await migratedDatabase(dialect);
  const config = testConfig(database.url, env);
  const store = await openStore(config.databaseUrl);
  const keys = keyring(TEST_SECRET);
  const built = await buildApp({ config, store, keys, now: options.now });
  const close = async () => {
    await built.app.close();
    await store.close();
    await database.drop();
  };
  if (options.listen === undefined) await built.app.ready();
  else {
    try {
      await built.app.listen({ port: options.listen, host: '127.0.0.1' });
    } catch (err) {
      await close(); // the port was taken: nothing is left behind, so the caller may try another
      throw err;
    }
  }
  return { ...built, config, store, keys, dialect, close };
}

export async function seedOrg(ctx: { store: Store }, id = 1, realm = 'example.org', name = 'Example University') {
  return addOrganization(ctx.store, { id, realm, name });
}

export async function seedUser(
  ctx: { store: Store },
  orgId: number,
  eppn: string,
  extra: { name?: string; email?: string; nin?: string; password?: string } = {},
) {
  return addUser(ctx.store, {
    orgId,
    eppn,
    name: extra.name ?? eppn.split('@')[0]!,
    email: extra.email,
    nin: extra.nin,
    password: extra.password,
  });
}

export async function seedClient(ctx: { store: Store; keys: Keyring }, input: Partial<NewClient> = {}) {
  const { client, secret } = await createClient(ctx.store, ctx.keys, { name: 'Test client', ...input });
  return { clientId: client.clientId, secret: secret as string, client };
}

export function basicAuth(clientId: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/**
 * Rate limits count in fixed windows of the clock (src/http/rate-limit.ts): attempts a test expects
 * to be counted together must fall into one window. Within marginMs of a window's end, this waits
 * for the next window to start.
 */
export async function clearOfWindowEnd(windowMs: number, marginMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 100));
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

export interface TestCredential {
  id: Buffer;
  privateKey: KeyObject;
  /** the COSE-encoded EC2 P-256 public key, as a WebAuthn authenticator gives it */
  cose: Buffer;
}

/** A fresh P-256 WebAuthn credential: id, private key for signing assertions, COSE public key. */
export function p256Credential(): TestCredential {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const cose = new Map<number, number | Uint8Array>([
    [1, 2],
    [3, -7],
    [-1, 1],
    [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
    [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
  ]);
  return { id: randomBytes(32), privateKey, cose: Buffer.from(isoCBOR.encode(cose as any)) };
}

export async function coseP256PublicKey(): Promise<Buffer> {
  return p256Credential().cose;
}

/** Runs the admin CLI in-process against a database; returns exit code and output. */
export async function cli(
  databaseUrl: string,
  args: string[],
  stdin = '',
  env: Record<string, string> = {},
): Promise<{ code: number; out: string; err: string }> {
  const { runCli } = await import('../src/cli/index.ts');
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(
    args,
    { out: (l) => out.push(l), err: (l) => err.push(l), readStdin: async () => stdin },
    {
      DATABASE_URL: databaseUrl,
      IDP_SECRET: TEST_SECRET,
      PUBLIC_URL,
      LOG_LEVEL: 'silent',
      ...env,
    },
  );
  return { code, out: out.join('\n'), err: err.join('\n') };
}

export interface ServiceProcess {
  url: string;
  pid: number;
  stderr(): string;
  /** what the service wrote to stdout (its log), when spawned with { stdout: true } */
  stdout(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Whether something can listen on this loopback port now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createNetServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A port for a test server whose port must be known before it starts (PUBLIC_URL names it). It is
 * drawn at random from below Linux's ephemeral range (32768-60999 by default), so no outgoing
 * connection (the database pool, a browser, a relying party) can take it between this choice and
 * the listen, as it can a port the kernel handed out with listen(0); the random draw keeps parallel
 * test files apart, and the port is checked free now.
 */
export async function pickFreePort(): Promise<number> {
  for (let draw = 0; draw < 20; draw++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await canListen(port)) return port;
  }
  throw new Error('no free port in 20000-31999 after 20 random draws: what is listening there?');
}

/** The real service (`node src/main.ts serve`) in a child process on a free port. */
export async function spawnService(
  env: Record<string, string>,
  port?: number,
  options: { stdout?: boolean; readyWithinMs?: number } = {},
): Promise<ServiceProcess> {
  const { spawn } = await import('node:child_process');
  const freePort = port ?? (await pickFreePort());
  const url = `http://127.0.0.1:${freePort}`;
  const child = spawn(process.execPath, ['src/main.ts', 'serve'], {
    env: {
      ...process.env,
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      PORT: String(freePort),
      PUBLIC_URL: url,
      IDP_SECRET: TEST_SECRET,
      ...env,
    },
    stdio: ['ignore', options.stdout ? 'pipe' : 'ignore', 'pipe'],
  });
  let err = '';
  let out = '';
  child.stderr!.on('data', (d) => (err += d));
  child.stdout?.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`service exited: ${err}`);
    try {
      if ((await fetch(`${url}/readyz`)).ok) break;
    } catch {
      // not listening yet
    }
    if (i > (options.readyWithinMs ?? 30_000) / 100) {
      child.kill('SIGKILL'); // else the test's process waits for it forever
      throw new Error(`service did not become ready: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    pid: child.pid!,
    stderr: () => err,
    stdout: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** A browser over inject(): keeps the cookies it is given, posts forms. */
export function cookieBrowser(app: FastifyInstance) {
  const jar = new Map<string, string>();
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) jar.set(c.name, c.value);
    return res;
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    /** the cookies kept, as a Cookie header (a copy of them, say, taken from the browser) */
    cookies: cookie,
    /** keeps these cookies (a Cookie header) as if they had been set */
    adopt: (header: string) => {
      for (const pair of header.split('; ').filter(Boolean)) {
        const at = pair.indexOf('=');
        jar.set(pair.slice(0, at), pair.slice(at + 1));
      }
    },
    get: async (url: string) => remember(await app.inject({ method: 'GET', url, headers: { cookie: cookie() } })),
    post: async (url: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
      remember(
        await app.inject({
          method: 'POST',
          url,
          headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded', ...headers },
          payload: new URLSearchParams(form).toString(),
        }),
      ),
  };
}
