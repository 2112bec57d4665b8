// Userinfo's kept claims and the authorization server's client cache are dropped when what they
// depend on changes: at once on the instance that made the change, within a second on another
// instance on the same database (PostgreSQL LISTEN/NOTIFY, or the SQLite invalidations table).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import {
  basicAuth,
  cli,
  dialects,
  migratedDatabase,
  seedClient,
  seedOrg,
  seedUser,
  testConfig,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { mintUserToken } from './fixtures.ts';
import { keyring, type Keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildApp, type App } from '../../src/app.ts';
import { setUserAttributes } from '../../src/directory/index.ts';
import { updateClient } from '../../src/clients/index.ts';
import { giveConsent, withdrawConsent } from '../../src/clients/consents.ts';
import { disableUser, removeUser } from '../../src/oauth/account-lifecycle.ts';
import { endUserSessions } from '../../src/oauth/end-user-sessions.ts';
import { publish } from '../../src/store/invalidation.ts';
import type { User } from '../../src/store/directory.ts';

const REDIRECT = 'https://rp.example.com/callback';

interface Instance extends App {
  store: Store;
  keys: Keyring;
  close(): Promise<void>;
}

async function instance(url: string): Promise<Instance> {
  const store = await openStore(url);
  const keys = keyring(TEST_SECRET);
  const built = await buildApp({ config: testConfig(url), store, keys });
  await built.app.ready();
  return {
    ...built,
    store,
    keys,
    async close() {
      await built.app.close();
      await store.close();
    },
  };
}

interface Subject {
  user: User;
  clientId: string;
  secret: string;
  token: string;
  grantId: string;
}

let serial = 0;

/** A user (named Ada) with a consent to a client releasing the name, and a userinfo token. */
async function subject(a: Instance): Promise<Subject> {
  const eppn = `ada${++serial}@example.org`;
  const user = await seedUser(a, 1, eppn, { name: 'Ada', email: eppn });
  const { clientId, secret } = await seedClient(a, { groups: ['userinfo-name', 'email'], redirectUris: [REDIRECT] });
  await giveConsent(a.store, user, clientId, ['openid', 'profile', 'email']);
  const token = await mintUserToken(a, { accountId: user.sub, clientId, scope: 'openid profile email' });
  const grantId = (await a.provider.current().AccessToken.find(token))!.grantId!;
  return { user, clientId, secret, token, grantId };
}

function userinfo(app: Instance, token: string) {
  return app.app.inject({ method: 'GET', url: '/openid/userinfo', headers: { authorization: `Bearer ${token}` } });
}

type Outcome = { statusCode: number; json(): Record<string, unknown> };

interface Path {
  name: string;
  /** makes the change on the given instance */
  change: (a: Instance, s: Subject) => Promise<unknown>;
  /** true when the answer shows the change */
  shows: (res: Outcome) => boolean;
}

const refused = (res: Outcome) => res.statusCode === 401;

