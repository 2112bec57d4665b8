import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  dialects,
  migratedDatabase,
  seedOrg,
  seedUser,
  seedClient,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { seedPasskeys } from './fixtures.ts';
import { freePort } from '../e2e/helpers.ts';

// The real service in a child process, so the test reads exactly what an operator's log receives.
for (const dialect of dialects()) {
  describe(`passkey deletions in the service log (${dialect})`, () => {
    let database: TestDatabase;
    let child: ChildProcess;
    let output = '';
    let base: string;
    let client: { clientId: string; secret: string };
    let keys: number[];

    before(async () => {
      database = await migratedDatabase(dialect);
      const store: Store = await openStore(database.url);
      const ctx = { store, keys: keyring(TEST_SECRET) };
      await seedOrg(ctx, 1, 'example.org');
      const u = await seedUser(ctx, 1, 'alice@example.org');
      keys = await seedPasskeys(store, 1, [u.id], 3);
      client = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1] });
      await store.close();
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      child = spawn(process.execPath, ['src/main.ts', 'serve'], {
        env: {
          ...process.env,
          DATABASE_URL: database.url,
          IDP_SECRET: TEST_SECRET,
          LOG_LEVEL: 'info',
          PORT: String(port),
          HOST: '127.0.0.1',
          PUBLIC_URL: base,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout!.on('data', (chunk) => (output += chunk));
      child.stderr!.on('data', (chunk) => (output += chunk));
      for (let i = 0; i < 300; i++) {
        try {
          if ((await fetch(`${base}/readyz`)).ok) return;
        } catch {
          // not listening yet
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`service did not start: ${output}`);
    });
    after(async () => {
      if (child && child.exitCode === null) {
        await new Promise((resolve) => {
          child.once('exit', resolve);
          child.kill('SIGTERM');
        });
      }
      await database?.drop();
    });

    it('logs each delete with client, organization, eppn and ids, and never the token or the secret', async () => {
      const tokenRes = await fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${client.clientId}:${client.secret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.delete',
      });
      const token = ((await tokenRes.json()) as { access_token: string }).access_token;
      const auth = { authorization: `Bearer ${token}` };
      assert.equal(
        (
          await fetch(`${base}/2/passkey/1/${keys[0]}`, {
            method: 'DELETE',
            headers: { ...auth, 'x-request-id': 'log-one' },
          })
        ).status,
        200,
      );
      assert.equal(
        (
          await fetch(`${base}/2/passkey/1?eppn=alice%40example.org`, {
            method: 'DELETE',
            headers: { ...auth, 'x-request-id': 'log-user' },
          })
        ).status,
        200,
      );
      await new Promise((r) => setTimeout(r, 300));
      const lines = output
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          try {
            return JSON.parse(l);
          } catch {
            return { raw: l };
          }
        });
      const deletions = lines.filter((l) => l.msg === 'passkeys deleted');
      assert.equal(deletions.length, 2, output);
      const one = deletions.find((l) => l.reqId === 'log-one');
      assert.deepEqual(
        {
          client_id: one.client_id,
          org_id: one.org_id,
          eppn: one.eppn,
          passkey_ids: one.passkey_ids,
          deleted_count: one.deleted_count,
        },
        { client_id: client.clientId, org_id: 1, eppn: 'alice@example.org', passkey_ids: [keys[0]], deleted_count: 1 },
      );
      const user = deletions.find((l) => l.reqId === 'log-user');
      assert.deepEqual(user.passkey_ids, keys.slice(1));
      assert.equal(user.deleted_count, 2);
      assert.ok(!output.includes(token), 'the access token is not logged');
      assert.ok(!output.includes(token.split('.')[2]!), 'nor its signature');
      assert.ok(!output.includes(client.secret), 'the client secret is not logged');
      assert.ok(!output.includes(TEST_SECRET), 'the master secret is not logged');
    });
  });
}
