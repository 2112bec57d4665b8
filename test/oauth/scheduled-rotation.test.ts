// Signing keys rotated on schedule (KEY_ROTATION_DAYS), with an injected clock: a new key per algorithm
// once the newest is that old, published two days before it signs; the old key signs until then and
// stays published until its tokens have expired, then leaves; instances that find the keys due at
// the same moment add one set of keys between them.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { listSigningKeys } from '../../src/store/keys.ts';
import { listSamlKeys } from '../../src/store/saml.ts';
import { ensureSamlKeys } from '../../src/service-providers/saml-keys.ts';
import {
  ensureSigningKeys,
  loadKeySet,
  rotateSigningKeysIfDue,
  SCHEDULED_PUBLICATION_MS,
  SIGNING_ALGS,
  type KeyTiming,
} from '../../src/oauth/keys.ts';
import {
  dialects,
  freshDatabase,
  migratedDatabase,
  spawnService,
  TEST_SECRET,
  type ServiceProcess,
  type TestDatabase,
} from '../helpers.ts';

const DAY = 86_400_000;
const timing: KeyTiming = { activationDelayMs: 120_000, retentionMs: 3_900_000 };
const keys = keyring(TEST_SECRET);

for (const dialect of dialects()) {
  describe(`scheduled signing key rotation (${dialect})`, () => {
    let database: TestDatabase;
    let a: Store;
    let b: Store;
    const t0 = Date.UTC(2030, 0, 1);

    before(async () => {
      database = await migratedDatabase(dialect);
      [a, b] = [await openStore(database.url), await openStore(database.url)];
      await ensureSigningKeys(a, keys, t0);
    });
    after(async () => {
      await a?.close();
      await b?.close();
      await database?.drop();
    });

    it('does nothing before the keys are due, or when the schedule is off', async () => {
      assert.deepEqual(await rotateSigningKeysIfDue(a, keys, timing, 90 * DAY, t0 + 90 * DAY - 1), []);
      assert.deepEqual(await rotateSigningKeysIfDue(a, keys, timing, 0, t0 + 900 * DAY), []);
      assert.equal((await listSigningKeys(a.db)).length, 2);
    });

    let first: Record<string, string>;
    let added: { kid: string; alg: string; activatesAt: number }[];
    const due = t0 + 90 * DAY;

    it('two instances finding the keys due at once add one key per algorithm', async () => {
      first = (await loadKeySet(a, keys, timing, due)).active;
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => rotateSigningKeysIfDue(i % 2 ? a : b, keys, timing, 90 * DAY, due)),
      );
      added = results.flat();
      assert.deepEqual(added.map((k) => k.alg).sort(), [...SIGNING_ALGS].sort());
      assert.equal(results.filter((r) => r.length > 0).length, 1);
      assert.equal((await listSigningKeys(a.db)).length, 4);
      for (const k of added) assert.equal(k.activatesAt, due + SCHEDULED_PUBLICATION_MS);
      const audit = await a.db.selectFrom('audit_events').selectAll().where('kind', '=', 'keys.rotate').execute();
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.actor_type, 'system');
      // and not again until the new keys are due in turn
      assert.deepEqual(await rotateSigningKeysIfDue(b, keys, timing, 90 * DAY, due + 89 * DAY), []);
    });

    it('publishes the new keys before they sign, and the old ones until their tokens have expired', async () => {
      const newKids = new Set(added.map((k) => k.kid));
      const published = async (at: number) => (await loadKeySet(b, keys, timing, at)).publicJwks.map((k) => k.kid);
      // published at once, the old keys still signing
      const now = await loadKeySet(b, keys, timing, due + 1);
      assert.deepEqual(now.active, first);
      for (const kid of newKids) assert.ok((await published(due + 1)).includes(kid));
      // two days later the new keys sign, the old ones still published for their tokens
      const switched = due + SCHEDULED_PUBLICATION_MS;
      const then = await loadKeySet(b, keys, timing, switched);
      assert.deepEqual(new Set(Object.values(then.active)), newKids);
      for (const kid of Object.values(first))
        assert.ok((await published(switched + timing.retentionMs - 1)).includes(kid));
      // and gone once every token they signed has expired
      const gone = await published(switched + timing.retentionMs);
      for (const kid of Object.values(first)) assert.ok(!gone.includes(kid));
      assert.equal(gone.length, 2);
    });

    it('the next scheduled rotation removes the keys retired long ago from the database', async () => {
      const next = due + 90 * DAY;
      const again = await rotateSigningKeysIfDue(a, keys, timing, 90 * DAY, next);
      assert.equal(again.length, 2);
      const kids = (await listSigningKeys(a.db)).map((r) => r.kid);
      for (const kid of Object.values(first)) assert.ok(!kids.includes(kid));
      assert.equal(kids.length, 4);
    });
  });
}

for (const dialect of dialects()) {
  describe(`scheduled rotation in running services (${dialect})`, () => {
    let database: TestDatabase;
    const services: ServiceProcess[] = [];
    after(async () => {
      await Promise.all(services.map((s) => s.stop()));
      await database?.drop();
    });

    it('two instances whose keys are past the schedule publish one new key per algorithm between them', async () => {
      database = await freshDatabase(dialect);
      const store = await openStore(database.url);
      try {
        const old = Date.now() - 91 * DAY;
        await ensureSigningKeys(store, keys, old);
        await ensureSamlKeys(store, keys, old);
      } finally {
        await store.close();
      }
      const env = { DATABASE_URL: database.url, PUBLIC_URL: 'https://idp.rotation.test', KEY_REFRESH_INTERVAL: '1' };
      services.push(...(await Promise.all([spawnService(env), spawnService(env)])));
      const kids = async (s: ServiceProcess) =>
        ((await (await fetch(`${s.url}/openid/jwks`)).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
      for (let i = 0; i < 100 && (await kids(services[0]!)).length < 4; i++)
        await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 2500)); // both instances have checked again by now
      const [one, two] = await Promise.all(services.map(kids));
      assert.equal(one!.length, 4);
      assert.deepEqual(new Set(one), new Set(two));
    });

    it("and the SAML identity provider's signing key on the same schedule: one new key, in the metadata", async () => {
      const store = await openStore(database.url);
      try {
        const signing = async () => (await listSamlKeys(store.db)).filter((r) => r.key_use === 'signing');
        for (let i = 0; i < 100 && (await signing()).length < 2; i++) await new Promise((r) => setTimeout(r, 100));
        assert.equal((await signing()).length, 2);
        const audit = await store.db
          .selectFrom('audit_events')
          .selectAll()
          .where('kind', '=', 'saml_keys.rotate')
          .execute();
        assert.equal(audit.length, 1);
        assert.equal(audit[0]!.actor_type, 'system');
        const certificates = async (s: ServiceProcess) =>
          ((await (await fetch(`${s.url}/saml2/idp/metadata`)).text()).match(/use="signing"/g) ?? []).length;
        // each instance reads the SAML keys again within 10 s
        let seen = [0, 0];
        for (let i = 0; i < 150 && seen.some((n) => n < 2); i++) {
          seen = await Promise.all(services.map(certificates));
          if (seen.some((n) => n < 2)) await new Promise((r) => setTimeout(r, 100));
        }
        assert.deepEqual(seen, [2, 2]);
      } finally {
        await store.close();
      }
    });
  });
}
