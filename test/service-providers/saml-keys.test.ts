// The identity provider's SAML keys on both databases: made once on first use even by instances
// racing, sealed at rest, RSA-3072 with self-signed certificates, and rotated by the
// publish-before-use rule.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, X509Certificate } from 'node:crypto';
import { dialects, migratedDatabase, testConfig, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { listSamlKeys as listRows } from '../../src/store/saml.ts';
import { ensureSamlKeys, rotateSamlKeys, SAML_KEY_TIMING, samlKeys } from '../../src/service-providers/index.ts';

const keys = keyring(TEST_SECRET);
const HOUR = 3600_000;

for (const dialect of dialects()) {
  describe(`SAML keys (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let other: Store;
    before(async () => {
      database = await migratedDatabase(dialect);
      const config = testConfig(database.url);
      store = await openStore(config.databaseUrl);
      other = await openStore(config.databaseUrl);
    });
    after(async () => {
      await store.close();
      await other.close();
      await database.drop();
    });

    it('instances racing on first use make one key of each use, and all read the same ones', async () => {
      const made = await Promise.all([
        ensureSamlKeys(store, keys, Date.now(), 'idp.example.test'),
        ensureSamlKeys(other, keys, Date.now(), 'idp.example.test'),
      ]);
      assert.equal(made.flat().length, 3, 'one winner per use');
      const rows = await listRows(store.db);
      assert.deepEqual(rows.map((r) => r.key_use).sort(), ['encryption', 'metadata', 'signing']);
      const a = await samlKeys(store, keys);
      const b = await samlKeys(other, keys);
      assert.equal(a.signing.kid, b.signing.kid);
      assert.equal(a.metadata.kid, b.metadata.kid);
      assert.deepEqual(
        a.decryption.map((k) => k.kid),
        b.decryption.map((k) => k.kid),
      );
      assert.notEqual(a.signing.kid, a.metadata.kid);
    });

    it('keys are RSA-3072, their certificates self-signed over them, their private parts sealed', async () => {
      const set = await samlKeys(store, keys);
      for (const key of [set.signing, set.metadata, ...set.decryption]) {
        assert.equal(key.privateKey.asymmetricKeyType, 'rsa');
        assert.equal(key.privateKey.asymmetricKeyDetails?.modulusLength, 3072);
        const certificate = new X509Certificate(key.certificate);
        assert.ok(certificate.verify(certificate.publicKey), 'self-signed');
        assert.ok(certificate.publicKey.equals(createPublicKey(key.privateKey)), 'the certificate carries the key');
        assert.match(certificate.subject, /CN=idp\.example\.test/);
        assert.ok(new Date(certificate.validTo).getTime() > Date.now() + 9 * 365 * 24 * HOUR);
      }
      for (const row of await listRows(store.db)) {
        // sealed: neither PEM nor the base64 of a DER key (which starts MII), whatever random text it holds
        assert.doesNotMatch(row.private_key, /PRIVATE KEY|^MII/);
      }
    });

    it('refuses keys sealed under another IDP_SECRET', async () => {
      await assert.rejects(samlKeys(store, keyring('another-secret-0123456789-abcdefghijklm')), /IDP_SECRET differs/);
    });

    it('a rotated signing key is published at once, signs after the delay, and the old one leaves after the grace', async () => {
      const now = Date.now();
      const before = await samlKeys(store, keys, now);
      const [added] = await rotateSamlKeys(store, keys, ['signing'], { now });
      assert.equal(added!.activatesAt, now + SAML_KEY_TIMING.activationDelayMs);
      assert.equal(SAML_KEY_TIMING.activationDelayMs, 2 * SAML_KEY_TIMING.cacheDurationMs);

      const published = await samlKeys(store, keys, now + 1000);
      assert.equal(published.signing.kid, before.signing.kid, 'the old key still signs');
      assert.deepEqual(published.published.map((k) => k.kid).sort(), [before.signing.kid, added!.kid].sort());
      assert.equal(published.metadata.kid, before.metadata.kid, 'other uses untouched');

      const switched = await samlKeys(store, keys, added!.activatesAt + 1);
      assert.equal(switched.signing.kid, added!.kid, 'the new key signs after the delay');
      assert.ok(
        switched.published.some((k) => k.kid === before.signing.kid),
        'the old one is still published',
      );

      const later = await samlKeys(store, keys, added!.activatesAt + SAML_KEY_TIMING.signingGraceMs + 1);
      assert.deepEqual(
        later.published.map((k) => k.kid),
        [added!.kid],
      );
      // another instance reads the rotation from the database (each keeps what it read for at most 10 s)
      const third = await openStore(database.url);
      try {
        assert.equal((await samlKeys(third, keys, added!.activatesAt + 1)).signing.kid, added!.kid);
      } finally {
        await third.close();
      }
    });

    it('a rotated encryption key is published at once; the old one decrypts for a while after it leaves', async () => {
      const now = Date.now();
      const before = await samlKeys(store, keys, now);
      const old = before.encryption[0]!;
      const [added] = await rotateSamlKeys(store, keys, ['encryption'], { now });
      const during = await samlKeys(store, keys, now + 1000);
      assert.deepEqual(during.encryption.map((k) => k.kid).sort(), [old.kid, added!.kid].sort());
      const afterActivation = await samlKeys(store, keys, added!.activatesAt + 1);
      assert.deepEqual(
        afterActivation.encryption.map((k) => k.kid),
        [added!.kid],
      );
      assert.ok(
        afterActivation.decryption.some((k) => k.kid === old.kid),
        'still decrypts',
      );
      const gone = await samlKeys(store, keys, added!.activatesAt + SAML_KEY_TIMING.decryptionRetentionMs + 1);
      assert.deepEqual(
        gone.decryption.map((k) => k.kid),
        [added!.kid],
      );
    });
  });
}
