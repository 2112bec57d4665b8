// The SAML identity provider's signing key rotated on the OpenID Connect keys' schedule
// (KEY_ROTATION_DAYS), with an injected clock: once the newest signing key is that old, a new one is
// in the metadata at once and signs a metadata validity later, when the old one retires; the old one
// leaves the metadata after the grace; instances finding it due at once add one key between them.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { openStore, type Store } from '../../src/store/index.ts';
import { listSamlKeys as listRows } from '../../src/store/saml.ts';
import {
  rotateSamlSigningKeyIfDue,
  SAML_KEY_TIMING,
  SAML_SCHEDULED_PUBLICATION_MS,
  samlKeys,
} from '../../src/service-providers/index.ts';
import { childElements, parseXml, textOf } from '../../src/saml/xml/index.ts';
import { MD } from '../../src/saml/metadata/index.ts';
import { dialects, startTestApp, type TestContext } from '../helpers.ts';

const DAY = 86_400_000;
const ROTATION = 90 * DAY;
const body = (pem: string) => pem.replace(/-----[A-Z ]+-----|\s/g, '');

for (const dialect of dialects()) {
  describe(`SAML signing key on schedule (${dialect})`, () => {
    let ctx: TestContext;
    let other: Store;
    let clock = Date.now();
    before(async () => {
      ctx = await startTestApp(dialect, {}, { now: () => clock });
      other = await openStore(ctx.config.databaseUrl);
    });
    after(async () => {
      await other.close();
      await ctx.close();
    });

    /** The signing certificates the metadata publishes at the clock's time. */
    const published = async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/saml2/idp/metadata' });
      assert.equal(res.statusCode, 200);
      const [idp] = childElements(parseXml(res.body).root, MD.md, 'IDPSSODescriptor');
      return childElements(idp!, MD.md, 'KeyDescriptor')
        .filter((k) => k.getAttribute('use') === 'signing')
        .map((k) => textOf(k.getElementsByTagNameNS(MD.ds, 'X509Certificate')[0]!))
        .sort();
    };

    let created: number;
    let first: { kid: string; certificate: string };
    let added: { kid: string; activatesAt: number };

    it('does nothing before the key is due, or when the schedule is off', async () => {
      first = (await samlKeys(ctx.store, ctx.keys, clock)).signing;
      created = (await listRows(ctx.store.db)).find((r) => r.kid === first.kid)!.created_at;
      assert.equal(await rotateSamlSigningKeyIfDue(ctx.store, ctx.keys, ROTATION, created + ROTATION - 1), undefined);
      assert.equal(await rotateSamlSigningKeyIfDue(ctx.store, ctx.keys, 0, created + 10 * ROTATION), undefined);
      assert.equal((await listRows(ctx.store.db)).filter((r) => r.key_use === 'signing').length, 1);
    });

    it('instances finding it due at once add one signing key between them, audited as the system', async () => {
      const due = created + ROTATION;
      const results = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          rotateSamlSigningKeyIfDue(i % 2 ? other : ctx.store, ctx.keys, ROTATION, due),
        ),
      );
      const made = results.filter((r) => r !== undefined);
      assert.equal(made.length, 1);
      added = made[0]!;
      assert.equal(added.activatesAt, due + SAML_SCHEDULED_PUBLICATION_MS);
      assert.ok(SAML_SCHEDULED_PUBLICATION_MS >= SAML_KEY_TIMING.validityMs);
      const rows = await listRows(ctx.store.db);
      assert.deepEqual(rows.map((r) => r.key_use).sort(), ['encryption', 'metadata', 'signing', 'signing']);
      const audit = await ctx.store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'saml_keys.rotate')
        .execute();
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.actor_type, 'system');
      // not again until the new key is due in turn
      assert.equal(await rotateSamlSigningKeyIfDue(other, ctx.keys, ROTATION, due + 89 * DAY), undefined);
    });

    it('publishes the next key in the metadata before it signs, then signs with it, then drops the old one', async () => {
      const next = (await listRows(ctx.store.db)).find((r) => r.kid === added.kid)!;
      // an instance reads the keys again within 10 s of another instance adding one
      await new Promise((resolve) => setTimeout(resolve, 10_100));
      // published at once; the old key still signs
      clock = created + ROTATION + 60_000;
      assert.deepEqual(await published(), [body(first.certificate), body(next.certificate)].sort());
      assert.equal((await samlKeys(ctx.store, ctx.keys, clock)).signing.kid, first.kid);
      clock = added.activatesAt - 60_000;
      assert.equal((await samlKeys(ctx.store, ctx.keys, clock)).signing.kid, first.kid);
      // the new key signs from its activation; the old one stays in the metadata for the grace
      clock = added.activatesAt + 60_000;
      assert.equal((await samlKeys(ctx.store, ctx.keys, clock)).signing.kid, added.kid);
      assert.deepEqual(await published(), [body(first.certificate), body(next.certificate)].sort());
      // and leaves it after
      clock = added.activatesAt + SAML_KEY_TIMING.signingGraceMs + 60_000;
      assert.deepEqual(await published(), [body(next.certificate)]);
      assert.deepEqual(
        (await samlKeys(ctx.store, ctx.keys, clock)).published.map((k) => k.kid),
        [added.kid],
      );
    });
  });
}
