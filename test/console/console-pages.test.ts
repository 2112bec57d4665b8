// The console's pages through HTTP, on both databases: staff sign in through the ordinary sign-in
// pages as the console's relying party (passkey required), find a user, delete passkeys with a
// reason, create and revoke recovery links, read the audit trail and the report, offboard in bulk,
// manage helpdesk staff; and everything another organization's helpdesk, a user without a role, a
// post without its CSRF token or an idle session tries is refused.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cookieBrowser,
  dialects,
  seedOrg,
  seedUser,
  startTestApp,
  PUBLIC_URL,
  type TestContext,
  type TestCredential,
} from '../helpers.ts';
import { addKey, csrfOf, follow, local, signIn } from './console-browser.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findClient } from '../../src/store/clients.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { setClientEnabled } from '../../src/clients/index.ts';
import type { User } from '../../src/store/directory.ts';

const PASSWORD = 'correct horse battery staple';

for (const dialect of dialects()) {
  describe(`console pages (${dialect})`, () => {
    let ctx: TestContext;
    let clock = 0;
    let helen: User, olga: User, ada: User, bob: User, nora: User, pat: User;
    let helenKey: TestCredential, olgaKey: TestCredential, noraKey: TestCredential;

    before(async () => {
      ctx = await startTestApp(dialect, {}, { now: () => Date.now() + clock });
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      await seedOrg(ctx, 2, 'other.org', 'Other College');
      helen = await seedUser(ctx, 1, 'helen@example.org', { name: 'Helen Helpdesk' });
      olga = await seedUser(ctx, 1, 'olga@example.org', { name: 'Olga Admin' });
      ada = await seedUser(ctx, 1, 'ada@example.org', { name: 'Ada Lovelace', email: 'ada.lovelace@example.org' });
      bob = await seedUser(ctx, 2, 'bob@other.org', { name: 'Bob Other' });
      nora = await seedUser(ctx, 1, 'nora@example.org', { name: 'Nora Norole' });
      pat = await seedUser(ctx, 1, 'pat@example.org', { name: 'Pat Password', password: PASSWORD });
      await grantRole(ctx.store, { eppn: helen.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(ctx.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      await grantRole(ctx.store, { eppn: pat.eppn, role: 'helpdesk', orgId: 1 });
      helenKey = (await addKey(ctx, helen)).key;
      olgaKey = (await addKey(ctx, olga)).key;
      noraKey = (await addKey(ctx, nora)).key;
      await addKey(ctx, bob, 'Bob key');
    });
    after(() => ctx.close());

    it('sends a browser without a session to the sign-in, asking for a passkey with PKCE and max_age', async () => {
      const res = await cookieBrowser(ctx.app).get('/console/org/1');
      assert.equal(res.statusCode, 303);
      const url = new URL(String(res.headers.location), PUBLIC_URL);
      assert.equal(url.pathname, '/oauth/authorization');
      assert.equal(url.searchParams.get('client_id'), 'idp-console');
      assert.equal(url.searchParams.get('code_challenge_method'), 'S256');
      assert.equal(url.searchParams.get('max_age'), '900');
      assert.deepEqual(JSON.parse(url.searchParams.get('claims')!), {
        id_token: { acr: { essential: true, values: ['phr'] } },
      });
      const client = await findClient(ctx.store.db, 'idp-console');
      assert.equal(client?.first_party, 1);
      assert.equal(client?.secret_hash, null);
      assert.deepEqual(JSON.parse(client!.redirect_uris), [`${PUBLIC_URL}/console/callback`]);
    });

    it('a helpdesk signs in with a passkey, lands on the search, and finds users by eppn, name or email prefix', async () => {
      const { b, landed } = await signIn(ctx, helen, helenKey);
      assert.equal(landed.statusCode, 200);
      assert.match(landed.body, /<label for="q">Search users<\/label>/);
      assert.match(landed.body, /Signed in as helen@example.org/);
      assert.match(landed.headers['content-security-policy'] as string, /script-src 'self'/);
      for (const q of ['ada', 'ADA', 'Ada Lo', 'ada.lovelace@']) {
        const res = await b.get(`/console/org/1?q=${encodeURIComponent(q)}`);
        assert.match(res.body, /<a href="\/console\/org\/1\/users\/ada%40example.org">ada@example.org<\/a>/, q);
      }
      const none = await b.get('/console/org/1?q=bob');
      assert.match(none.body, /No user of this organization matches “bob”/);
      assert.doesNotMatch(none.body, /bob@other.org/);
    });

    it('a password is not enough for the console; a user without a role gets a clear no-access page', async () => {
      const b = cookieBrowser(ctx.app);
      const page = await follow(b, '/console');
      assert.match(page.body, /phishing-resistant sign-in/);
      assert.doesNotMatch(page.body, /id="password-form"/, 'no password form is offered');
      // A password posted anyway (a form kept from elsewhere) is refused by the server.
      const uid = /\/interaction\/([^/"]+)\/passkey"/.exec(page.body)![1]!;
      const res = await b.post(`/interaction/${uid}/login`, {
        _csrf: csrfOf(page.body),
        username: pat.eppn,
        password: PASSWORD,
      });
      assert.notEqual(res.statusCode, 303, 'a password sign-in does not reach the console');
      assert.match(res.body, /A password is not enough/);
      const { landed } = await signIn(ctx, nora, noraKey);
      assert.equal(landed.statusCode, 403);
      assert.match(landed.body, /No access to the console/);
      assert.match(landed.body, /signed in as nora@example.org/);
    });

    it('deletes one passkey with a reason; the reason is required and lands in the audit record', async () => {
      const { id } = await addKey(ctx, ada, 'Phone');
      await addKey(ctx, ada, 'Laptop', { synced: false, uv: false });
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get('/console/org/1/users/ada@example.org');
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /<th scope="row">Phone<\/th>/);
      assert.match(page.body, /Device-bound/);
      assert.match(page.body, />Delete<\/button>/);
      assert.match(page.body, />Delete all passkeys<\/button>/);
      const confirm = await b.get(`/console/org/1/users/ada@example.org/passkeys/${id}/delete`);
      assert.match(confirm.body, /<label for="reason">Reason<\/label>/);
      assert.match(confirm.body, />Confirm<\/button>/);
      const url = `/console/org/1/users/ada@example.org/passkeys/${id}/delete`;
      const empty = await b.post(url, { _csrf: csrfOf(confirm.body), reason: '  ' });
      assert.equal(empty.statusCode, 400);
      assert.match(empty.body, /Give a reason/);
      const long = await b.post(url, { _csrf: csrfOf(confirm.body), reason: 'x'.repeat(501) });
      assert.equal(long.statusCode, 400);
      assert.equal((await listUserCredentials(ctx.store.db, ada.id)).length, 2, 'nothing deleted yet');
      const done = await b.post(url, { _csrf: csrfOf(confirm.body), reason: 'Phone stolen' });
      assert.equal(done.statusCode, 303);
      assert.match((await b.get(local(done.headers.location))).body, /The passkey was deleted/);
      assert.deepEqual(
        (await listUserCredentials(ctx.store.db, ada.id)).map((p) => p.label),
        ['Laptop'],
      );
      const [record] = await listAuditEvents(ctx.store.db, { orgId: 1, action: 'passkey.delete', limit: 1 });
      assert.equal(record?.actor_type, 'user');
      assert.equal(record?.actor, 'helen@example.org');
      assert.equal(record?.eppn, 'ada@example.org');
      assert.deepEqual(JSON.parse(record!.details), { reason: 'Phone stolen' });
    });

    it('deletes all passkeys with a reason, and creates, shows once and revokes a recovery link', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const confirm = await b.get('/console/org/1/users/ada@example.org/delete-all');
      assert.match(confirm.body, /All 1 passkeys of ada@example.org/);
      const done = await b.post('/console/org/1/users/ada@example.org/delete-all', {
        _csrf: csrfOf(confirm.body),
        reason: 'Lost bag',
      });
      assert.equal(done.statusCode, 303);
      assert.equal((await listUserCredentials(ctx.store.db, ada.id)).length, 0);
      const [all] = await listAuditEvents(ctx.store.db, { orgId: 1, action: 'passkey.delete_user', limit: 1 });
      assert.equal(all?.actor, 'helen@example.org');
      assert.deepEqual(JSON.parse(all!.details), { reason: 'Lost bag' });

      const page = await b.get('/console/org/1/users/ada@example.org');
      const created = await b.post('/console/org/1/users/ada@example.org/recovery-links', {
        _csrf: csrfOf(page.body),
        ttl: '3600',
      });
      assert.equal(created.statusCode, 200);
      assert.equal(created.headers['cache-control'], 'no-store');
      const link = /<code id="recovery-link"[^>]*>([^<]+)<\/code>/.exec(created.body)?.[1];
      assert.ok(link?.startsWith(`${PUBLIC_URL}/recover/`), link);
      assert.match(
        created.body,
        /<img src="data:image\/svg\+xml;base64,[A-Za-z0-9+/=]+" alt="QR code of the recovery link"/,
      );
      const opened = await cookieBrowser(ctx.app).get(local(link));
      assert.equal(opened.statusCode, 200);
      const listed = await b.get('/console/org/1/users/ada@example.org');
      assert.doesNotMatch(listed.body, new RegExp(link!.split('/recover/')[1]!), 'the secret is shown once');
      const linkId = /recovery-links\/(\d+)\/revoke/.exec(listed.body)![1]!;
      const revoked = await b.post(`/console/org/1/users/ada@example.org/recovery-links/${linkId}/revoke`, {
        _csrf: csrfOf(listed.body),
      });
      assert.equal(revoked.statusCode, 303);
      assert.notEqual((await cookieBrowser(ctx.app).get(local(link))).statusCode, 200, 'a revoked link fails');
      const again = await b.post(`/console/org/1/users/ada@example.org/recovery-links/${linkId}/revoke`, {
        _csrf: csrfOf(listed.body),
      });
      assert.equal(again.statusCode, 404);
      const audit = await b.get('/console/org/1/audit?eppn=ada%40example.org');
      for (const action of ['passkey.delete_user', 'recovery_link.create', 'recovery_link.revoke'])
        assert.match(audit.body, new RegExp(`<td>${action.replace('.', '\\.')}</td><td>user: helen@example.org</td>`));
    });

    it('another organization is out of reach whatever the URL; posts without CSRF change nothing', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const bobKeys = await listUserCredentials(ctx.store.db, bob.id);
      for (const [url, status] of [
        ['/console/org/2', 403],
        ['/console/org/2?q=bob', 403],
        ['/console/org/2/users/bob@other.org', 403],
        ['/console/org/1/users/bob@other.org', 404],
        ['/console/org/1/users/not-an-eppn', 404],
        [`/console/org/1/users/ada@example.org/passkeys/${bobKeys[0]!.id}/delete`, 404],
        ['/console/org/1/audit?eppn=bob%40other.org', 404],
        ['/console/org/2/audit?eppn=bob%40other.org', 403],
        ['/console/org/2/audit.csv?eppn=bob%40other.org', 403],
        ['/console/org/1/audit', 403],
        ['/console/org/1/audit.csv', 403],
        ['/console/org/1/report', 403],
        ['/console/org/1/report/unused.csv', 403],
        ['/console/org/2/report', 403],
        ['/console/org/1/offboard', 403],
        ['/console/org/1/staff', 403],
        ['/console/org/999', 403],
        ['/console/org/abc', 403],
      ] as const) {
        const res = await b.get(url);
        assert.equal(res.statusCode, status, url);
        assert.match(res.headers['content-type'] as string, /^text\/html/, url);
      }
      const page = await b.get('/console/org/1');
      const token = csrfOf(page.body);
      for (const [url, form, status] of [
        [`/console/org/2/users/bob@other.org/delete-all`, { _csrf: token, reason: 'x' }, 403],
        [`/console/org/1/users/bob@other.org/delete-all`, { _csrf: token, reason: 'x' }, 404],
        [`/console/org/1/users/ada@example.org/passkeys/${bobKeys[0]!.id}/delete`, { _csrf: token, reason: 'x' }, 404],
        ['/console/org/1/offboard', { _csrf: token, eppns: 'ada@example.org', reason: 'x' }, 403],
        ['/console/org/1/staff', { _csrf: token, eppn: 'nora@example.org' }, 403],
        [`/console/org/1/users/helen@example.org/delete-all`, { reason: 'no token' }, 403],
        [`/console/org/1/users/helen@example.org/delete-all`, { _csrf: 'forged', reason: 'bad token' }, 403],
      ] as const) {
        const res = await b.post(url, form);
        assert.equal(res.statusCode, status, url);
      }
      assert.equal((await listUserCredentials(ctx.store.db, bob.id)).length, 1);
      assert.equal((await listUserCredentials(ctx.store.db, helen.id)).length, 1);
      // Another browser's token is not this one's.
      const other = await signIn(ctx, helen, helenKey);
      const res = await other.b.post('/console/org/1/users/helen@example.org/delete-all', {
        _csrf: token,
        reason: 'x',
      });
      assert.equal(res.statusCode, 403);
    });

    it('an idle session ends: the next request goes back to the sign-in', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      assert.equal((await b.get('/console/org/1')).statusCode, 200);
      clock = 16 * 60 * 1000;
      try {
        const res = await b.get('/console/org/1');
        assert.equal(res.statusCode, 303);
        assert.match(String(res.headers.location), /^\/oauth\/authorization\?/);
      } finally {
        clock = 0;
      }
    });

    it('an org-admin reads the report and its lists, the whole audit trail, and exports it', async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const report = await b.get('/console/org/1/report?days=30');
      assert.equal(report.statusCode, 200);
      assert.match(report.body, /Users<\/th><td class="num">5<\/td>/);
      assert.match(report.body, /Users without a passkey<\/th><td class="num">2<\/td>/);
      assert.match(report.body, /Passkeys not used for 30 days/);
      // the adoption funnel: a table, the chart labelled by its title and today's figures, the figures by day
      assert.match(report.body, /<h2 id="adoption">Moving in: adoption<\/h2>/);
      assert.match(report.body, /With a passkey<\/th><td class="num">3<\/td><td class="num">60 %<\/td>/);
      assert.match(report.body, /<svg [^>]*role="img" aria-labelledby="adoption-chart-title adoption-chart-desc"/);
      assert.match(report.body, /<desc id="adoption-chart-desc">Today: 5 users, [^<]*3 with a passkey/);
      assert.equal((report.body.match(/<polyline /g) ?? []).length, 5, 'one line per stage');
      assert.match(report.body, /<summary>Figures by day<\/summary>/);
      const csv = await b.get('/console/org/1/report/without-passkey.csv');
      assert.equal(csv.statusCode, 200);
      assert.match(csv.headers['content-type'] as string, /^text\/csv/);
      assert.match(csv.headers['content-disposition'] as string, /attachment; filename="report-1-without-passkey.csv"/);
      assert.match(csv.body, /^eppn,name,email\r\n/);
      assert.match(csv.body, /pat@example.org/);
      assert.doesNotMatch(csv.body, /bob@other.org/);
      const models = await b.get('/console/org/1/report/models.csv');
      assert.match(models.body, /^authenticator,aaguid,passkeys\r\n/);
      assert.equal((await b.get('/console/org/1/report/nonsense.csv')).statusCode, 404);
      const audit = await b.get('/console/org/1/audit?action=role.grant');
      assert.equal(audit.statusCode, 200);
      assert.match(audit.body, /<td>role\.grant<\/td>/);
      assert.doesNotMatch(audit.body, /<td>passkey\.delete<\/td>/);
      const bad = await b.get('/console/org/1/audit?since=yesterday');
      assert.equal(bad.statusCode, 400);
      assert.match(bad.body, /not an ISO 8601 time/);
      const json = await b.get('/console/org/1/audit.json?action=role.grant');
      assert.equal(json.statusCode, 200);
      assert.ok(
        json.json().every((r: { action: string; org_id: number }) => r.action === 'role.grant' && r.org_id === 1),
      );
      const exported = await b.get('/console/org/1/audit.csv');
      assert.match(exported.body, /^id,at,action,actor_type,actor,subject,eppn,client_id,source,details\r\n/);
    });

    it('bulk offboarding: junk refuses the whole list, the preview changes nothing, the confirmation needs a reason', async () => {
      const leaver = await seedUser(ctx, 1, 'leaver@example.org');
      await addKey(ctx, leaver, 'One');
      await addKey(ctx, leaver, 'Two');
      const { b } = await signIn(ctx, olga, olgaKey);
      const form = await b.get('/console/org/1/offboard');
      const token = csrfOf(form.body);
      const junk = await b.post('/console/org/1/offboard/preview', {
        _csrf: token,
        eppns: 'leaver@example.org\nnot an eppn\nbob@other.org',
      });
      assert.equal(junk.statusCode, 400);
      assert.match(junk.body, /2 bad lines, so nothing was done: line 2: eppn/);
      const tooMany = await b.post('/console/org/1/offboard/preview', {
        _csrf: token,
        eppns: Array.from({ length: 10_001 }, (_, i) => `u${i}@example.org`).join('\n'),
      });
      assert.equal(tooMany.statusCode, 400);
      assert.match(tooMany.body, /at most 10000 lines/);
      const preview = await b.post('/console/org/1/offboard/preview', {
        _csrf: token,
        eppns: 'leaver@example.org\r\nghost@example.org\nLEAVER@example.org',
      });
      assert.equal(preview.statusCode, 200);
      assert.match(preview.body, /1 users found; 2 passkeys would be deleted/);
      assert.match(preview.body, /ghost@example.org/);
      assert.equal((await listUserCredentials(ctx.store.db, leaver.id)).length, 2);
      const noReason = await b.post('/console/org/1/offboard', { _csrf: token, eppns: 'leaver@example.org' });
      assert.equal(noReason.statusCode, 400);
      assert.equal((await listUserCredentials(ctx.store.db, leaver.id)).length, 2);
      const done = await b.post('/console/org/1/offboard', {
        _csrf: token,
        eppns: 'leaver@example.org\nghost@example.org',
        reason: 'End of term',
      });
      assert.equal(done.statusCode, 200);
      assert.match(done.body, /Deleted 2 passkeys of 1 users/);
      assert.equal((await listUserCredentials(ctx.store.db, leaver.id)).length, 0);
      const [record] = await listAuditEvents(ctx.store.db, { subject: 'leaver@example.org', limit: 1 });
      assert.equal(record?.kind, 'passkey.delete_user');
      assert.equal(record?.actor, 'olga@example.org');
      assert.deepEqual(JSON.parse(record!.details), { reason: 'End of term' });
    });

    it('an org-admin grants and revokes helpdesk in their organization only', async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const page = await b.get('/console/org/1/staff');
      assert.match(page.body, /helen@example.org/);
      const token = csrfOf(page.body);
      const granted = await b.post('/console/org/1/staff', { _csrf: token, eppn: 'nora@example.org' });
      assert.equal(granted.statusCode, 200);
      assert.match(granted.body, /nora@example.org is now helpdesk/);
      const twice = await b.post('/console/org/1/staff', { _csrf: token, eppn: 'nora@example.org' });
      assert.equal(twice.statusCode, 409);
      const foreign = await b.post('/console/org/1/staff', { _csrf: token, eppn: 'bob@other.org' });
      assert.equal(foreign.statusCode, 400);
      assert.match(foreign.body, /not a username of this organization/);
      const unknown = await b.post('/console/org/1/staff', { _csrf: token, eppn: 'ghost@example.org' });
      assert.equal(unknown.statusCode, 400);
      const { landed } = await signIn(ctx, nora, noraKey);
      assert.equal(landed.statusCode, 200, 'nora now has the console');
      const revoked = await b.post('/console/org/1/staff/revoke', { _csrf: token, eppn: 'nora@example.org' });
      assert.match(revoked.body, /nora@example.org is no longer helpdesk/);
      const [record] = await listAuditEvents(ctx.store.db, { action: 'role.revoke', limit: 1 });
      assert.equal(record?.actor, 'olga@example.org');
    });

    it('signing out ends the console session and then the service session; a disabled console client switches it off', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get('/console/org/1');
      const out = await b.post('/console/sign-out', { _csrf: csrfOf(page.body) });
      assert.equal(out.statusCode, 303);
      const to = new URL(String(out.headers.location), PUBLIC_URL);
      assert.equal(to.pathname, '/openid/endsession');
      assert.equal(to.searchParams.get('post_logout_redirect_uri'), `${PUBLIC_URL}/console/signed-out`);
      assert.equal((await b.get('/console/org/1')).statusCode, 303, 'signed out of the console');
      await setClientEnabled(ctx.store, 'idp-console', false);
      try {
        const off = await cookieBrowser(ctx.app).get('/console');
        assert.equal(off.statusCode, 503);
        assert.match(off.body, /The console is switched off/);
      } finally {
        await setClientEnabled(ctx.store, 'idp-console', true);
      }
      assert.equal((await cookieBrowser(ctx.app).get('/console')).statusCode, 303);
    });
  });
}
