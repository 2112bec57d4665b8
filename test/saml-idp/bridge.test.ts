// The sign-in bridge over real HTTP: an AuthnRequest without a session goes through the service's
// own sign-in pages (an authorization request with response_type=none for the SP's client) and
// comes back to /saml2/idp/continue, which answers from the session the sign-in left. Also what
// /saml2/idp/continue refuses when it is reached without that sign-in.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addUser } from '../../src/directory/index.ts';
import { createClient } from '../../src/clients/index.ts';
import { addServiceProvider, samlKeys } from '../../src/service-providers/index.ts';
import {
  buildRedirectQuery,
  childElements,
  decodePostMessage,
  NS,
  textOf,
  verifyEnvelopedSignature,
} from '../../src/saml/xml/index.ts';
import { dialects, pickFreePort, seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import {
  authenticate,
  cookieJar,
  follow,
  newCredential,
  signInPage,
  type Target,
  type VirtualUser,
} from '../../bench/signin-flow.ts';
import { authnRequestXml, shibboleth, type TestSp } from './sso-fixtures.ts';

const MFA = 'https://refeds.org/profile/mfa';
const SFA = 'https://refeds.org/profile/sfa';

for (const dialect of dialects()) {
  describe(`SAML sign-in through the service's sign-in pages, over HTTP (${dialect})`, () => {
    let ctx: TestContext;
    let target: Target;
    let sp: TestSp;
    let user: VirtualUser;

    before(async () => {
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url }, { listen: port });
      target = { url, publicUrl: url };
      await seedOrg(ctx);
      sp = await shibboleth();
      // signed Response, assertion in the clear: the test reads it with the IdP's certificate
      await addServiceProvider(ctx.store, {
        metadata: sp.metadata,
        groups: ['userid-idp', 'email'],
        firstParty: true,
        sign: 'both',
        encrypt: 'never',
      });
      const password = 'a long enough password 1';
      const added = await addUser(ctx.store, {
        orgId: 1,
        eppn: 'ada@example.org',
        name: 'Ada',
        email: 'ada@example.org',
        password,
      });
      user = { eppn: 'ada@example.org', password, sub: added.sub, credential: newCredential(), jar: cookieJar() };
    });
    after(() => ctx?.close());

    const ssoUrl = (shape: { force?: boolean; acrs?: string[] } = {}) =>
      `/saml2/idp/sso?${buildRedirectQuery({
        parameter: 'SAMLRequest',
        xml: authnRequestXml(ctx, { issuer: sp.entityId, acsUrl: sp.acs, ...shape }),
      })}`;

    /** The SAML request as far as the authorization request it sends the browser to. */
    async function toAuthorization(jar = user.jar, shape: { force?: boolean; acrs?: string[] } = {}) {
      const answer = await follow(target, jar, ssoUrl(shape), /\/oauth\/authorization\?/);
      assert.ok(answer.location, `sent to sign in, not answered ${answer.status}`);
      return new URL(answer.location, target.url).searchParams;
    }

    /** The Response in the form posted to the SP, its signature checked; the assertion's parts. */
    async function posted(answer: { status: number; body: string }) {
      assert.equal(answer.status, 200, answer.body.slice(0, 300));
      const value = /name="SAMLResponse" value="([^"]+)"/.exec(answer.body)?.[1];
      assert.ok(value, 'a Response is posted');
      const parsed = decodePostMessage(value);
      verifyEnvelopedSignature(parsed, parsed.root, {
        keys: [(await samlKeys(ctx.store, ctx.keys)).signing.certificate],
      });
      const status = childElements(
        childElements(parsed.root, NS.protocol, 'Status')[0]!,
        NS.protocol,
        'StatusCode',
      )[0]!;
      const codes = [
        status.getAttribute('Value'),
        ...childElements(status, NS.protocol, 'StatusCode').map((c) => c.getAttribute('Value')),
      ];
      const assertion = childElements(parsed.root, NS.assertion, 'Assertion')[0];
      const classRef = assertion
        ? textOf(parsed.root.getElementsByTagNameNS(NS.assertion, 'AuthnContextClassRef')[0]!)
        : undefined;
      return { codes, classRef };
    }

    const codesAndTokens = () =>
      ctx.store.db
        .selectFrom('oidc_payloads')
        .select('type')
        .where('type', 'in', ['AuthorizationCode', 'AccessToken', 'RefreshToken'])
        .execute();

    it('signs in with a password on the usual pages and posts the Response; no code or token is issued', async () => {
      const params = await toAuthorization();
      assert.equal(params.get('response_type'), 'none');
      const page = await follow(target, user.jar, `/oauth/authorization?${params}`, /\/interaction\/[^/?]+$/);
      const { uid, csrf } = await signInPage(target, user, page.location!, {});
      const resume = await authenticate(target, user, { uid, csrf, mode: 'password', times: {} });
      const answer = await posted(await follow(target, user.jar, resume));
      assert.deepEqual(answer.codes, ['urn:oasis:names:tc:SAML:2.0:status:Success']);
      assert.equal(answer.classRef, SFA);
      assert.deepEqual(await codesAndTokens(), []);
    });

    it('answers the next request from the session at once', async () => {
      const answer = await posted(await follow(target, user.jar, ssoUrl()));
      assert.deepEqual(answer.codes, ['urn:oasis:names:tc:SAML:2.0:status:Success']);
    });

    it('refuses the continuation of a ForceAuthn request reached without signing in again', async () => {
      // the session's login time is in whole seconds: the request comes in a later one
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const params = await toAuthorization(user.jar, { force: true });
      assert.equal(params.get('prompt'), 'login');
      // straight to the continuation, as if the authorization request had been skipped
      const res = await follow(
        target,
        user.jar,
        `/saml2/idp/continue?state=${encodeURIComponent(params.get('state')!)}`,
      );
      assert.equal(res.status, 400);
      assert.ok(!res.body.includes('SAMLResponse'));
    });

    it('answers NoAuthnContext when the session reached a weaker class than the request asked for', async () => {
      const params = await toAuthorization(user.jar, { acrs: [MFA] });
      assert.equal(params.get('acr_values'), MFA);
      const res = await follow(
        target,
        user.jar,
        `/saml2/idp/continue?state=${encodeURIComponent(params.get('state')!)}`,
      );
      const answer = await posted(res);
      assert.deepEqual(answer.codes, [
        'urn:oasis:names:tc:SAML:2.0:status:Responder',
        'urn:oasis:names:tc:SAML:2.0:status:NoAuthnContext',
      ]);
    });

    it('refuses the continuation in a browser that did not sign in', async () => {
      // a browser with no session goes straight to the continuation, skipping the sign-in
      const stranger = cookieJar();
      const params = await toAuthorization(stranger);
      const res = await follow(
        target,
        stranger,
        `/saml2/idp/continue?state=${encodeURIComponent(params.get('state')!)}`,
      );
      assert.equal(res.status, 400);
      assert.ok(!res.body.includes('SAMLResponse'));
    });

    it('gives response_type=none to SP clients only: an OpenID Connect client asking for it is refused', async () => {
      const { client } = await createClient(ctx.store, ctx.keys, {
        name: 'Portal',
        redirectUris: ['https://rp.example.org/cb'],
        groups: ['email'],
        firstParty: true,
      });
      const query = new URLSearchParams({
        client_id: client.clientId,
        response_type: 'none',
        scope: 'openid email',
        redirect_uri: 'https://rp.example.org/cb',
        state: 'x',
      });
      const res = await follow(target, user.jar, `/oauth/authorization?${query}`, /^https:\/\/rp\.example\.org\//);
      assert.ok(res.location, `answered ${res.status}`);
      const answer = new URL(res.location).searchParams;
      assert.equal(answer.get('error'), 'invalid_request');
      assert.equal(answer.get('error_description'), 'requested response_type is not allowed for this client');
    });
  });
}
