import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkStorage, ConfigError, loadConfig, SETTINGS, settingsTable } from '../../src/config.ts';
import { loadSecret } from '../../src/crypto.ts';

describe('configuration', () => {
  it('has working defaults for the embedded SQLite service', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.publicUrl, 'http://localhost:8080');
    assert.equal(c.databaseUrl, './data/idp.sqlite');
    assert.equal(c.dialect, 'sqlite');
    assert.equal(c.accessTokenTtl, 300);
    assert.equal(c.paginationTokenTtl, 300);
    assert.equal(c.claimsNamespace, 'http://localhost:8080/claims');
    assert.equal(c.workers, 1);
    assert.equal(c.memoryReleaseIdle, 1);
    assert.equal(loadConfig({ MEMORY_RELEASE_IDLE: '0' }).memoryReleaseIdle, 0);
  });

  it('reads WORKERS as a count or auto (one per available core)', async () => {
    const { availableParallelism } = await import('node:os');
    assert.equal(loadConfig({ WORKERS: '3' }).workers, 3);
    assert.equal(loadConfig({ WORKERS: 'auto' }).workers, availableParallelism());
    assert.equal(loadConfig({ WORKERS: 'AUTO' }).workers, availableParallelism());
    assert.equal(loadConfig({ WORKERS: '1', DATABASE_URL: ':memory:' }).workers, 1);
  });

  it('recognises PostgreSQL and requires IDP_SECRET there', () => {
    assert.throws(
      () => loadConfig({ DATABASE_URL: 'postgres://u@h/db' }),
      (e: ConfigError) => e.variable === 'IDP_SECRET',
    );
    const c = loadConfig({ DATABASE_URL: 'postgres://u@h/db', IDP_SECRET: 'x'.repeat(32) });
    assert.equal(c.dialect, 'postgres');
  });

  const bad: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'PORT'],
    [{ WORKERS: '0' }, 'WORKERS'],
    [{ WORKERS: '65' }, 'WORKERS'],
    [{ WORKERS: 'many' }, 'WORKERS'],
    [{ WORKERS: '1.5' }, 'WORKERS'],
    [{ MEMORY_RELEASE_IDLE: '-1' }, 'MEMORY_RELEASE_IDLE'],
    [{ MEMORY_RELEASE_IDLE: '3601' }, 'MEMORY_RELEASE_IDLE'],
    [{ MEMORY_RELEASE_IDLE: 'soon' }, 'MEMORY_RELEASE_IDLE'],
    [{ WORKERS: '2', DATABASE_URL: ':memory:' }, 'WORKERS'],
    [{ PORT: '70000' }, 'PORT'],
    [{ PUBLIC_URL: 'not a url' }, 'PUBLIC_URL'],
    [{ PUBLIC_URL: 'ftp://idp.example.org' }, 'PUBLIC_URL'],
    [{ PUBLIC_URL: 'https://idp.example.org/sub/path' }, 'PUBLIC_URL'],
    [{ PUBLIC_URL: 'https://idp.example.org/?q=1' }, 'PUBLIC_URL'],
    [{ DATABASE_URL: 'mysql://localhost/idp' }, 'DATABASE_URL'],
    [{ IDP_SECRET: 'short' }, 'IDP_SECRET'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ ACCESS_TOKEN_TTL: '5' }, 'ACCESS_TOKEN_TTL'],
    [{ PAGINATION_TOKEN_TTL: '1.5' }, 'PAGINATION_TOKEN_TTL'],
    [{ TRUST_PROXY: 'maybe' }, 'TRUST_PROXY'],
    [{ SUNSET_DATE: 'next year' }, 'SUNSET_DATE'],
    [{ IDP_NAMESPACE: 'Bad Name' }, 'IDP_NAMESPACE'],
    [{ IDP_NAMESPACE: 'nin' }, 'IDP_NAMESPACE'],
    [{ IDP_NAMESPACE: 'facebook' }, 'IDP_NAMESPACE'],
    [{ SUNSET_DATE: '2026-02-30' }, 'SUNSET_DATE'],
    [{ TRUST_PROXY: 'true' }, 'TRUST_PROXY'],
    [{ PUBLIC_URL: 'https://idp.example.org', CLAIMS_NAMESPACE: 'http://idp.example.org/claims' }, 'CLAIMS_NAMESPACE'],
    [{ TRUST_PROXY: '0.5' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '10.0.0.0/8, not-an-ip' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '10.0.0.0/99' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '999.1.1.1' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '0xa.1.1.1' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: 'fc00::/129' }, 'TRUST_PROXY'],
    [{ PORT: '0' }, 'PORT'],
    [{ PUBLIC_URL: 'http://idp.example.org' }, 'PUBLIC_URL'],
    [{ PUBLIC_URL: 'http://10.1.2.3:8080' }, 'PUBLIC_URL'],
    [{ PUBLIC_URL: 'http://idp.example.org', ALLOW_INSECURE_PUBLIC_URL: 'maybe' }, 'ALLOW_INSECURE_PUBLIC_URL'],
    [{ PUBLIC_URL: 'http://idp.example.org', ALLOW_INSECURE_PUBLIC_URL: 'true' }, 'CLAIMS_NAMESPACE'],
    [{ PUBLIC_URL: 'https://idp.example.org', CLAIMS_NAMESPACE: 'urn:example:claims' }, 'CLAIMS_NAMESPACE'],
    [{ METRICS_TOKEN: 'too-short' }, 'METRICS_TOKEN'],
    [{ METRICS_TOKEN: 'a token with spaces is no bearer token at all' }, 'METRICS_TOKEN'],
    [{ METRICS_ALLOW: '10.0.0.0/8,10.0.0.0/33' }, 'METRICS_ALLOW'],
    [{ METRICS_ALLOW: 'localhost' }, 'METRICS_ALLOW'],
  ];
  for (const [env, variable] of bad) {
    it(`rejects ${JSON.stringify(env)} naming ${variable}`, () => {
      assert.throws(
        () => loadConfig(env),
        (e: unknown) => e instanceof ConfigError && e.variable === variable && e.message.startsWith(`${variable}: `),
      );
    });
  }

  it('TRUST_PROXY takes a hop count or proxy addresses', () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: '1' }).trustProxy, 1);
    assert.equal(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.5,::1' }).trustProxy, '10.0.0.0/8,192.168.1.5,::1');
  });

  it('keeps the generated secret beside the SQLite file by default', () => {
    assert.equal(loadConfig({ DATABASE_URL: '/var/lib/idp/idp.sqlite' }).dataDir, '/var/lib/idp');
    assert.equal(loadConfig({}).dataDir, './data');
    assert.equal(loadConfig({ DATABASE_URL: '/var/lib/idp/idp.sqlite', DATA_DIR: '/etc/idp' }).dataDir, '/etc/idp');
  });

  it('strips a trailing slash from PUBLIC_URL', () => {
    assert.equal(loadConfig({ PUBLIC_URL: 'https://idp.example.org/' }).publicUrl, 'https://idp.example.org');
  });

  it('reads exactly the variables SETTINGS defines', () => {
    const read = new Set<string>();
    const spy = new Proxy(
      {},
      {
        get(_target, name) {
          if (typeof name === 'string') read.add(name);
          return undefined;
        },
        has(_target, name) {
          if (typeof name === 'string') read.add(name);
          return false;
        },
      },
    );
    loadConfig(spy);
    assert.deepEqual([...read].sort(), SETTINGS.map((s) => s.name).sort());
    assert.equal(new Set(SETTINGS.map((s) => s.name)).size, SETTINGS.length, 'each setting is defined once');
  });

  it("README's configuration table is the one generated from SETTINGS", () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const start = readme.indexOf('| Variable | Default | Meaning |');
    assert.ok(start > 0, 'README has the configuration table');
    const end = readme.indexOf('\n\n', start);
    assert.equal(
      readme.slice(start, end),
      settingsTable(),
      `regenerate README's table from SETTINGS:\n${settingsTable()}`,
    );
  });

  it('allows plain http only on localhost, or with ALLOW_INSECURE_PUBLIC_URL', () => {
    for (const url of ['http://localhost:8080', 'http://127.0.0.1:3000', 'http://[::1]:8080', 'http://idp.localhost']) {
      assert.equal(loadConfig({ PUBLIC_URL: url }).allowInsecurePublicUrl, false, url);
    }
    const insecure = loadConfig({
      PUBLIC_URL: 'http://idp.test.internal',
      ALLOW_INSECURE_PUBLIC_URL: 'true',
      CLAIMS_NAMESPACE: 'https://idp.example.org/claims',
    });
    assert.equal(insecure.allowInsecurePublicUrl, true);
    assert.equal(loadConfig({ PORT: '0', PUBLIC_URL: 'https://idp.example.org' }).port, 0);
  });

  it('METRICS_ALLOW defaults to loopback and private ranges', () => {
    assert.deepEqual(loadConfig({}).metricsAllow, [
      '127.0.0.0/8',
      '::1/128',
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      'fc00::/7',
    ]);
    assert.deepEqual(loadConfig({ METRICS_ALLOW: '203.0.113.7, 2001:db8::/32' }).metricsAllow, [
      '203.0.113.7',
      '2001:db8::/32',
    ]);
  });

  it('checkStorage creates only the default data directory', () => {
    const cwd = process.cwd();
    const dir = mkdtempSync(join(tmpdir(), 'idp-fresh-'));
    process.chdir(dir);
    try {
      assert.deepEqual(checkStorage(loadConfig({})), ['./data']);
      assert.ok(statSync(join(dir, 'data')).isDirectory());
      assert.deepEqual(checkStorage(loadConfig({})), []);
    } finally {
      process.chdir(cwd);
    }
    assert.throws(
      () => checkStorage(loadConfig({ DATABASE_URL: join(dir, 'missing', 'idp.sqlite') })),
      (e: ConfigError) => e.variable === 'DATABASE_URL',
    );
    assert.throws(
      () => checkStorage(loadConfig({ DATA_DIR: join(dir, 'missing') })),
      (e: ConfigError) => e.variable === 'DATA_DIR',
    );
    assert.equal(existsSync(join(dir, 'missing')), false);
    // PostgreSQL with IDP_SECRET keeps nothing on disk: DATA_DIR is not looked at
    assert.deepEqual(
      checkStorage(
        loadConfig({ DATABASE_URL: 'postgres://u@h/db', IDP_SECRET: 'x'.repeat(32), DATA_DIR: '/proc/nowhere' }),
      ),
      [],
    );
  });

  it('generates the SQLite secret once, with mode 0600, and reuses it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-secret-'));
    const config = loadConfig({ DATA_DIR: dir });
    const first = loadSecret(config);
    assert.equal(first.generated, true);
    assert.equal(statSync(join(dir, 'idp-secret')).mode & 0o777, 0o600);
    const second = loadSecret(config);
    assert.equal(second.generated, false);
    assert.equal(second.secret, first.secret);
  });

  it('a bad value stops start-up with one line naming the variable, non-zero exit, no stack trace', () => {
    const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, PORT: 'abc' },
      encoding: 'utf8',
      timeout: 20000,
    });
    assert.notEqual(r.status, 0);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^configuration error: PORT: /);
    assert.doesNotMatch(r.stderr, /\bat .*\.ts:\d+/);
  });

  it('PostgreSQL without IDP_SECRET stops start-up with one line', () => {
    const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres', IDP_SECRET: '' },
      encoding: 'utf8',
      timeout: 20000,
    });
    assert.notEqual(r.status, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /IDP_SECRET/);
  });
});

