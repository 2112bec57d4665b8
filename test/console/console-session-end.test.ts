// A console session ends on the server, not only in the browser that held it: a copy of the
// session cookie (another tab, a stolen copy) stops working at once when its staff member signs out,
// is disabled (and enabled again), loses all their passkeys or is offboarded, or has their sessions
// ended by the passkey API. And a recovery link does not outlive its user's disabling. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  clientToken,
  cookieBrowser,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
  type TestCredential,
} from '../helpers.ts';
import type { User } from '../../src/store/directory.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { disableUser, enableUser } from '../../src/oauth/account-lifecycle.ts';
import { createRecoveryLink, openRecoveryLink } from '../../src/webauthn/recovery-links.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { addKey, csrfOf, follow, local, signIn, type Browser } from './console-browser.ts';
import { setOrganizationDisabled } from '../../src/directory/index.ts';
import { assertion } from '../authenticator.ts';

for (const dialect of dialects()) {
  describe(`console sessions end on the server (${dialect})`, () => {
    let ctx: TestContext;
    let olga: User, olgaKey: TestCredential;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      olga = await seedUser(ctx, 1, 'olga@example.org');
      await grantRole(ctx.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      olgaKey = (await addKey(ctx, olga)).key;
    });
    after(() => ctx.close());

    /** A helpdesk member signed in, and a second browser holding a copy of their console cookie. */
    async function helpdeskWithCopy(name: string) {
      const staff = await seedUser(ctx, 1, `${name}@example.org`);
      await grantRole(ctx.store, { eppn: staff.eppn, role: 'helpdesk', orgId: 1 });
      const key = (await addKey(ctx, staff)).key;
      const { b } = await signIn(ctx, staff, key);
      const copy = cookieBrowser(ctx.app);
      copy.adopt(b.cookies());
      assert.equal((await copy.get('/console/org/1')).statusCode, 200, 'the copy works while the session lives');
      return { staff, b, copy };
    }

    const endedIn = async (b: Browser) => {
      const res = await b.get('/console/org/1');
      assert.equal(res.statusCode, 303, 'the session has ended');
      assert.match(String(res.headers.location), /^\/oauth\/authorization\?/);
    };

    it('signing out ends the session for every copy of its cookie; signing in again works', async () => {
      const { staff, b, copy } = await helpdeskWithCopy('sam');
      const page = await b.get('/console/org/1');
      assert.equal((await b.post('/console/sign-out', { _csrf: csrfOf(page.body) })).statusCode, 303);
      await endedIn(b);
      await endedIn(copy);
      const again = await signIn(ctx, staff, (await addKey(ctx, staff)).key);
      assert.equal(again.landed.statusCode, 200);
    });

    it('disabling ends the session, and enabling does not bring it back', async () => {
      const { staff, copy } = await helpdeskWithCopy('dina');
      await disableUser(ctx.store, staff.eppn);
      await enableUser(ctx.store, staff.eppn);
      await endedIn(copy);
    });

    it("deleting all of a staff member's passkeys, in the console or through the API, ends their console sessions", async () => {
      const admin = await signIn(ctx, olga, olgaKey);
      const viaConsole = await helpdeskWithCopy('carl');
      const confirm = await admin.b.get(`/console/org/1/users/${viaConsole.staff.eppn}/delete-all`);
      const done = await admin.b.post(`/console/org/1/users/${viaConsole.staff.eppn}/delete-all`, {
        _csrf: csrfOf(confirm.body),
        reason: 'Lost bag',
      });
      assert.equal(done.statusCode, 303);
      await endedIn(viaConsole.copy);
      await endedIn(viaConsole.b);

      const viaApi = await helpdeskWithCopy('abel');
      const client = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1] });
      const token = await clientToken(ctx, client.clientId, client.secret, 'passkey.delete');
      const res = await ctx.app.inject({
        method: 'DELETE',
        url: `/2/passkey/1?eppn=${viaApi.staff.eppn}`,
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(res.statusCode, 200, res.body);
      await endedIn(viaApi.copy);
    });

    it('offboarding ends the console sessions of everyone offboarded', async () => {
      const { staff, copy } = await helpdeskWithCopy('otto');
      const admin = await signIn(ctx, olga, olgaKey);
      const form = await admin.b.get('/console/org/1/offboard');
      const res = await admin.b.post('/console/org/1/offboard', {
        _csrf: csrfOf(form.body),
        eppns: staff.eppn,
        reason: 'Left',
      });
      assert.equal(res.statusCode, 200);
      await endedIn(copy);
      assert.equal((await admin.b.get('/console/org/1')).statusCode, 200, 'the administrator stays signed in');
    });

    it('a recovery link made before the user was disabled does not work after they are enabled again', async () => {
      const ada = await seedUser(ctx, 1, 'ada@example.org');
      const link = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: ada.eppn });
      const secret = link.url.split('/recover/')[1]!;
      assert.ok(await openRecoveryLink(ctx.store, secret, Date.now()), 'usable at first');
      await disableUser(ctx.store, ada.eppn);
      await enableUser(ctx.store, ada.eppn);
      assert.equal(await openRecoveryLink(ctx.store, secret, Date.now()), undefined);
      assert.notEqual((await cookieBrowser(ctx.app).get(local(link.url))).statusCode, 200);
      const [record] = await listAuditEvents(ctx.store.db, { action: 'user.disable', subject: ada.eppn, limit: 1 });
      assert.deepEqual(JSON.parse(record!.details), { sessions: 0, recovery_links: 1 });
      // A new link, made after, works.
      const fresh = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: ada.eppn });
      assert.ok(await openRecoveryLink(ctx.store, fresh.url.split('/recover/')[1]!, Date.now()));
    });

    it("disabling the staff member's organization ends the session and refuses a new sign-in; enabling lets them in", async () => {
      const staff = await seedUser(ctx, 1, 'orla@example.org');
      await grantRole(ctx.store, { eppn: staff.eppn, role: 'helpdesk', orgId: 1 });
      const key = (await addKey(ctx, staff)).key;
      const { b } = await signIn(ctx, staff, key);
      const rita = await seedUser(ctx, 1, 'rita@example.org');
      const link = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: rita.eppn });
      const secret = link.url.split('/recover/')[1]!;
      await setOrganizationDisabled(ctx.store, 1, true);
      try {
        await endedIn(b);
        // a new sign-in with the passkey is refused as a disabled user's is
        const fresh = cookieBrowser(ctx.app);
        const page = await follow(fresh, '/console');
        const uid = /\/interaction\/([^/"]+)\/passkey"/.exec(page.body)![1]!;
        const csrf = csrfOf(page.body);
        const options = await fresh.post(`/interaction/${uid}/passkey/options`, {}, { 'x-csrf-token': csrf });
        const response = assertion(key, options.json().challenge, 1000, { userHandle: staff.sub, flags: 0x05 });
        const refused = await fresh.post(`/interaction/${uid}/passkey`, {
          _csrf: csrf,
          response: JSON.stringify(response),
        });
        assert.equal(refused.statusCode, 403);
        assert.match(refused.body, /This account is disabled/);
        // nor does a recovery link made before open
        assert.equal(await openRecoveryLink(ctx.store, secret, Date.now()), undefined);
      } finally {
        await setOrganizationDisabled(ctx.store, 1, false);
      }
      assert.ok(await openRecoveryLink(ctx.store, secret, Date.now()), 'usable again');
      // (a key of its own: the refused assertion above counted up the other's signature counter)
      assert.equal((await signIn(ctx, staff, (await addKey(ctx, staff)).key)).landed.statusCode, 200);
    });
  });
}
