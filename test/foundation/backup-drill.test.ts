// The backup drill: the real service on SQLite takes writes (users added as the admin CLI adds them,
// passkeys registered over HTTP with a software authenticator, sign-ins and their audit records)
// while `backup` copies its database from another process. The copy is verified, restored into a
// new data directory and served from there: everything acknowledged before the backup began is
// there, the users sign in with their passkeys, and tokens signed before the backup verify against
// the restored service's JWKS.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { keyring } from '../../src/crypto.ts';
import { addUser } from '../../src/directory/index.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { createRecoveryLink } from '../../src/webauthn/recovery-links.ts';
import {
  cookieJar,
  newCredential,
  registerPasskey,
  seedSignIns,
  signIn,
  type RelyingParty,
  type Target,
  type VirtualUser,
} from '../../bench/signin-flow.ts';
import { pickFreePort, seedClient, spawnService, TEST_SECRET, type ServiceProcess } from '../helpers.ts';

/** The admin CLI in its own process, as an operator runs it. */
function idp(args: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['src/main.ts', ...args], {
      env: { ...process.env, LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code: code ?? -1, out, err }));
  });
}

async function accessToken(target: Target, clientId: string, secret: string): Promise<string> {
  const res = await fetch(`${target.url}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials&scope=passkey.read',
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** What cannot change once written: users' identities, passkeys' keys, audit records whole. */
const COLUMNS = {
  users: ['id', 'sub', 'eppn', 'org_id', 'created_at'],
  passkeys: ['id', 'user_id', 'credential_id', 'public_key', 'created_at'],
  audit_events: undefined,
} as const;
type Table = keyof typeof COLUMNS;

async function lasting(store: Store, table: Table, upTo: number): Promise<string[]> {
  const query = store.db.selectFrom(table).where('id', '<=', upTo).orderBy('id');
  const columns = COLUMNS[table];
  const rows = await (columns ? query.select(columns as unknown as 'id'[]) : query.selectAll()).execute();
  return rows.map((r) =>
    JSON.stringify(r, (_k, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v)),
  );
}

describe('backup drill: back up a serving SQLite service, restore it elsewhere, serve from the copy', () => {
  const root = mkdtempSync(join(tmpdir(), 'idp-backup-drill-'));
  const original = join(root, 'original');
  const restored = join(root, 'restored');
  const backupFile = join(root, 'nightly.sqlite');
  let port: number;
  let target: Target;
  let service: ServiceProcess | undefined;
  let store: Store;
  let rp: RelyingParty;
  const users: VirtualUser[] = [];
  let tokens: string[] = [];
  /** what was acknowledged before the backup began: the highest ids of users, passkeys and audit records */
  const acknowledged = {
    rows: {} as Record<Table, string[]>,
    upTo: {} as Record<Table, number>,
    eppns: [] as string[],
  };

  before(async () => {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(original);
    mkdirSync(restored);
    port = await pickFreePort();
    service = await spawnService({ DATA_DIR: original }, port);
    target = { url: service.url, publicUrl: service.url };
    // The admin CLI's way in: the directory's functions on the same file, from another process.
    store = await openStore(join(original, 'idp.sqlite'));
  });
  after(async () => {
    await service?.stop();
    await store?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('backs up while users, passkeys and sign-ins are being written', async () => {
    const keys = keyring(TEST_SECRET);
    const seeded = await seedSignIns(store, keys, target.publicUrl, 3);
    rp = seeded.rp;
    for (const { user, recoveryUrl } of seeded.users) {
      await registerPasskey(target, user, recoveryUrl);
      users.push(user);
    }
    const api = await seedClient({ store, keys }, { scopes: ['passkey.read'], orgs: [1] });
    tokens = [await accessToken(target, api.clientId, api.secret)];

    // Writes go on while the backup runs: a user added, a passkey registered, a sign-in, again and again.
    let writing = true;
    let written = 0;
    const writer = (async () => {
      for (let i = 0; writing && i < 200; i++) {
        const eppn = `late${i}@signin.example.org`;
        await addUser(store, { orgId: 1, eppn, name: `Late ${i}`, email: `late${i}@example.org` });
        const link = await createRecoveryLink(store, target.publicUrl, { eppn });
        const user: VirtualUser = { eppn, password: '', sub: '', credential: newCredential(), jar: cookieJar() };
        await registerPasskey(target, user, link.url);
        await signIn(target, rp, user, 'passkey');
        users.push(user);
        written++;
      }
    })();
    let failed: unknown;
    writer.catch((err: unknown) => (failed = err));
    while (written < 2 && failed === undefined) await new Promise((r) => setTimeout(r, 20));
    if (failed !== undefined) throw failed instanceof Error ? failed : new Error(String(failed));
    tokens.push(await accessToken(target, api.clientId, api.secret));
    for (const table of Object.keys(COLUMNS) as Table[]) {
      const top = await store.db
        .selectFrom(table)
        .select((eb) => eb.fn.max('id').as('id'))
        .executeTakeFirst();
      acknowledged.upTo[table] = Number(top?.id);
      acknowledged.rows[table] = await lasting(store, table, acknowledged.upTo[table]);
    }
    acknowledged.eppns = users.map((u) => u.eppn);
    const before = written;

    const backup = await idp(['backup', backupFile, '--json'], { DATA_DIR: original, IDP_SECRET: TEST_SECRET });
    writing = false;
    await writer;
    assert.equal(backup.code, 0, backup.err);
    const result = JSON.parse(backup.out) as Record<string, unknown>;
    assert.equal(result.file, backupFile);
    assert.match(String(result.sha256), /^[0-9a-f]{64}$/);
    assert.match(String(result.schema_version), /^\d{3}_/);
    assert.match(String(result.secret), /IDP_SECRET/);
    assert.ok(written > before, 'writes went on while the backup ran');

    const verify = await idp(['backup', 'verify', backupFile], {});
    assert.equal(verify.code, 0, verify.err);
    assert.match(verify.out, /^ok: .* is intact/);
  });

  it('restores into a new data directory, and the service there has everything acknowledged before the backup', async () => {
    // The event ids receivers saw: up to the last event written before the service stopped, after the backup.
    const maxEventId = async (s: Store) =>
      Number(
        (
          await s.db
            .selectFrom('events')
            .select((eb) => eb.fn.max('id').as('id'))
            .executeTakeFirst()
        )?.id ?? 0,
      );
    const seen = await maxEventId(store);
    await service!.stop();
    service = undefined;
    const restore = await idp(['restore', backupFile], { DATA_DIR: restored, IDP_SECRET: TEST_SECRET });
    assert.equal(restore.code, 0, restore.err);
    assert.match(restore.out, /opens its signing keys; the service can start/);
    // The same address, as when a lost machine is replaced: the issuer does not change.
    service = await spawnService({ DATA_DIR: restored }, port);
    const copy = await openStore(join(restored, 'idp.sqlite'));
    try {
      const counts: string[] = [];
      for (const table of Object.keys(COLUMNS) as Table[]) {
        assert.ok(acknowledged.rows[table]!.length > 0);
        assert.deepEqual(await lasting(copy, table, acknowledged.upTo[table]!), acknowledged.rows[table], table);
        counts.push(`${table} ${acknowledged.rows[table]!.length}`);
      }
      console.log(`# acknowledged before the backup and found in the restored copy: ${counts.join(', ')}`);
      // Events written after the backup are lost with it, but their ids went out: a new event's id is above them.
      const restoredTop = await maxEventId(copy);
      assert.ok(restoredTop < seen, 'events were written after the backup began');
      await addUser(copy, {
        orgId: 1,
        eppn: 'after-restore@signin.example.org',
        name: 'After',
        email: 'after@example.org',
      });
      const next = await maxEventId(copy);
      assert.ok(next > seen, `the first event after the restore has id ${next}, above ${seen} issued before`);
      console.log(`# event ids: ${restoredTop} in the backup, ${seen} issued before the restore, ${next} the next one`);
      const eppns = await copy.db.selectFrom('users').select('eppn').execute();
      for (const eppn of acknowledged.eppns)
        assert.ok(
          eppns.some((r) => r.eppn === eppn),
          `${eppn} restored`,
        );
    } finally {
      await copy.close();
    }
  });

  it('users sign in with their passkeys at the restored service, and earlier tokens verify against its JWKS', async () => {
    const restoredUsers = users.filter((u) => acknowledged.eppns.includes(u.eppn));
    assert.ok(restoredUsers.length >= 5);
    for (const user of restoredUsers) {
      const { claims } = await signIn(target, rp, user, 'passkey');
      assert.equal(claims.sub, user.sub);
    }
    const jwks = createLocalJWKSet(await (await fetch(`${target.url}/openid/jwks`)).json());
    for (const token of tokens) {
      const { payload } = await jwtVerify(token, jwks, { issuer: target.publicUrl, typ: 'at+jwt' });
      assert.equal(payload.scope, 'passkey.read');
    }
  });

  it('restore refuses the running service, then a data directory that is not empty without --force', async () => {
    const env = { DATA_DIR: restored, IDP_SECRET: TEST_SECRET };
    const running = await idp(['restore', backupFile, '--force'], env);
    assert.equal(running.code, 1);
    assert.match(running.err, /is open in another process: stop the service/);
    await service!.stop();
    service = undefined;
    const occupied = await idp(['restore', backupFile], env);
    assert.equal(occupied.code, 1);
    assert.match(occupied.err, /the data directory .* is not empty \(idp\.sqlite.*\); --force replaces its database/);
    const forced = await idp(['restore', backupFile, '--force'], env);
    assert.equal(forced.code, 0, forced.err);
  });
});
