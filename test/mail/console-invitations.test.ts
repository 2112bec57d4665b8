// The console's invitations: a helpdesk invites one user from the user's page, an organization
// administrator everyone without a passkey from the report; both CSRF-protected and role-checked;
// no buttons without a mail server. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { addKey, csrfOf, signIn } from '../console/console-browser.ts';
import { grantRole } from '../../src/directory/roles.ts';
import type { User } from '../../src/store/directory.ts';
import type { TestCredential } from '../helpers.ts';
import { startSmtp, type TestSmtp } from './smtp.ts';

for (const dialect of dialects()) {
  describe(`console invitations (${dialect})`, () => {
    let ctx: TestContext;
    let bare: TestContext;
    let smtp: TestSmtp;
    let helen: User, olga: User;
    let helenKey: TestCredential, olgaKey: TestCredential;

    before(async () => {
      smtp = await startSmtp();
      ctx = await startTestApp(dialect, { SMTP_URL: smtp.url, SMTP_FROM: 'idp@example.test' });
      bare = await startTestApp(dialect);
      for (const c of [ctx, bare]) {
        await seedOrg(c, 1, 'example.org', 'Example University');
        await seedUser(c, 1, 'ada@example.org', { email: 'ada@mail.example' });
        await seedUser(c, 1, 'bob@example.org', { email: 'bob@mail.example' });
        await seedUser(c, 1, 'carol@example.org');
      }
      helen = await seedUser(ctx, 1, 'helen@example.org', { email: 'helen@mail.example' });
      olga = await seedUser(ctx, 1, 'olga@example.org', { email: 'olga@mail.example' });
      await grantRole(ctx.store, { eppn: helen.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(ctx.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      helenKey = (await addKey(ctx, helen)).key;
      olgaKey = (await addKey(ctx, olga)).key;
    });

    after(async () => {
      await ctx?.close();
      await bare?.close();
      await smtp?.stop();
    });

    it('a helpdesk invites one user from their page; not without the CSRF token', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get('/console/org/1/users/ada@example.org');
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /action="\/console\/org\/1\/users\/ada%40example\.org\/invite"/);
      const noAddress = await b.get('/console/org/1/users/carol@example.org');
      assert.doesNotMatch(noAddress.body, /\/invite"/, 'no button for a user without an address');
      const forged = await b.post('/console/org/1/users/ada@example.org/invite', {});
      assert.equal(forged.statusCode, 403);
      const sent = await b.post('/console/org/1/users/ada@example.org/invite', { _csrf: csrfOf(page.body) });
      assert.equal(sent.statusCode, 303);
      await smtp.waitFor(1);
      assert.equal(smtp.messages[0]!.to, 'ada@mail.example');
      assert.match(smtp.messages[0]!.subject, /Create your passkey/);
      const staff = await b.get('/console/org/1/users/olga@example.org');
      assert.doesNotMatch(staff.body, /\/invite"/, 'no button for a stronger role');
      const refused = await b.post('/console/org/1/users/olga@example.org/invite', { _csrf: csrfOf(page.body) });
      assert.equal(refused.statusCode, 403);
      // the report, and so inviting everyone, is for organization administrators
      const report = await b.post('/console/org/1/invite', { _csrf: csrfOf(page.body) });
      assert.equal(report.statusCode, 403);
    });

    it('an organization administrator invites everyone without a passkey from the report', async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const report = await b.get('/console/org/1/report');
      assert.equal(report.statusCode, 200);
      assert.match(report.body, /Invited to make a passkey<\/th><td class="num">1</);
      assert.equal((await b.post('/console/org/1/invite', {})).statusCode, 403, 'CSRF');
      const sent = await b.post('/console/org/1/invite', { _csrf: csrfOf(report.body) });
      assert.equal(sent.statusCode, 303);
      assert.match(String(sent.headers.location), /\/report\?invited=2&skipped=1$/);
      const after = await b.get(String(sent.headers.location).replace(/^https:\/\/[^/]+/, ''));
      assert.match(after.body, /2 invitation\(s\) are on their way; 1 user\(s\) were skipped/);
      assert.match(after.body, /Invited to make a passkey<\/th><td class="num">2</);
      await smtp.waitFor(3);
      assert.deepEqual(
        smtp.messages
          .slice(1)
          .map((m) => m.to)
          .sort(),
        ['ada@mail.example', 'bob@mail.example'],
      );
    });

    it('shows no invitation buttons without a mail server', async () => {
      const olgaBare = await seedUser(bare, 1, 'olga@example.org');
      await grantRole(bare.store, { eppn: olgaBare.eppn, role: 'org-admin', orgId: 1 });
      const key = (await addKey(bare, olgaBare)).key;
      const { b } = await signIn(bare, olgaBare, key);
      const page = await b.get('/console/org/1/users/ada@example.org');
      assert.doesNotMatch(page.body, /\/invite"/);
      const report = await b.get('/console/org/1/report');
      assert.doesNotMatch(report.body, /\/invite"/);
      const post = await b.post('/console/org/1/invite', { _csrf: csrfOf(report.body) });
      assert.equal(post.statusCode, 409, 'refused: mail is not configured');
    });
  });
}