/** Starts `serve` and expects it to stop at once: exit 2, one line naming the variable, no stack trace. */
function startupRefusal(env: Record<string, string>, variable: string, ...mentions: RegExp[]): string {
  const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
    env: { ...process.env, LOG_LEVEL: 'warn', PORT: '0', PUBLIC_URL: 'http://127.0.0.1:1', IDP_SECRET: '', ...env },
    encoding: 'utf8',
    timeout: 20000,
  });
  assert.equal(r.status, 2, `exit code (stderr: ${r.stderr})`);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.ok(lines[0]!.startsWith(`configuration error: ${variable}: `), lines[0]);
  assert.doesNotMatch(r.stderr, /\bat .*\.ts:\d+|errno|Error:/);
  for (const m of mentions) assert.match(lines[0]!, m);
  return lines[0]!;
}

describe('start-up refusals (a real process)', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'idp-startup-'));
  const file = join(tmp, 'a-file');
  writeFileSync(file, 'not a directory');

  it('a DATA_DIR that is a file is a DATA_DIR problem, not an IDP_SECRET one', () => {
    startupRefusal({ DATA_DIR: file }, 'DATA_DIR', /a-file/, /is a file, not a directory/);
    startupRefusal({ DATA_DIR: file, IDP_SECRET: 'x'.repeat(32) }, 'DATA_DIR', /is a file/);
    startupRefusal({ DATA_DIR: join(file, 'sub') }, 'DATA_DIR', /not a directory/);
  });

  it(
    'a DATA_DIR that is not writable is refused',
    { skip: process.getuid?.() === 0 ? 'root can write anywhere' : false },
    () => {
      const locked = join(tmp, 'locked');
      mkdirSync(locked, { mode: 0o500 });
      chmodSync(locked, 0o500);
      startupRefusal({ DATA_DIR: locked }, 'DATA_DIR', /not writable/);
    },
  );

  it('a DATA_DIR under /proc, /sys or /dev is refused at once', () => {
    startupRefusal({ DATA_DIR: '/proc/self' }, 'DATA_DIR', /'\/proc\/self'/, /kernel file system/);
    startupRefusal({ DATA_DIR: '/sys/kernel' }, 'DATA_DIR', /kernel file system/);
    startupRefusal({ DATA_DIR: '/dev/shm/../null' }, 'DATA_DIR', /kernel file system/);
  });

  it('a SQLite DATABASE_URL in a missing directory is refused, and nothing is created', () => {
    const missing = join(tmp, 'no', 'such', 'dir');
    startupRefusal(
      { DATABASE_URL: join(missing, 'idp.sqlite'), IDP_SECRET: 'x'.repeat(32) },
      'DATABASE_URL',
      /does not exist/,
      /mkdir -p/,
    );
    assert.equal(existsSync(join(tmp, 'no')), false);
  });

  it('PORT=0 without PUBLIC_URL is refused (the issuer would be http://localhost:0)', () => {
    startupRefusal({ PUBLIC_URL: '' }, 'PORT', /PUBLIC_URL/);
  });

  it('a plain-http PUBLIC_URL outside localhost is refused unless explicitly allowed', () => {
    startupRefusal(
      { PUBLIC_URL: 'http://idp.example.org' },
      'PUBLIC_URL',
      /'http:\/\/idp\.example\.org'/,
      /ALLOW_INSECURE_PUBLIC_URL=true/,
    );
  });

  it('an invalid TRUST_PROXY range is refused naming the variable', () => {
    startupRefusal({ TRUST_PROXY: '10.0.0.0/99' }, 'TRUST_PROXY', /'10\.0\.0\.0\/99'/);
    startupRefusal({ TRUST_PROXY: '10.0.0.0/8,999.1.1.1' }, 'TRUST_PROXY', /'999\.1\.1\.1'/);
  });

  it('an http CLAIMS_NAMESPACE is refused unless PUBLIC_URL is http on localhost', () => {
    startupRefusal(
      { PUBLIC_URL: 'https://idp.example.org', CLAIMS_NAMESPACE: 'http://idp.example.org/claims' },
      'CLAIMS_NAMESPACE',
      /https/,
    );
  });

  it('a short METRICS_TOKEN is refused', () => {
    startupRefusal({ METRICS_TOKEN: 'secret' }, 'METRICS_TOKEN', /at least 32 characters/);
  });
});