const PATHS: Path[] = [
  {
    name: 'token revoked at the revocation endpoint',
    change: async (a, s) => {
      const res = await a.app.inject({
        method: 'POST',
        url: '/oauth/revoke',
        headers: {
          authorization: basicAuth(s.clientId, s.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: new URLSearchParams({ token: s.token, token_type_hint: 'access_token' }).toString(),
      });
      assert.equal(res.statusCode, 200);
    },
    shows: refused,
  },
  {
    name: 'grant revoked',
    change: async (a, s) => (await a.provider.current().Grant.find(s.grantId))!.destroy(),
    shows: refused,
  },
  {
    name: 'sessions ended (endUserSessions)',
    change: (a, s) => endUserSessions(a.store, a.provider.current(), s.user.sub),
    shows: refused,
  },
  { name: 'user disabled', change: (a, s) => disableUser(a.store, s.user.eppn), shows: refused },
  { name: 'user removed', change: (a, s) => removeUser(a.store, s.user.eppn), shows: refused },
  {
    name: 'user renamed',
    change: (a, s) => setUserAttributes(a.store, s.user.eppn, { name: 'Ada Renamed' }),
    shows: (res) => res.statusCode === 200 && res.json().name === 'Ada Renamed',
  },
  {
    name: "client's groups changed",
    change: (a, s) => updateClient(a.store, s.clientId, { groups: ['email'] }),
    shows: (res) => res.statusCode === 200 && res.json().name === undefined && res.json().email !== undefined,
  },
  {
    name: 'consent withdrawn',
    change: async (a, s) => assert.equal(await withdrawConsent(a.store, s.user, s.clientId), true),
    shows: refused,
  },
];

/** Polls until the answer shows the change, for at most limitMs; returns the milliseconds it took. */
async function reflected(app: Instance, token: string, shows: Path['shows'], limitMs = 1000): Promise<number> {
  const start = performance.now();
  for (;;) {
    const elapsed = performance.now() - start;
    if (shows(await userinfo(app, token))) return elapsed;
    if (elapsed > limitMs) return Infinity;
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function cachedOn(app: Instance, s: Subject): Promise<void> {
  const res = await userinfo(app, s.token);
  assert.equal(res.statusCode, 200);
  assert.equal(res.json().name, 'Ada');
}

for (const dialect of dialects()) {
  describe(`userinfo cache invalidation (${dialect})`, () => {
    let database: TestDatabase;
    let a: Instance;
    let b: Instance;
    const timings: Record<string, number> = {};

    before(async () => {
      database = await migratedDatabase(dialect);
      a = await instance(database.url);
      b = await instance(database.url);
      await seedOrg(a);
    });
    after(async () => {
      await b?.close();
      await a?.close();
      await database?.drop();
      console.log(`# ${dialect}: ms until the other instance showed each change: ${JSON.stringify(timings)}`);
    });

    it('receives other processes’ invalidations', () => {
      const mode = dialect === 'postgres' ? 'listening' : 'polling';
      assert.equal(a.store.invalidations?.mode, mode);
      assert.equal(b.store.invalidations?.mode, mode);
    });

    for (const path of PATHS) {
      it(`${path.name}: the next request on the same instance shows it`, async () => {
        const s = await subject(a);
        await cachedOn(a, s);
        await cachedOn(a, s); // served from the cache
        await path.change(a, s);
        const res = await userinfo(a, s.token);
        assert.ok(path.shows(res), `${res.statusCode} ${res.body}`);
      });

      it(`${path.name}: another instance on the database shows it within a second`, async () => {
        const s = await subject(a);
        await cachedOn(b, s);
        await cachedOn(b, s);
        await path.change(a, s);
        const ms = await reflected(b, s.token, path.shows);
        timings[path.name] = Math.round(ms);
        assert.ok(ms <= 1000, `not shown within 1 s`);
      });
    }

    it('the admin CLI (another process) reaches both instances within a second', async () => {
      const s = await subject(a);
      await cachedOn(a, s);
      await cachedOn(b, s);
      const done = await cli(database.url, ['user', 'set', s.user.eppn, '--name', 'Ada From CLI']);
      assert.equal(done.code, 0, done.err);
      const shows = (res: Outcome) => res.json().name === 'Ada From CLI';
      const [onA, onB] = await Promise.all([reflected(a, s.token, shows), reflected(b, s.token, shows)]);
      timings['user set (CLI)'] = Math.round(Math.max(onA, onB));
      assert.ok(onA <= 1000 && onB <= 1000, `${onA} / ${onB} ms`);

      const groups = await cli(database.url, ['client', 'update', s.clientId, '--groups', 'email']);
      assert.equal(groups.code, 0, groups.err);
      const noName = (res: Outcome) => res.statusCode === 200 && res.json().name === undefined;
      const [gA, gB] = await Promise.all([reflected(a, s.token, noName), reflected(b, s.token, noName)]);
      timings['client update --groups (CLI)'] = Math.round(Math.max(gA, gB));
      assert.ok(gA <= 1000 && gB <= 1000, `${gA} / ${gB} ms`);

      const disabled = await cli(database.url, ['user', 'disable', s.user.eppn]);
      assert.equal(disabled.code, 0, disabled.err);
      const [dA, dB] = await Promise.all([reflected(a, s.token, refused), reflected(b, s.token, refused)]);
      timings['user disable (CLI)'] = Math.round(Math.max(dA, dB));
      assert.ok(dA <= 1000 && dB <= 1000, `${dA} / ${dB} ms`);
    });

    it("a client's change drops the authorization server's client cache, here and on the other instance", async () => {
      const { clientId } = await seedClient(a, { name: 'Before', redirectUris: [REDIRECT] });
      assert.equal((await a.provider.current().Client.find(clientId))?.clientName, 'Before');
      assert.equal((await b.provider.current().Client.find(clientId))?.clientName, 'Before');
      await updateClient(a.store, clientId, { name: 'After' });
      assert.equal((await a.provider.current().Client.find(clientId))?.clientName, 'After');
      const start = performance.now();
      while ((await b.provider.current().Client.find(clientId))?.clientName !== 'After') {
        assert.ok(performance.now() - start < 1000, 'the other instance still has the old registration');
        await new Promise((r) => setTimeout(r, 10));
      }
    });

    it('a rolled-back change invalidates nothing on the other instance', async () => {
      const s = await subject(a);
      await cachedOn(b, s);
      const seen: string[] = [];
      const stop = b.store.invalidations!.subscribe((inv) => {
        if (inv === null || (inv.topic === 'user' && inv.key === s.user.sub)) seen.push(JSON.stringify(inv));
      });
      try {
        await assert.rejects(
          a.store.db.transaction().execute(async (trx) => {
            await trx.updateTable('users').set({ name: 'Never' }).where('sub', '=', s.user.sub).execute();
            await publish(trx, 'user', s.user.sub);
            throw new Error('rolled back');
          }),
          /rolled back/,
        );
        await new Promise((r) => setTimeout(r, 600));
        assert.deepEqual(seen, []);
      } finally {
        stop();
      }
      await cachedOn(b, s);
    });

    if (dialect === 'postgres') {
      it('the listener reconnects after its connection is killed; meanwhile the table is polled', async () => {
        const admin = new pg.Client({ connectionString: database.url });
        await admin.connect();
        try {
          const s = await subject(a);
          await cachedOn(b, s);
          const killed = await admin.query(
            `select pg_terminate_backend(pid) from pg_stat_activity
             where application_name = 'idp-invalidations' and datname = current_database()`,
          );
          assert.equal(killed.rowCount, 2); // both instances' listeners
          const bus = b.store.invalidations!;
          const mode = () => bus.mode;
          const lostAt = performance.now();
          while (mode() !== 'polling') {
            assert.ok(performance.now() - lostAt < 1000, 'the lost connection went unnoticed');
            await new Promise((r) => setTimeout(r, 5));
          }
          // a change made while the listener may still be away arrives all the same (by polling or after reconnecting)
          await setUserAttributes(a.store, s.user.eppn, { name: 'Ada Meanwhile' });
          const meanwhile = await reflected(b, s.token, (res) => res.json().name === 'Ada Meanwhile');
          timings['while reconnecting'] = Math.round(meanwhile);
          assert.ok(meanwhile <= 1000);
          while (mode() !== 'listening') {
            assert.ok(performance.now() - lostAt < 5000, 'the listener did not come back');
            await new Promise((r) => setTimeout(r, 20));
          }
          timings['listener back after'] = Math.round(performance.now() - lostAt);
          // both instances' listeners are back (each reconnects on its own schedule)
          const listeners = async () =>
            (
              await admin.query<{ n: number }>(
                `select count(*)::int as n from pg_stat_activity
                 where application_name = 'idp-invalidations' and datname = current_database()`,
              )
            ).rows[0]!.n;
          let n = await listeners();
          while ((a.store.invalidations!.mode !== 'listening' || n !== 2) && performance.now() - lostAt < 5000) {
            await new Promise((r) => setTimeout(r, 20));
            n = await listeners();
          }
          assert.equal(a.store.invalidations!.mode, 'listening');
          assert.equal(n, 2);
          // and notifications flow again
          await setUserAttributes(a.store, s.user.eppn, { name: 'Ada Again' });
          const again = await reflected(b, s.token, (res) => res.json().name === 'Ada Again');
          timings['after reconnecting'] = Math.round(again);
          assert.ok(again <= 1000);
        } finally {
          await admin.end();
        }
      });
    }
  });
}
