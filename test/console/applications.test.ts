// The console's Applications pages through HTTP, on both databases: an org-admin (and an operator,
// in any organization) sees the OpenID Connect clients and SAML service providers users sign in to,
// with their attribute groups and the concrete claims or SAML attributes those release (from the one
// release table), first party or consent, enabled or disabled, the federation an SP came from, and the
// API clients granted their organization only; a helpdesk is refused, another organization is 403
// and an unknown or another organization's API client is 404. Every value is escaped.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedClient, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { addKey, signIn } from './console-browser.ts';
import { grantRole } from '../../src/directory/roles.ts';
import {
  addServiceProvider,
  serviceProviderClientId,
  setServiceProviderEnabled,
} from '../../src/service-providers/index.ts';
import { ATTRIBUTE_RELEASE, groupClaims } from '../../src/directory/attribute-release.ts';
import type { User } from '../../src/store/directory.ts';
import type { TestCredential } from '../helpers.ts';
import { party } from '../saml/saml-fixtures.ts';
import { federationOfOneSp, type MetadataServer } from '../saml/federation-fixtures.ts';
import { shibboleth } from '../saml-idp/sso-fixtures.ts';

const FED_SP = 'https://wiki.example.edu/shibboleth';
const federation = await party('federation.example.org');
const escaped = (s: string) => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

