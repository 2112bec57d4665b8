// Two instances of the service (separate processes) on one PostgreSQL with the same secret serve one
// single sign-on: an AuthnRequest accepted by one is finished by the other after the sign-in, a
// request ID one accepted is refused by the other, and the session one made serves the other. Real
// HTTP between the test and both; the SP signs its requests with its key from its metadata.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { addServiceProvider, samlKeys } from '../../src/service-providers/index.ts';
import { childElements, NS, textOf, validateSchema, verifyEnvelopedSignature } from '../../src/saml/xml/index.ts';
import {
  dialects,
  freshDatabase,
  seedOrg,
  seedUser,
  spawnService,
  TEST_SECRET,
  type ServiceProcess,
  type TestContext,
  type TestDatabase,
} from '../helpers.ts';
import { authnRequestXml, redirectQuery, requestId, shibboleth, signedXml, type TestSp } from './sso-fixtures.ts';
import { httpBrowser, postedResponse, signInAndAgree } from './sign-in-fixtures.ts';

const PUBLIC = 'https://idp.shared.test';
const PASSWORD = 'correct horse battery staple';
const credentials = { username: 'ada@example.org', password: PASSWORD };
/** what authnRequestXml reads of a test context: the Destination */
const idp = { config: { publicUrl: PUBLIC } } as TestContext;

for (const dialect of dialects().filter((d) => d === 'postgres')) {
  describe('SAML single sign-on across two instances sharing one PostgreSQL', () => {
    let db: TestDatabase;
    let store: Store;
    let a: ServiceProcess;
    let b: ServiceProcess;
    let sp: TestSp;
    let sub: string;

    before(async () => {
      db = await freshDatabase(dialect);
      const env = { DATABASE_URL: db.url, PUBLIC_URL: PUBLIC, IDP_SECRET: TEST_SECRET };
      // one after the other, each given time to start on a busy machine
      a = await spawnService(env, undefined, { readyWithinMs: 120_000 });
      b = await spawnService(env, undefined, { readyWithinMs: 120_000 });
      store = await openStore(db.url);
      await seedOrg({ store });
      sub = (await seedUser({ store }, 1, 'ada@example.org', { password: PASSWORD })).sub;
      sp = await shibboleth();
      await addServiceProvider(store, { metadata: sp.metadata, groups: ['userid-idp'], encrypt: 'never' });
    });
    after(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
      await store?.close();
      await db?.drop();
    });

    const signedQuery = (id: string, relayState?: string) =>
      redirectQuery(authnRequestXml(idp, { id, issuer: sp.entityId, acsUrl: sp.acs }), sp.signing, relayState);

    /** The Response's assertion, its signature checked with the identity provider's key. */
    const assertionOf = async (page: Awaited<ReturnType<typeof signInAndAgree>>, inResponseTo: string) => {
      const parsed = postedResponse(page, sp.acs);
      await validateSchema(parsed, 'protocol');
      assert.equal(parsed.root.getAttribute('InResponseTo'), inResponseTo);
      const [assertion] = childElements(parsed.root, NS.assertion, 'Assertion');
      assert.ok(assertion, 'a plain assertion (the SP was added with encrypt never)');
      const keys = await samlKeys(store, keyring(TEST_SECRET));
      verifyEnvelopedSignature(parsed, assertion, { keys: [keys.signing.certificate] });
      const attributes = childElements(
        childElements(assertion, NS.assertion, 'AttributeStatement')[0]!,
        NS.assertion,
        'Attribute',
      );
      const subjectId = attributes.find((x) => x.getAttribute('FriendlyName') === 'subject-id');
      return textOf(childElements(subjectId!, NS.assertion, 'AttributeValue')[0]!);
    };

    it('a request accepted by A, the user signed in at A, is answered by B with the Response', async () => {
      let instance = a.url;
      const browser = httpBrowser(() => instance);
      const id = requestId();
      const start = await browser.get(`/saml2/idp/sso?${signedQuery(id, 'relay-42')}`);
      assert.equal(start.statusCode, 303, start.body.slice(0, 300));
      const continuation = await signInAndAgree(browser, start, credentials, '/saml2/idp/continue');
      assert.equal(continuation.statusCode, 303, continuation.body.slice(0, 300));
      instance = b.url;
      const page = await browser.get(
        new URL(continuation.location!, PUBLIC).pathname + new URL(continuation.location!, PUBLIC).search,
      );
      assert.ok(page.body.includes('name="RelayState" value="relay-42"'));
      assert.equal(await assertionOf(page, id), `${sub}@example.org`);

      // the session A made answers at B at once: no sign-in page
      const again = requestId();
      const fast = await browser.get(`/saml2/idp/sso?${signedQuery(again)}`);
      assert.equal(await assertionOf(fast, again), `${sub}@example.org`);
    });

    it('a request ID accepted by one instance is refused by the other, both ways', async () => {
      for (const [first, second] of [
        [a, b],
        [b, a],
      ] as const) {
        const query = signedQuery(requestId());
        const accepted = await fetch(`${first.url}/saml2/idp/sso?${query}`, { redirect: 'manual' });
        assert.equal(accepted.status, 303);
        const replayed = await fetch(`${second.url}/saml2/idp/sso?${query}`, { redirect: 'manual' });
        assert.equal(replayed.status, 400);
        const body = await replayed.text();
        assert.ok(!body.includes('SAMLResponse'), 'no Response for a replayed request');
        assert.ok(body.includes(replayed.headers.get('x-request-id')!), 'the error page names the request id');
      }
      // the same for a request signed over HTTP-POST, sent to both at once: exactly one accepts it
      const xml = signedXml(authnRequestXml(idp, { issuer: sp.entityId, acsUrl: sp.acs }), sp.signing);
      const form = new URLSearchParams({ SAMLRequest: Buffer.from(xml).toString('base64') }).toString();
      const post = (s: ServiceProcess) =>
        fetch(`${s.url}/saml2/idp/sso`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: form,
        });
      const statuses = (await Promise.all([post(a), post(b)])).map((r) => r.status).sort();
      assert.deepEqual(statuses, [303, 400]);
    });
  });
}
