// SQLite on a full disk, on the real service (`node src/main.ts serve`) with its database on a
// small file system of its own (tmpfs): once a filler has taken the space, a write is answered 503
// with Retry-After and a clear message, and logged at error level; reads go on; nothing is
// corrupted; once the filler is gone, writes succeed again without a restart.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { basicAuth, cli, spawnService, type ServiceProcess } from '../helpers.ts';
import { addOrganization, addUser } from '../../src/directory/index.ts';
import { openStore } from '../../src/store/index.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { sql } from 'kysely';

const DEV = { PUBLIC_URL: 'http://127.0.0.1:8080' };

function mountable(): string | undefined {
  if (process.getuid?.() !== 0) return 'mounting a small file system needs root';
  const probe = mkdtempSync(join(tmpdir(), 'idp-mount-probe-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', probe]).status === 0;
  if (mounted) spawnSync('umount', [probe]);
  rmSync(probe, { recursive: true, force: true });
  return mounted ? undefined : 'tmpfs cannot be mounted here';
}

/** Fills the file system with one file until it has no room left. */
function fill(path: string): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
}

describe('SQLite on a full disk', { skip: mountable() }, () => {
  let dir: string;
  let service: ServiceProcess;
  let ids: number[];
  let client: { client_id: string; client_secret: string };
  let url: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'idp-full-'));
    assert.equal(spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', dir]).status, 0);
    url = join(dir, 'idp.sqlite');
    const store = await openStore(url);
    try {
      await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
      const user = await addUser(store, { orgId: 1, eppn: 'ada@example.org', name: 'Ada' });
      ids = await seedPasskeys(store, 1, [user.id], 200);
    } finally {
      await store.close();
    }
    const made = await cli(
      url,
      ['client', 'add', '--name', 'helpdesk', '--scopes', 'passkey.delete passkey.read', '--orgs', '1', '--json'],
      '',
      DEV,
    );
    assert.equal(made.code, 0, made.err);
    client = JSON.parse(made.out);
    service = await spawnService({ DATABASE_URL: url }, undefined, { stdout: true });
  });

  after(async () => {
    await service?.stop();
    spawnSync('umount', [dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses writes with 503 while the disk is full, keeps reading, and writes again once there is room', async () => {
    const tokenRes = await fetch(`${service.url}/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: basicAuth(client.client_id, client.client_secret),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials&scope=passkey.delete passkey.read',
    });
    assert.equal(tokenRes.status, 200);
    const bearer = ((await tokenRes.json()) as { access_token: string }).access_token;
    const call = (method: string, path: string) =>
      fetch(`${service.url}${path}`, { method, headers: { authorization: `Bearer ${bearer}` } });
    assert.equal((await call('DELETE', `/2/passkey/1/${ids[0]}`)).status, 200);

    const filler = join(dir, 'filler');
    fill(filler);
    const refused = [];
    for (const id of ids.slice(1, 40)) {
      const res = await call('DELETE', `/2/passkey/1/${id}`);
      const body = await res.text();
      if (res.status === 200) continue; // a write that still found room in pages SQLite had
      assert.equal(res.status, 503, body + service.stdout().slice(-3000));
      assert.ok(res.headers.get('retry-after'), 'Retry-After');
      assert.match(body, /cannot take writes/);
      assert.doesNotMatch(body, /SQLITE|disk I\/O|stack/i);
      refused.push(id);
    }
    assert.ok(refused.length > 0, 'writes refused while the disk is full');
    const read = await call('GET', '/2/passkey/1?eppn=ada%40example.org');
    assert.equal(read.status, 200, 'reads go on');
    assert.match(service.stdout(), /database full/);

    rmSync(filler);
    for (const id of refused) assert.equal((await call('DELETE', `/2/passkey/1/${id}`)).status, 200, 'writes again');
    await service.stop();
    const store = await openStore(url, { migrate: false });
    try {
      const check = await sql<{ integrity_check: string }>`pragma integrity_check`.execute(store.db);
      assert.deepEqual(
        check.rows.map((r) => r.integrity_check),
        ['ok'],
      );
      const left = await store.db.selectFrom('passkeys').select('id').where('id', 'in', refused).execute();
      assert.equal(left.length, 0);
    } finally {
      await store.close();
    }
  });
});