/** Runs `serve` until it logs that it is ready; returns its log lines. */
async function startAndStop(
  env: Record<string, string>,
  cwd?: string,
  until = 'identity provider ready',
  lingerMs = 0,
): Promise<string> {
  const { spawn } = await import('node:child_process');
  const main = new URL('../../src/main.ts', import.meta.url).pathname;
  const child = spawn(process.execPath, [main, 'serve'], {
    cwd,
    env: { ...process.env, LOG_LEVEL: 'info', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  for (let i = 0; i < 300 && !output.includes(until) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, lingerMs));
  child.kill('SIGTERM');
  await exited;
  assert.match(output, /identity provider ready/, output);
  return output;
}

describe('start-up (a real process)', () => {
  it('on a fresh checkout creates the default ./data directory and says so', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-fresh-start-'));
    const log = await startAndStop(
      { PORT: '0', PUBLIC_URL: 'http://localhost:8080', IDP_SECRET: '', DATA_DIR: '', DATABASE_URL: '' },
      dir,
    );
    assert.match(log, /created the default data directory/);
    assert.ok(existsSync(join(dir, 'data', 'idp.sqlite')));
    assert.ok(existsSync(join(dir, 'data', 'idp-secret')));
  });

  it('ALLOW_INSECURE_PUBLIC_URL=true starts on plain http with a warning', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-insecure-'));
    const log = await startAndStop({
      PORT: '0',
      PUBLIC_URL: 'http://idp.test.internal',
      ALLOW_INSECURE_PUBLIC_URL: 'true',
      CLAIMS_NAMESPACE: 'https://idp.example.org/claims',
      DATABASE_URL: join(dir, 'idp.sqlite'),
      IDP_SECRET: 'x'.repeat(32),
    });
    const warning = log.split('\n').find((l) => l.includes('ALLOW_INSECURE_PUBLIC_URL'));
    assert.ok(warning, log);
    assert.equal(JSON.parse(warning).level, 40, 'logged as a warning');
  });

  it('gives back the memory start-up left behind a moment after it is ready; never with MEMORY_RELEASE_IDLE=0', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-memory-'));
    const env = { PORT: '0', PUBLIC_URL: 'http://localhost:8080', DATABASE_URL: join(dir, 'idp.sqlite') };
    const log = await startAndStop({ ...env, IDP_SECRET: 'x'.repeat(32), LOG_LEVEL: 'debug' }, dir, 'memory released');
    const line = log.split('\n').find((l) => l.includes('memory released'));
    assert.ok(line, log);
    const released = JSON.parse(line) as { beforeMb: number; afterMb: number; ms: number; time: number };
    assert.ok(released.afterMb < released.beforeMb, line);
    const ready = JSON.parse(log.split('\n').find((l) => l.includes('identity provider ready'))!) as { time: number };
    // not before the first answers could go out (a tenth of a second after listening)
    assert.ok(released.time - ready.time >= 100, `${ready.time} -> ${released.time}`);
    const off = await startAndStop(
      { ...env, IDP_SECRET: 'x'.repeat(32), LOG_LEVEL: 'debug', MEMORY_RELEASE_IDLE: '0' },
      dir,
      'identity provider ready',
      2500,
    );
    assert.doesNotMatch(off, /memory released/);
  });
});
