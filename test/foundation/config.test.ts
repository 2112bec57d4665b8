import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig, SETTINGS } from '../../src/config.ts';
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
  });

  it('recognises PostgreSQL and requires IDP_SECRET there', () => {
    assert.throws(() => loadConfig({ DATABASE_URL: 'postgres://u@h/db' }), (e: ConfigError) => e.variable === 'IDP_SECRET');
    const c = loadConfig({ DATABASE_URL: 'postgres://u@h/db', IDP_SECRET: 'x'.repeat(32) });
    assert.equal(c.dialect, 'postgres');
  });

  const bad: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'PORT'],
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
  ];
  for (const [env, variable] of bad) {
    it(`rejects ${JSON.stringify(env)} naming ${variable}`, () => {
      assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && e.variable === variable && e.message.startsWith(`${variable}: `));
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

  it('documents every setting it reads', () => {
    const names = SETTINGS.map((s) => s.name);
    for (const n of ['PORT', 'HOST', 'PUBLIC_URL', 'DATABASE_URL', 'IDP_SECRET', 'LOG_LEVEL', 'ACCESS_TOKEN_TTL', 'PAGINATION_TOKEN_TTL']) assert.ok(names.includes(n), n);
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const n of names) assert.ok(readme.includes(`\`${n}\``), `README documents ${n}`);
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
    const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], { env: { ...process.env, PORT: 'abc' }, encoding: 'utf8', timeout: 20000 });
    assert.notEqual(r.status, 0);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^configuration error: PORT: /);
    assert.doesNotMatch(r.stderr, /\bat .*\.ts:\d+/);
  });

  it('PostgreSQL without IDP_SECRET stops start-up with one line', () => {
    const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], { env: { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres', IDP_SECRET: '' }, encoding: 'utf8', timeout: 20000 });
    assert.notEqual(r.status, 0);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /IDP_SECRET/);
  });
});
