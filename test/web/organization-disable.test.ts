// Disabling an organization, as an operator does it (the admin CLI, another process's work on the
// same database), over real HTTP: none of its users signs in (password, passkey, upstream OpenID
// Connect, SAML single sign-on with a session made before), their refresh and access tokens are
// refused (userinfo, the legacy userinfo, introspection), other organizations carry on, and enabling
// gives everything back except to a user disabled on their own. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { basicAuth, cli, dialects, p256Credential, pickFreePort, seedOrg, seedUser } from '../helpers.ts';
import type { TestCredential } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';
import { assertion } from '../authenticator.ts';
import { httpBrowser, postedResponse, signInAndAgree, type PageBrowser } from '../saml-idp/sign-in-fixtures.ts';
import { authnRequestXml, redirectQuery, requestId, shibboleth, type TestSp } from '../saml-idp/sso-fixtures.ts';
import { startTestUpstream, fetchBrowser, type TestUpstream } from '../upstream/oidc-upstream.ts';
import { addUpstreamProvider } from '../../src/upstream/providers.ts';
import { addServiceProvider } from '../../src/service-providers/index.ts';
import { setOrganizationDisabled } from '../../src/directory/index.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findOrganization, type User } from '../../src/store/directory.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';
import { seedClient } from '../helpers.ts';

const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://rp.example.org/cb';
const DISABLED = /This account is disabled/;
const UPSTREAM = { clientId: 'idp-upstream-test', secret: 'upstream-client-secret-0123456789' };

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
const pathOf = (location: string) => {
  const url = new URL(location, 'http://x.invalid');
  return `${url.pathname}${url.search}`;
};

interface Tokens {
  access_token: string;
  refresh_token: string;
}

