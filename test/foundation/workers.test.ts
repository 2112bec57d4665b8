// WORKERS=2: two processes serve one port (node:cluster), on SQLite and PostgreSQL. Connections
// are handed to the workers in turn, so requests on new connections reach both; a change made by
// another process (the CLI) reaches both workers' caches within a second; a worker that dies is
// replaced while the other serves; SIGTERM stops them all with exit code 0.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import {
  basicAuth,
  cli,
  dialects,
  migratedDatabase,
  spawnService,
  type ServiceProcess,
  type TestDatabase,
} from '../helpers.ts';

/** The worker processes of a primary. */
function workersOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** A request on a connection of its own (fetch would reuse one), so that it may reach either worker. */
function onNewConnection(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode!));
    });
    req.once('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error(`no answer from ${url} within 5 s`)));
    req.end(options.body);
  });
}

async function until<T>(what: string, check: () => T | Promise<T>, ms = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const dialect of dialects()) {
  describe(`WORKERS=2 (${dialect})`, () => {
    let database: TestDatabase;
    let service: ServiceProcess;
    let client: { client_id: string; client_secret: string };

    const tokenStatus = () =>
      onNewConnection(`${service.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(client.client_id, client.client_secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: 'grant_type=client_credentials&scope=passkey.read',
      });

    before(async () => {
      database = await migratedDatabase(dialect);
      assert.equal(
        (await cli(database.url, ['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example'])).code,
        0,
      );
      const added = await cli(database.url, [
        'client',
        'add',
        '--name',
        'api',
        '--scopes',
        'passkey.read',
        '--orgs',
        '1',
        '--json',
      ]);
      assert.equal(added.code, 0, added.err);
      client = JSON.parse(added.out);
      service = await spawnService({ DATABASE_URL: database.url, WORKERS: '2', LOG_LEVEL: 'info' }, undefined, {
        stdout: true,
      });
      await until('two workers listening', () => service.stdout().includes('"msg":"all workers listening"'));
      assert.equal(workersOf(service.pid).length, 2);
    });

    after(async () => {
      await service?.stop();
      await database?.drop();
    });

    it('runs two worker processes behind the one port, both serving', async () => {
      const ids: string[] = Array.from({ length: 10 }, () => randomUUID());
      for (const id of ids)
        assert.equal(await onNewConnection(`${service.url}/readyz`, { headers: { 'x-request-id': id } }), 200);
      // each worker logs the requests it answers, with its pid
      const answeredBy = await until(
        'the request log',
        () => {
          const lines = service
            .stdout()
            .split('\n')
            .filter((l) => l.startsWith('{'))
            .map((l) => JSON.parse(l) as { pid?: number; reqId?: string; msg?: string });
          const pids = new Set(
            lines.filter((l) => l.msg === 'request completed' && ids.includes(l.reqId!)).map((l) => l.pid),
          );
          return pids.size === 2 ? pids : undefined;
        },
        5000,
      ).catch((err: Error) => {
        throw new Error(`${err.message}: ${service.stdout().slice(-1500)}`);
      });
      assert.deepEqual([...answeredBy].sort(), workersOf(service.pid).sort());
    });

    it('/metrics, whichever worker answers, counts the requests of both', async () => {
      const readyzCount = async () => {
        const text = await new Promise<string>((resolve, reject) => {
          const req = request(`${service.url}/metrics`, { agent: false }, (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (body += d));
            res.once('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`${res.statusCode}`))));
          });
          req.once('error', reject);
          req.end();
        });
        const line = text
          .split('\n')
          .find(
            (l) =>
              l.startsWith('idp_http_requests_total{') && l.includes('route="/readyz"') && l.includes('status="200"'),
          );
        return Number(line?.split(' ').at(-1) ?? 0);
      };
      const before = await readyzCount();
      for (let i = 0; i < 10; i++) assert.equal(await onNewConnection(`${service.url}/readyz`), 200);
      // two scrapes, on new connections: one per worker
      assert.deepEqual([await readyzCount(), await readyzCount()], [before + 10, before + 10]);
    });

    it('a client disabled by another process is refused by both workers within a second', async () => {
      for (let i = 0; i < 6; i++) assert.equal(await tokenStatus(), 200);
      const disabled = await cli(database.url, ['client', 'disable', client.client_id]);
      assert.equal(disabled.code, 0, disabled.err);
      const at = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      const statuses = [];
      for (let i = 0; i < 10; i++) statuses.push(await tokenStatus());
      assert.deepEqual(statuses, Array(10).fill(401), `after ${Date.now() - at} ms`);
      assert.equal((await cli(database.url, ['client', 'enable', client.client_id])).code, 0);
      await until('the client accepted again', async () => (await tokenStatus()) === 200, 3000);
    });

    it('replaces a worker that dies while the other keeps serving', async () => {
      const [victim, survivor] = workersOf(service.pid);
      process.kill(victim!, 'SIGKILL');
      // a connection handed to the worker in the moment it dies is lost with it: ask once the primary knows
      await until('the primary to see the worker die', () =>
        service.stdout().includes('"msg":"worker died; starting another"'),
      );
      assert.equal(await onNewConnection(`${service.url}/readyz`), 200);
      const replaced = await until('a replacement worker', () => {
        const now = workersOf(service.pid);
        return now.length === 2 && !now.includes(victim!) && now.includes(survivor!) ? now : undefined;
      });
      assert.equal(replaced.length, 2);
      await until('the replacement serving', async () => {
        for (let i = 0; i < 4; i++) if ((await tokenStatus()) !== 200) return false;
        return true;
      });
    });

    it('SIGTERM stops every worker and exits 0', async () => {
      const workers = workersOf(service.pid);
      assert.equal(await service.stop('SIGTERM'), 0);
      for (const pid of workers) assert.throws(() => process.kill(pid, 0), /ESRCH/, `worker ${pid} is gone`);
    });
  });
}