for (const dialect of dialects()) {
  describe(`console applications (${dialect})`, () => {
    let ctx: TestContext;
    let server: MetadataServer;
    let olga: User, helen: User, opal: User;
    let olgaKey: TestCredential, helenKey: TestCredential, opalKey: TestCredential;
    let wiki: string, api: string, otherApi: string, spEntityId: string;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      await seedOrg(ctx, 2, 'other.org', 'Other College');
      olga = await seedUser(ctx, 1, 'olga@example.org');
      helen = await seedUser(ctx, 1, 'helen@example.org');
      opal = await seedUser(ctx, 2, 'opal@other.org');
      await grantRole(ctx.store, { eppn: olga.eppn, role: 'org-admin', orgId: 1 });
      await grantRole(ctx.store, { eppn: helen.eppn, role: 'helpdesk', orgId: 1 });
      await grantRole(ctx.store, { eppn: opal.eppn, role: 'operator' });
      olgaKey = (await addKey(ctx, olga)).key;
      helenKey = (await addKey(ctx, helen)).key;
      opalKey = (await addKey(ctx, opal)).key;
      wiki = (
        await seedClient(ctx, {
          name: 'Wiki <b>&</b>',
          redirectUris: ['https://wiki.example.org/cb'],
          groups: ['userid-idp', 'email'],
        })
      ).clientId;
      api = (await seedClient(ctx, { name: 'Passkey sync', scopes: ['passkey.read'], orgs: [1] })).clientId;
      otherApi = (await seedClient(ctx, { name: 'Other sync', scopes: ['passkey.read'], orgs: [2] })).clientId;
      const sp = await shibboleth();
      spEntityId = sp.entityId;
      await addServiceProvider(ctx.store, {
        metadata: sp.metadata,
        name: 'Library',
        groups: ['userid-idp', 'userinfo-name'],
        firstParty: true,
      });
      await setServiceProviderEnabled(ctx.store, sp.entityId, false);
      ({ server } = await federationOfOneSp(ctx.store, federation, FED_SP));
    });
    after(async () => {
      await ctx?.close();
      await server?.close();
    });

    it('an org-admin sees every sign-in application with what it receives, and its organization’s API clients', async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const res = await b.get('/console/org/1/applications');
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      const body = res.body;
      assert.match(body, /<a href="\/console\/org\/1\/applications">Applications<\/a>/, 'in the navigation');
      // the OpenID Connect client: escaped name, its groups' claims from the release table
      assert.ok(body.includes(escaped('Wiki <b>&</b>')));
      assert.ok(!body.includes('Wiki <b>'), 'the name is escaped');
      const claims = groupClaims(ctx.config);
      for (const claim of [...claims['userid-idp'], ...claims.email])
        assert.ok(body.includes(`<code>${claim}</code>`), claim);
      // the registered SP: its entityID, FriendlyNames, first party, disabled
      const library = body.slice(body.indexOf('>Library<'), body.indexOf('</tr>', body.indexOf('>Library<')));
      assert.ok(library.includes(spEntityId));
      // (eduPersonTargetedID only for an SP whose metadata requests it: this one does not)
      for (const a of [...ATTRIBUTE_RELEASE['userid-idp'].saml, ...ATTRIBUTE_RELEASE['userinfo-name'].saml])
        assert.equal(library.includes(`<code>${a.friendlyName}</code>`), !a.onlyIfRequested, a.friendlyName);
      assert.match(library, /First party: no consent page/);
      assert.match(library, /Disabled/);
      assert.match(library, /Registered here/);
      // the federation SP: its categories' attributes only (no cn), consent, the federation
      const fed = body.slice(body.indexOf(FED_SP), body.indexOf('</tr>', body.indexOf(FED_SP)));
      assert.match(fed, /<code>eduPersonPrincipalName<\/code>/);
      assert.doesNotMatch(fed, /<code>cn<\/code>/, 'a category never widens to a group’s other attributes');
      assert.match(fed, /Asks for consent/);
      assert.match(fed, /<td>urn:test:federation<\/td>/, 'the federation by the name its aggregate gives');
      // API clients: this organization's, not another's
      assert.ok(body.includes('Passkey sync'));
      assert.ok(!body.includes('Other sync'), 'another organization’s API client is not listed');
      assert.ok(body.includes(`/console/org/1/applications/${api}`));
    });

    it('an application’s page lists each group with its claims or its attributes by FriendlyName and name', async () => {
      const { b } = await signIn(ctx, olga, olgaKey);
      const sp = await b.get(`/console/org/1/applications/${serviceProviderClientId(spEntityId)}`);
      assert.equal(sp.statusCode, 200);
      assert.match(sp.body, /<h1>Application: Library<\/h1>/);
      for (const a of ATTRIBUTE_RELEASE['userinfo-name'].saml)
        assert.ok(sp.body.includes(`${a.friendlyName} (<code>${a.name}</code>)`), a.name);
      assert.match(sp.body, /Shibboleth\.sso\/SAML2\/POST/, 'its assertion consumer services');
      const oidc = await b.get(`/console/org/1/applications/${wiki}`);
      assert.equal(oidc.statusCode, 200);
      assert.match(
        oidc.body,
        /<th scope="row"><code>email<\/code><\/th><td><ul class="plain compact"><li><code>email<\/code><\/li><li><code>email_verified<\/code><\/li>/,
      );
      assert.match(oidc.body, /https:\/\/wiki\.example\.org\/cb/);
      for (const id of [otherApi, 'no-such-client', 'x'.repeat(300)]) {
        const res = await b.get(`/console/org/1/applications/${id}`);
        assert.equal(res.statusCode, 404, id);
        assert.match(res.body, /This organization has no such application/);
      }
    });

    it('a helpdesk is refused, another organization is out of reach; an operator sees any organization', async () => {
      const { b } = await signIn(ctx, helen, helenKey);
      const refused = await b.get('/console/org/1/applications');
      assert.equal(refused.statusCode, 403);
      assert.doesNotMatch(refused.body, /Passkey sync/);
      assert.equal((await b.get(`/console/org/1/applications/${wiki}`)).statusCode, 403);
      const search = await b.get('/console/org/1');
      assert.doesNotMatch(search.body, /\/applications"/, 'no link for a helpdesk');
      const admin = (await signIn(ctx, olga, olgaKey)).b;
      assert.equal((await admin.get('/console/org/2/applications')).statusCode, 403);
      assert.equal((await admin.get(`/console/org/2/applications/${otherApi}`)).statusCode, 403);
      const operator = (await signIn(ctx, opal, opalKey)).b;
      const two = await operator.get('/console/org/2/applications');
      assert.equal(two.statusCode, 200);
      assert.ok(two.body.includes('Other sync') && !two.body.includes('Passkey sync'));
      assert.equal((await operator.get(`/console/org/2/applications/${otherApi}`)).statusCode, 200);
    });
  });
}