/** Asks until the answer is the expected one, for at most limitMs; the last answer. */
async function within<T>(limitMs: number, ask: () => Promise<T>, expected: (answer: T) => boolean): Promise<T> {
  const start = performance.now();
  for (;;) {
    const answer = await ask();
    if (expected(answer) || performance.now() - start > limitMs) return answer;
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const dialect of dialects()) {
  describe(`disabling an organization (${dialect})`, () => {
    let server: E2EServer;
    let upstream: TestUpstream;
    let upstreamId: string;
    let sp: TestSp;
    let rp: { clientId: string; secret: string };
    let ada: User;
    let key: TestCredential;
    let counter = 0;
    const run = (...args: string[]) => cli(server.config.databaseUrl, args);
    const audit = (action: string) => listAuditEvents(server.store.db, { action, after: 0 });

    before(async () => {
      server = await startServer(dialect, { LOGIN_RATE_LIMIT_ACCOUNT: '1000', LOGIN_RATE_LIMIT_IP: '100000' });
      await seedOrg(server, 1, 'example.org');
      await seedOrg(server, 2, 'other.org', 'Other');
      ada = await seedUser(server, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      await seedUser(server, 1, 'bob@example.org', { name: 'Bob', password: PASSWORD });
      await seedUser(server, 2, 'cy@other.org', { name: 'Cy', password: PASSWORD });
      key = p256Credential();
      await insertPasskeys(server.store.db, [
        {
          user_id: ada.id,
          org_id: 1,
          credential_id: key.id,
          public_key: key.cose,
          sign_count: 0,
          transports: '[]',
          label: 'Key',
          aaguid: ZERO_AAGUID,
          backup_eligible: 1,
          backup_state: 1,
          mfa_verified: 1,
          created_at: Date.now(),
          last_used_at: null,
        },
      ]);
      rp = await seedClient(server, { redirectUris: [REDIRECT], firstParty: true, scopes: ['offline_access'] });
      sp = await shibboleth();
      await addServiceProvider(server.store, { metadata: sp.metadata, groups: ['userid-idp'], encrypt: 'never' });
      const port = await pickFreePort();
      upstreamId = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 1,
          type: 'oidc',
          name: 'Campus IdP',
          issuer: `http://127.0.0.1:${port}`,
          clientId: UPSTREAM.clientId,
          clientSecret: UPSTREAM.secret,
          linkBy: 'eppn',
          scopes: 'openid email profile eppn',
        })
      ).id;
      upstream = await startTestUpstream(port, {
        ...UPSTREAM,
        redirectUri: `${server.url}/upstream/${upstreamId}/callback`,
      });
    });
    after(async () => {
      await upstream?.close();
      await server?.close();
    });

    const browser = () => httpBrowser(() => server.url);

    /** The relying party's authorization request (PKCE), followed to the sign-in page. */
    async function signInPage(b: PageBrowser, extra: Record<string, string> = {}) {
      const verifier = randomBytes(32).toString('base64url');
      const query = new URLSearchParams({
        client_id: rp.clientId,
        response_type: 'code',
        scope: 'openid offline_access',
        redirect_uri: REDIRECT,
        code_challenge: createHash('sha256').update(verifier).digest('base64url'),
        code_challenge_method: 'S256',
        state: randomBytes(8).toString('hex'),
        prompt: 'login',
        ...extra,
      });
      let page = await b.get(`/oauth/authorization?${query}`);
      for (let i = 0; page.statusCode === 303 || page.statusCode === 302; i++) {
        assert.ok(i < 10, 'too many redirects');
        page = await b.get(pathOf(page.location!));
      }
      assert.equal(page.statusCode, 200, page.body.slice(0, 300));
      return { page, verifier };
    }

    /** From a sign-in's 303 on to the relying party; the code exchanged at the token endpoint. */
    async function finish(b: PageBrowser, signedIn: { statusCode: number; location?: string }, verifier: string) {
      let res = signedIn;
      for (let i = 0; !res.location?.startsWith(REDIRECT); i++) {
        assert.ok(i < 10 && (res.statusCode === 303 || res.statusCode === 302), `on to the relying party (${i})`);
        res = await b.get(pathOf(res.location!));
      }
      const code = new URL(res.location!).searchParams.get('code')!;
      const token = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: basicAuth(rp.clientId, rp.secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
        }),
      });
      assert.equal(token.status, 200);
      const tokens = (await token.json()) as Tokens;
      assert.ok(tokens.refresh_token, 'a refresh token (offline_access)');
      return tokens;
    }

    /** A password sign-in: the page it answered with, and the tokens when it succeeded. */
    async function passwordSignIn(eppn: string, b = browser()) {
      const { page, verifier } = await signInPage(b);
      const action = /action="(\/interaction\/[^"/]+\/login)"/.exec(page.body)![1]!;
      const res = await b.post(action, { _csrf: csrfOf(page.body), username: eppn, password: PASSWORD });
      if (res.statusCode !== 303) return { res };
      return { res, tokens: await finish(b, res, verifier) };
    }

    /** A passkey sign-in with Ada's key (the software authenticator of the passkey tests). */
    async function passkeySignIn() {
      const b = browser();
      const { page, verifier } = await signInPage(b);
      const uid = /\/interaction\/([^/"]+)\/passkey"/.exec(page.body)![1]!;
      const csrf = csrfOf(page.body);
      const options = await b.post(`/interaction/${uid}/passkey/options`, {}, { 'x-csrf-token': csrf });
      assert.equal(options.statusCode, 200, options.body);
      const { challenge } = JSON.parse(options.body) as { challenge: string };
      const signed = assertion(key, challenge, ++counter, {
        userHandle: ada.sub,
        flags: 0x05,
        origin: server.url,
        rpId: new URL(server.url).hostname,
      });
      const res = await b.post(`/interaction/${uid}/passkey`, { _csrf: csrf, response: JSON.stringify(signed) });
      if (res.statusCode !== 303) return { res };
      return { res, tokens: await finish(b, res, verifier) };
    }

    /** Through the upstream provider: where the walk ended (the relying party, or a page). */
    async function upstreamSignIn() {
      upstream.next = { sub: 'campus-ada', claims: { eduperson_principal_name: 'ada@example.org' } };
      const query = new URLSearchParams({
        client_id: rp.clientId,
        response_type: 'code',
        scope: 'openid',
        redirect_uri: REDIRECT,
        code_challenge: 'a'.repeat(43),
        code_challenge_method: 'S256',
        upstream: upstreamId,
      });
      return fetchBrowser().walk(`${server.url}/oauth/authorization?${query}`, (u) => u.href.startsWith(REDIRECT));
    }

    /** What each endpoint says of the tokens now. */
    async function tokenChecks(tokens: Tokens) {
      const bearer = { authorization: `Bearer ${tokens.access_token}` };
      const userinfo = await fetch(`${server.url}/openid/userinfo`, { headers: bearer });
      const legacy = await fetch(`${server.url}/userinfo`, { headers: bearer });
      const form = {
        authorization: basicAuth(rp.clientId, rp.secret),
        'content-type': 'application/x-www-form-urlencoded',
      };
      const introspected = await fetch(`${server.url}/oauth/introspect`, {
        method: 'POST',
        headers: { ...form, accept: 'application/json' },
        body: new URLSearchParams({ token: tokens.access_token }),
      });
      const refreshed = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: form,
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token }),
      });
      const refresh = (await refreshed.json()) as { error?: string; refresh_token?: string };
      // a refresh that worked rotated the token: the next check uses the new one
      if (refresh.refresh_token) tokens.refresh_token = refresh.refresh_token;
      return {
        userinfo: userinfo.status,
        legacy: legacy.status,
        active: ((await introspected.json()) as { active: boolean }).active,
        refresh: refreshed.status === 200 ? 'ok' : refresh.error,
      };
    }
    const working = { userinfo: 200, legacy: 200, active: true, refresh: 'ok' };
    const refused = { userinfo: 401, legacy: 401, active: false, refresh: 'invalid_grant' };

    const ssoQuery = () =>
      redirectQuery(authnRequestXml(server, { id: requestId(), issuer: sp.entityId, acsUrl: sp.acs }), sp.signing);

    it('refuses every sign-in and every token of its users at once; enabling gives them back', async () => {
      // Before: Ada signs in with her password (tokens), her passkey, and at the SAML SP (a session).
      const { tokens } = await passwordSignIn('ada@example.org');
      assert.ok(tokens);
      assert.deepEqual(await tokenChecks(tokens), working);
      assert.ok((await passkeySignIn()).tokens);
      const saml = browser();
      const first = await signInAndAgree(saml, await saml.get(`/saml2/idp/sso?${ssoQuery()}`), {
        username: 'ada@example.org',
        password: PASSWORD,
      });
      postedResponse(first, sp.acs);
      // userinfo now keeps the claims of this token (USERINFO_CACHE_TTL)
      assert.equal(
        (await fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }))
          .status,
        200,
      );

      const r = await run('org', 'disable', '1', '--json');
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(JSON.parse(r.out), { id: 1, disabled: true, changed: true });

      // The CLI is another process: the service's userinfo cache hears of it within a fraction of a second.
      const userinfo = () =>
        fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal((await within(2000, userinfo, (res) => res.status === 401)).status, 401);
      assert.deepEqual(await tokenChecks(tokens), refused);

      const password = await passwordSignIn('ada@example.org');
      assert.equal(password.res.statusCode, 403);
      assert.match(password.res.body, DISABLED);
      const passkey = await passkeySignIn();
      assert.equal(passkey.res.statusCode, 403);
      assert.match(passkey.res.body, DISABLED);
      const viaUpstream = await upstreamSignIn();
      assert.equal(viaUpstream.status, 403, viaUpstream.url);
      assert.match(viaUpstream.body, DISABLED);
      // The SAML session made before answers with no Response: a sign-in, which is refused.
      const again = await signInAndAgree(saml, await saml.get(`/saml2/idp/sso?${ssoQuery()}`), {
        username: 'ada@example.org',
        password: PASSWORD,
      });
      assert.equal(again.statusCode, 403);
      assert.match(again.body, DISABLED);
      assert.ok(!again.body.includes('SAMLResponse'));
      // Another organization's users carry on.
      assert.ok((await passwordSignIn('cy@other.org')).tokens);

      assert.equal((await run('org', 'enable', '1')).code, 0);
      assert.deepEqual(await tokenChecks(tokens), working, 'the tokens of before work again');
      assert.ok((await passwordSignIn('ada@example.org')).tokens);
      assert.ok((await passkeySignIn()).tokens);
      const back = await upstreamSignIn();
      assert.ok(back.url.startsWith(REDIRECT), `${back.status} ${back.url} ${back.body.slice(0, 300)}`);
      // the session of before answers the SP at once again
      postedResponse(await saml.get(`/saml2/idp/sso?${ssoQuery()}`), sp.acs);
    });

    it('takes effect at once in the process that makes the change, userinfo cache included', async () => {
      const { tokens } = await passwordSignIn('ada@example.org');
      assert.ok(tokens);
      const userinfo = () =>
        fetch(`${server.url}/openid/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal((await userinfo()).status, 200);
      assert.equal((await userinfo()).status, 200, 'kept');
      await setOrganizationDisabled(server.store, 1, true);
      assert.equal((await userinfo()).status, 401);
      // the identity is linked now (the test before): refused by the link as well
      const linked = await upstreamSignIn();
      assert.equal(linked.status, 403);
      assert.match(linked.body, DISABLED);
      await setOrganizationDisabled(server.store, 1, false);
      assert.equal((await userinfo()).status, 200);
    });

    it('leaves a user disabled on their own disabled when the organization is enabled', async () => {
      assert.equal((await run('user', 'disable', 'bob@example.org')).code, 0);
      assert.equal((await run('org', 'disable', '1')).code, 0);
      assert.equal((await run('org', 'enable', '1')).code, 0);
      const bob = await passwordSignIn('bob@example.org');
      assert.equal(bob.res.statusCode, 403);
      assert.match(bob.res.body, DISABLED);
      assert.match((await run('user', 'list', '--org', '1')).out, /bob@example\.org.*disabled/);
      assert.ok((await passwordSignIn('ada@example.org')).tokens, 'the others sign in');
    });

    it('org disable and enable: idempotent, audited once each, shown by org list', async () => {
      const before = { disable: (await audit('org.disable')).length, enable: (await audit('org.enable')).length };
      const off = await run('org', 'disable', '2');
      assert.equal(off.code, 0, off.err);
      assert.match(off.out, /organization 2 disabled/);
      const twice = await run('org', 'disable', '2');
      assert.equal(twice.code, 0);
      assert.match(twice.out, /organization 2 was already disabled/);
      assert.deepEqual(JSON.parse((await run('org', 'disable', '2', '--json')).out), {
        id: 2,
        disabled: true,
        changed: false,
      });
      const listed = JSON.parse((await run('org', 'list', '--json')).out) as Record<string, unknown>[];
      const two = listed.find((o) => o.id === 2)!;
      assert.equal(two.status, 'disabled');
      assert.match(String(two.disabled_at), /^\d{4}-\d\d-\d\dT.*\+00:00$/);
      assert.equal(listed.find((o) => o.id === 1)!.status, 'active');
      assert.equal(listed.find((o) => o.id === 1)!.disabled_at, null);
      assert.match((await run('org', 'list')).out, /other\.org.*disabled/);

      const [event] = (await audit('org.disable')).slice(before.disable);
      assert.equal((await audit('org.disable')).length, before.disable + 1);
      assert.equal(event!.subject, '2');
      assert.equal(event!.org_id, 2);
      assert.equal(event!.actor_type, 'operator');
      assert.deepEqual(JSON.parse(event!.details), { realm: 'other.org' });

      assert.match((await run('org', 'enable', '2')).out, /organization 2 enabled/);
      assert.match((await run('org', 'enable', '2')).out, /organization 2 was not disabled/);
      assert.equal((await audit('org.enable')).length, before.enable + 1);
      assert.equal((await findOrganization(server.store.db, 2))!.disabled_at, null);
    });

    it('refuses an unknown organization and an id that is not a number, changing nothing', async () => {
      const disabledBefore = (await audit('org.disable')).length;
      const cases: [string[], RegExp][] = [
        [['org', 'disable', '99'], /organization 99 not found/],
        [['org', 'enable', '99'], /organization 99 not found/],
        [['org', 'disable', 'abc'], /org_id must be a positive integer/],
        [['org', 'enable', '1.5'], /org_id must be a positive integer/],
        [['org', 'disable', '0'], /org_id must be a positive integer/],
      ];
      for (const [args, message] of cases) {
        const r = await run(...args);
        assert.equal(r.code, 1, args.join(' '));
        assert.match(r.err, message, args.join(' '));
      }
      const missing = await run('org', 'disable');
      assert.notEqual(missing.code, 0);
      assert.match(missing.err, /org id is required/);
      assert.equal((await audit('org.disable')).length, disabledBefore);
    });
  });
}
