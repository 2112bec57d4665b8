// The outbox under crashes and with two instances, on the real service (`node src/main.ts serve`):
// kill -9 during a stream of passkey deletions through the API with a slow receiver; after a
// restart every deletion that happened (every acknowledged one among them) is delivered, and no
// event is invented. Two instances on one PostgreSQL deliver each event once, in order per user.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  dialects,
  migratedDatabase,
  cli,
  spawnService,
  basicAuth,
  type ServiceProcess,
  type TestDatabase,
} from '../helpers.ts';
import { addOrganization, addUser } from '../../src/directory/index.ts';
import { openStore } from '../../src/store/index.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { startReceiver, type Receiver, type Received } from './receiver.ts';

const USERS = 100;
const PASSKEYS = 1000;
const DEV = { PUBLIC_URL: 'http://127.0.0.1:8080' };

interface Seeded {
  ids: number[];
  client: { client_id: string; client_secret: string };
}

async function seed(db: TestDatabase, receiver: Receiver): Promise<Seeded> {
  const store = await openStore(db.url);
  try {
    await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
    const users = [];
    for (let i = 0; i < USERS; i++)
      users.push(await addUser(store, { orgId: 1, eppn: `u${i}@example.org`, name: `U ${i}` }));
    const ids = await seedPasskeys(
      store,
      1,
      users.map((u) => u.id),
      PASSKEYS,
    );
    const client = await cli(
      db.url,
      ['client', 'add', '--name', 'helpdesk', '--scopes', 'passkey.delete', '--orgs', '1', '--json'],
      '',
      DEV,
    );
    assert.equal(client.code, 0, client.err);
    const hook = await cli(
      db.url,
      ['webhook', 'add', '--org', '1', '--url', `${receiver.url}/hook`, '--events', 'passkey.deleted', '--json'],
      '',
      DEV,
    );
    assert.equal(hook.code, 0, hook.err);
    return { ids, client: JSON.parse(client.out) };
  } finally {
    await store.close();
  }
}

