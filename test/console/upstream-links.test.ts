// The console's view of upstream identity providers through HTTP, on both databases: the
// organization's providers read-only (never a secret), a user's linked upstream identities, and
// removing a link with the function the admin CLI and the account page use: audited, with the
// console's CSRF token, and only by staff stronger than the user's roles.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedOrg, seedUser, startTestApp, type TestContext, type TestCredential } from '../helpers.ts';
import { addKey, csrfOf, signIn } from './console-browser.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { addUpstreamProvider, removeUpstreamProvider } from '../../src/upstream/providers.ts';
import { brandLogo } from '../../src/brand.ts';
import { linkAccount, linksOfUser } from '../../src/upstream/linking.ts';
import type { User } from '../../src/store/directory.ts';

const SECRET = 'upstream-client-secret-not-shown';
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20"/></svg>';

for (const dialect of dialects()) {
  describe(`console: upstream providers and links (${dialect})`, () => {
    let ctx: TestContext;
    let helen: User, olga: User, hugo: User, ada: User;
    let helenKey: TestCredential, olgaKey: TestCredential;
    let providerId = '';

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      helen = await seedUser(ctx, 1, 'helen@example.org', { name: 'Helen Helpdesk' });
      olga = await seedUser(ctx, 1, 'olga@example.org', { name: 'Olga Admin' });
      hugo = await seedUser(ctx, 1, 'hugo@example.org', { name: 'Hugo Helpdesk' });
      ada = await seedUser(ctx, 1, 'ada@example.org', { name: 'Ada Lovelace' });
      await grantRole(ctx.store, { eppn: helen.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(ctx.store, { eppn: hugo.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(ctx.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      helenKey = (await addKey(ctx, helen)).key;
      olgaKey = (await addKey(ctx, olga)).key;
      providerId = (
        await addUpstreamProvider(ctx.store, ctx.keys, {
          orgId: 1,
          type: 'oidc',
          name: 'Campus IdP',
          issuer: 'https://campus-idp.example.test',
          clientId: 'campus-client',
          clientSecret: SECRET,
          linkBy: 'none',
        })
      ).id;
      await linkAccount(ctx.store, providerId, ada.eppn, 'ada-upstream-subject');
      await linkAccount(ctx.store, providerId, hugo.eppn, 'hugo-upstream-subject');
    });
    after(() => ctx.close());

    const linked = async (user: User) => (await linksOfUser(ctx.store, user.id)).map((l) => l.subject);
    const newest = async (action: 'upstream.unlink' | 'access.refused') =>
      (await listAuditEvents(ctx.store.db, { action, limit: 10 })).map((r) => ({
        actor: `${r.actor_type}:${r.actor}`,
        eppn: r.eppn,
        details: JSON.parse(r.details) as Record<string, unknown>,
      }));

    it("an org-admin sees the organization's providers, never their secrets; a helpdesk is refused the page", async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const res = await b.get('/console/org/1/upstream');
      assert.equal(res.statusCode, 200);
      assert.match(
        res.body,
        /<th scope="row">Campus IdP<\/th><td>OpenID Connect<\/td><td>Yes<\/td><td>none<\/td><td>No<\/td>/,
      );
      assert.ok(!res.body.includes(SECRET), 'no client secret');
      assert.ok(!res.body.includes('campus-client'), 'no client id either');
      const search = await b.get('/console/org/1');
      assert.match(search.body, /<a href="\/console\/org\/1\/upstream">Sign-in providers<\/a>/);
      const nb = await ctx.app.inject({
        method: 'GET',
        url: '/console/org/1/upstream',
        headers: { cookie: b.cookies(), 'accept-language': 'nb' },
      });
      assert.match(nb.body, /<h1>Innloggingstjenester<\/h1>/);

      const helpdesk = await signIn(ctx, helen, helenKey);
      assert.equal((await helpdesk.b.get('/console/org/1/upstream')).statusCode, 403);
    });

    it('shows a provider’s logo as the sign-in page does (decorative, served by the service)', async () => {
      const withLogo = await addUpstreamProvider(ctx.store, ctx.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Logo IdP',
        issuer: 'https://logo-idp.example.test',
        clientId: 'logo-client',
        clientSecret: SECRET,
        logo: brandLogo(Buffer.from(SVG)),
      });
      const { b } = await signIn(ctx, olga, olgaKey);
      const res = await b.get('/console/org/1/upstream');
      const src = new RegExp(
        `<th scope="row"><img class="upstream-logo" src="(/upstream/${withLogo.id}/logo\\?v=[\\w-]{16})" alt="">Logo IdP</th>`,
      ).exec(res.body)?.[1];
      assert.ok(src, 'the logo before the name');
      assert.match(res.body, /<th scope="row">Campus IdP<\/th>/, 'a provider without a logo: the name alone');
      const logo = await ctx.app.inject({ url: src });
      assert.equal(logo.statusCode, 200);
      assert.equal(logo.headers['content-type'], 'image/svg+xml');
      await removeUpstreamProvider(ctx.store, withLogo.id);
    });

    it("a user's page lists their linked identities; a post without the CSRF token is refused", async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get(`/console/org/1/users/${ada.eppn}`);
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /<th scope="row">Campus IdP<\/th><td><code>ada-upstream-subject<\/code><\/td>/);
      assert.match(page.body, /action="\/console\/org\/1\/users\/ada%40example.org\/upstream-links\/unlink"/);
      const res = await b.post(`/console/org/1/users/${ada.eppn}/upstream-links/unlink`, { upstream: providerId });
      assert.equal(res.statusCode, 403);
      const forged = await b.post(`/console/org/1/users/${ada.eppn}/upstream-links/unlink`, {
        _csrf: 'forged',
        upstream: providerId,
      });
      assert.equal(forged.statusCode, 403);
      assert.deepEqual(await linked(ada), ['ada-upstream-subject']);
      assert.deepEqual(await newest('upstream.unlink'), []);
    });

    it('a helpdesk removes a link with the CSRF token, and the audit trail records it', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get(`/console/org/1/users/${ada.eppn}`);
      const _csrf = csrfOf(page.body);
      const unknown = await b.post(`/console/org/1/users/${ada.eppn}/upstream-links/unlink`, {
        _csrf,
        upstream: 'aaaaaaaaaaaa',
      });
      assert.equal(unknown.statusCode, 404);
      const res = await b.post(`/console/org/1/users/${ada.eppn}/upstream-links/unlink`, {
        _csrf,
        upstream: providerId,
      });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/console/org/1/users/ada%40example.org?done=unlinked');
      assert.deepEqual(await linked(ada), []);
      assert.deepEqual(await newest('upstream.unlink'), [
        {
          actor: 'user:helen@example.org',
          eppn: ada.eppn,
          details: { upstream: providerId, upstream_subject: 'ada-upstream-subject' },
        },
      ]);
      const after = await b.get(`/console/org/1/users/${ada.eppn}?done=unlinked`);
      assert.match(after.body, /The link was removed\./);
      assert.match(after.body, /No sign-in providers are linked\./);
    });

    it("a helpdesk may not remove another helpdesk's link: refused and audited; an org-admin may", async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const page = await b.get(`/console/org/1/users/${hugo.eppn}`);
      assert.match(page.body, /hugo-upstream-subject/);
      assert.ok(!page.body.includes('upstream-links/unlink'), 'no button offered');
      const res = await b.post(`/console/org/1/users/${hugo.eppn}/upstream-links/unlink`, {
        _csrf: csrfOf(page.body),
        upstream: providerId,
      });
      assert.equal(res.statusCode, 403);
      assert.match(res.body, /has the helpdesk role/);
      assert.deepEqual(await linked(hugo), ['hugo-upstream-subject']);
      const [refusal] = await newest('access.refused');
      assert.deepEqual(refusal, {
        actor: 'user:helen@example.org',
        eppn: hugo.eppn,
        details: { refused: 'upstream.unlink', roles: ['helpdesk'] },
      });

      const admin = await signIn(ctx, olga, olgaKey);
      const adminPage = await admin.b.get(`/console/org/1/users/${hugo.eppn}`);
      const done = await admin.b.post(`/console/org/1/users/${hugo.eppn}/upstream-links/unlink`, {
        _csrf: csrfOf(adminPage.body),
        upstream: providerId,
      });
      assert.equal(done.statusCode, 303);
      assert.deepEqual(await linked(hugo), []);
    });
  });
}
