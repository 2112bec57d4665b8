// Adding or deleting a passkey on /account needs a recent sign-in: with the clock moved past
// 10 minutes the account page asks to sign in again, and afterwards both work.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cookieBrowser,
  dialects,
  migratedDatabase,
  testConfig,
  seedOrg,
  seedUser,
  coseP256PublicKey,
  TEST_SECRET,
  type TestDatabase,
} from '../helpers.ts';
import { keyring } from '../../src/crypto.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { buildApp, type App } from '../../src/app.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { RECENT_SIGN_IN_MS } from '../../src/web/account-page.ts';
import type { User } from '../../src/store/directory.ts';

const PASSWORD = 'correct horse battery staple';
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

for (const dialect of dialects()) {
  describe(`recent sign-in for passkey changes on /account (${dialect})`, () => {
    let database: TestDatabase;
    let store: Store;
    let built: App;
    let clock = Date.now();
    let ada: User;

    before(async () => {
      database = await migratedDatabase(dialect);
      const config = testConfig(database.url);
      store = await openStore(config.databaseUrl);
      built = await buildApp({ config, store, keys: keyring(TEST_SECRET), now: () => clock });
      await built.app.ready();
      await seedOrg({ store });
      ada = await seedUser({ store }, 1, 'ada@example.org', { password: PASSWORD });
    });
    after(async () => {
      await built.app.close();
      await store.close();
      await database.drop();
    });

    const browser = () => cookieBrowser(built.app);

    it('asks to sign in again before adding or deleting a passkey once the sign-in is over 10 minutes old', async () => {
      const [passkeyId] = await insertPasskeys(store.db, [
        {
          user_id: ada.id,
          org_id: 1,
          credential_id: Buffer.from('reauth-test-credential'),
          public_key: await coseP256PublicKey(),
          sign_count: 0,
          transports: '[]',
          label: 'Old key',
          aaguid: ZERO_AAGUID,
          backup_eligible: 0,
          backup_state: 0,
          mfa_verified: 1,
          created_at: clock,
          last_used_at: null,
        },
      ]);
      const b = browser();
      const signInForm = csrfOf((await b.get('/account')).body);
      assert.equal(
        (await b.post('/account/login', { _csrf: signInForm, username: 'ada@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      const token = csrfOf((await b.get('/account')).body);
      assert.equal(
        (await b.post('/account/passkeys/options', {}, { 'x-csrf-token': token })).statusCode,
        200,
        'fresh sign-in: registration starts',
      );

      clock += RECENT_SIGN_IN_MS + 60_000;
      const options = await b.post('/account/passkeys/options', {}, { 'x-csrf-token': token });
      assert.equal(options.statusCode, 401);
      assert.match(options.json().message, /Sign in again/);
      const register = await b.post('/account/passkeys', { _csrf: token, response: '{}' });
      assert.equal(register.statusCode, 401);
      assert.match(register.body, /sign in again/);
      assert.match(register.body, /action="\/account\/login"/);
      const del = await b.post(`/account/passkeys/${passkeyId}/delete`, { _csrf: token, confirm: 'yes' });
      assert.equal(del.statusCode, 401);
      assert.match(del.body, /sign in again/);
      assert.equal((await listUserCredentials(store.db, ada.id)).length, 1, 'nothing deleted');
      // Renaming is not guarded, and the page itself still shows.
      assert.equal(
        (await b.post(`/account/passkeys/${passkeyId}/rename`, { _csrf: token, label: 'Renamed' })).statusCode,
        303,
      );
      assert.match((await b.get('/account')).body, /<h1>Your account<\/h1>/);

      // Signing in again (the page's own form) makes the session recent.
      assert.equal(
        (await b.post('/account/login', { _csrf: csrfOf(del.body), username: 'ada@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      const fresh = csrfOf((await b.get('/account')).body);
      assert.equal((await b.post('/account/passkeys/options', {}, { 'x-csrf-token': fresh })).statusCode, 200);
      const deleted = await b.post(`/account/passkeys/${passkeyId}/delete`, { _csrf: fresh, confirm: 'yes' });
      assert.equal(deleted.statusCode, 303);
      assert.equal(deleted.headers.location, '/account?done=deleted');
      assert.equal((await listUserCredentials(store.db, ada.id)).length, 0);
      // The user's own deletion is in the audit trail, once, without a client.
      const audit = (await listAuditEvents(store.db, {})).filter((e) => e.kind === 'passkey.delete_by_user');
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.client_id, null);
      assert.equal(Number(audit[0]!.org_id), ada.org_id);
      assert.equal(audit[0]!.eppn, ada.eppn);
      assert.deepEqual(JSON.parse(audit[0]!.passkey_ids), [passkeyId]);
      assert.equal(Number(audit[0]!.at), clock);
      assert.ok(audit[0]!.request_id);
    });
  });
}