async function token(service: ServiceProcess, client: Seeded['client']): Promise<string> {
  const res = await fetch(`${service.url}/oauth/token`, {
    method: 'POST',
    headers: {
      authorization: basicAuth(client.client_id, client.client_secret),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials&scope=passkey.delete',
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Deletes the passkeys through the API, `concurrency` at a time, spreading the calls over the services; stops at the first failure. */
async function deleteAll(
  services: ServiceProcess[],
  tokens: string[],
  ids: number[],
  concurrency: number,
  acknowledged: number[],
) {
  let next = 0;
  async function worker(w: number) {
    while (next < ids.length) {
      const id = ids[next++]!;
      const i = (w + next) % services.length;
      try {
        const res = await fetch(`${services[i]!.url}/2/passkey/1/${id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${tokens[i]}` },
        });
        if (res.status !== 200) return;
        acknowledged.push(id);
      } catch {
        return; // the service was killed
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
}

function unique(received: Received[]): Map<string, { id: number; eppn: string }> {
  const seen = new Map<string, { id: number; eppn: string }>();
  for (const r of received) {
    const body = JSON.parse(r.body) as { data: { id: number; eppn: string } };
    seen.set(String(r.headers['webhook-id']), body.data);
  }
  return seen;
}

async function remainingPasskeys(db: TestDatabase, ids: number[]): Promise<Set<number>> {
  const store = await openStore(db.url);
  try {
    const rows = await store.db.selectFrom('passkeys').select('id').execute();
    const left = new Set(rows.map((r) => Number(r.id)));
    return new Set(ids.filter((id) => left.has(id)));
  } finally {
    await store.close();
  }
}

async function waitDrained(db: TestDatabase, ms = 60_000): Promise<void> {
  const store = await openStore(db.url);
  try {
    const deadline = Date.now() + ms;
    for (;;) {
      const row = await store.db
        .selectFrom('event_deliveries')
        .select((eb) => eb.fn.countAll<number | string>().as('n'))
        .where('state', '=', 'pending')
        .executeTakeFirstOrThrow();
      if (Number(row.n) === 0) return;
      if (Date.now() > deadline) throw new Error(`${row.n} deliveries still pending`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await store.close();
  }
}

for (const dialect of dialects()) {
  describe(`events survive kill -9 (${dialect})`, { timeout: 180_000 }, () => {
    let db: TestDatabase;
    let receiver: Receiver;
    let services: ServiceProcess[] = [];
    before(async () => {
      db = await migratedDatabase(dialect);
      receiver = await startReceiver();
    });
    after(async () => {
      for (const s of services) await s.stop('SIGKILL');
      await receiver.close();
      await db.drop();
    });

    it('delivers every deletion that happened, acknowledged ones included, and invents none', async () => {
      const { ids, client } = await seed(db, receiver);
      // a slow receiver: the outbox is still full when the service dies
      receiver.answer = () => new Promise((r) => setTimeout(() => r(200), 5));
      const first = await spawnService({ DATABASE_URL: db.url, EVENTS_RETRY_BASE_MS: '50' });
      services.push(first);
      const acknowledged: number[] = [];
      const deleting = deleteAll([first], [await token(first, client)], ids, 8, acknowledged);
      while (acknowledged.length < 300) await new Promise((r) => setTimeout(r, 5));
      await first.stop('SIGKILL');
      await deleting;
      const atKill = unique(receiver.received).size;
      assert.ok(
        atKill < acknowledged.length,
        `the receiver was behind at the kill (${atKill} of ${acknowledged.length})`,
      );

      const second = await spawnService({ DATABASE_URL: db.url, EVENTS_RETRY_BASE_MS: '50' });
      services.push(second);
      await waitDrained(db);
      const left = await remainingPasskeys(db, ids);
      const deleted = ids.filter((id) => !left.has(id));
      const delivered = new Set([...unique(receiver.received).values()].map((d) => d.id));
      for (const id of acknowledged) assert.ok(delivered.has(id), `acknowledged deletion of ${id} delivered`);
      assert.deepEqual(
        [...delivered].sort((a, b) => a - b),
        deleted.sort((a, b) => a - b),
        'one event per deletion that happened, none invented',
      );
      await second.stop();
      services = [];
    });
  });
}

describe('two instances on one PostgreSQL', { skip: !dialects().includes('postgres'), timeout: 180_000 }, () => {
  let db: TestDatabase;
  let receiver: Receiver;
  const services: ServiceProcess[] = [];
  before(async () => {
    db = await migratedDatabase('postgres');
    receiver = await startReceiver();
  });
  after(async () => {
    for (const s of services) await s.stop();
    await receiver.close();
    await db.drop();
  });

  it('delivers each event once, in order per user', async () => {
    const { ids, client } = await seed(db, receiver);
    services.push(await spawnService({ DATABASE_URL: db.url }), await spawnService({ DATABASE_URL: db.url }));
    const tokens = await Promise.all(services.map((s) => token(s, client)));
    const acknowledged: number[] = [];
    await deleteAll(services, tokens, ids.slice(0, 400), 8, acknowledged);
    assert.equal(acknowledged.length, 400);
    await waitDrained(db);
    const seen = unique(receiver.received);
    assert.equal(receiver.received.length, seen.size, 'no event delivered twice');
    assert.deepEqual(
      [...seen.values()].map((d) => d.id).sort((a, b) => a - b),
      [...acknowledged].sort((a, b) => a - b),
    );
    // per user, events arrive in the order they were recorded
    const byUser = new Map<string, number[]>();
    for (const r of receiver.received) {
      const eppn = (JSON.parse(r.body) as { data: { eppn: string } }).data.eppn;
      const eventId = Number(String(r.headers['webhook-id']).slice('msg_'.length));
      byUser.set(eppn, [...(byUser.get(eppn) ?? []), eventId]);
    }
    for (const [eppn, order] of byUser)
      assert.deepEqual(
        order,
        [...order].sort((a, b) => a - b),
        eppn,
      );
  });
});
