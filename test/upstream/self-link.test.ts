// A signed-in user links an upstream provider to their own account from the account page, over
// plain HTTP on both databases, against a real OpenID Connect upstream (a stock oidc-provider) and
// SAML Responses made to order: the link and its audit record, then a sign-in through the linked
// provider landing on that account; the refusals (identity linked elsewhere, account linked
// elsewhere, disabled, another organization's provider), a form without its CSRF token, a sign-in
// too old, a link request finished in another browser or session than the one that started it, an
// identity the upstream did not authenticate anew (an upstream ignoring prompt=login and max_age, an
// old AuthnInstant), and a provider turned off while the link was under way.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inflateRawSync } from 'node:zlib';
import { dialects, pickFreePort, seedOrg, seedUser } from '../helpers.ts';
import { startRelyingParty, startServer, type E2EServer, type RelyingParty } from '../e2e/helpers.ts';
import { addUpstreamProvider, findUpstreamProvider, setUpstreamEnabled } from '../../src/upstream/providers.ts';
import { linkAccount, linkOwnIdentity, linksOfUser } from '../../src/upstream/linking.ts';
import { findUserByEppn, insertUserId, listUserIds } from '../../src/store/directory.ts';
import { RECENT_SIGN_IN_MS } from '../../src/web/account-page.ts';
import { startTestUpstream, fetchBrowser, type TestUpstream } from './oidc-upstream.ts';
import { forgedIdp, forgeResponse, type ForgedIdp } from './saml-forge.ts';
import { updateUpstreamProvider as setProviderRow } from '../../src/store/upstream.ts';

const CLIENT = { clientId: 'idp-self-link-test', secret: 'self-link-client-secret-0123456789' };
const PASSWORD = 'correct horse battery staple';
const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
type Browser = ReturnType<typeof fetchBrowser>;

for (const dialect of dialects()) {
  describe(`linking an upstream provider from the account page (${dialect})`, () => {
    let server: E2EServer;
    let rp: RelyingParty;
    let upstream: TestUpstream;
    let idp: ForgedIdp;
    let oidcId: string;
    let samlId: string;
    let foreignId: string;
    let offset = 0;

    before(async () => {
      server = await startServer(dialect, {}, { now: () => Date.now() + offset });
      await seedOrg(server);
      await seedOrg(server, 2, 'other.example', 'Other');
      const port = await pickFreePort();
      oidcId = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 1,
          type: 'oidc',
          name: 'Old IdP',
          issuer: `http://127.0.0.1:${port}`,
          clientId: CLIENT.clientId,
          clientSecret: CLIENT.secret,
          linkBy: 'none',
          scopes: 'openid email profile eppn',
        })
      ).id;
      // The namespace is set in the row: the registry gives edugain to SAML providers only, and a social
      // namespace only to its own issuer, which this loopback upstream is not. What is tested here is
      // that a link records the identity in the provider's namespace, and refuses one another account holds.
      await setProviderRow(server.store.db, oidcId, { namespace: 'edugain' });
      upstream = await startTestUpstream(port, { ...CLIENT, redirectUri: `${server.url}/upstream/${oidcId}/callback` });
      idp = await forgedIdp('https://idp.forged.example/idp', ['example.org']);
      samlId = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 1,
          type: 'saml',
          name: 'Uni SAML',
          linkBy: 'none',
          saml: { entityId: idp.entityId, metadataXml: idp.metadata },
        })
      ).id;
      foreignId = (
        await addUpstreamProvider(server.store, server.keys, {
          orgId: 2,
          type: 'oidc',
          name: 'Foreign IdP',
          issuer: `http://127.0.0.1:${await pickFreePort()}`,
          clientId: CLIENT.clientId,
          clientSecret: CLIENT.secret,
        })
      ).id;
      rp = await startRelyingParty(server, { firstParty: true });
    });
    after(async () => {
      await rp?.close();
      await upstream?.close();
      await server?.close();
    });

    const acs = () => `${server.url}/saml2/sp/acs`;
    const audience = () => `${server.url}/saml2/sp/metadata`;
    const atRp = (u: URL) => u.href.startsWith(rp.redirectUri);
    const atReturn = (u: URL) => u.pathname.startsWith('/account/links/return/');
    const atForgedIdp = (u: URL) => u.hostname === 'idp.forged.example';

    const audit = (kind: string) =>
      server.store.db.selectFrom('audit_events').selectAll().where('kind', '=', kind).orderBy('id').execute();
    const lastRefusal = async () => JSON.parse((await audit('upstream.refused')).at(-1)!.details as string);
    const user = async (eppn: string) => (await findUserByEppn(server.store.db, eppn))!;
    const links = async (eppn: string) =>
      (await linksOfUser(server.store, (await user(eppn)).id)).map((l) => [l.upstream, l.subject]);
    const linkRequests = async (eppn: string) =>
      server.store.db
        .selectFrom('upstream_requests')
        .selectAll()
        .where('purpose', '=', 'link')
        .where('user_id', '=', (await user(eppn)).id)
        .orderBy('created_at')
        .execute();

    /** A user with a password, signed in on the account page of a new browser; returns the page's CSRF token. */
    async function signedIn(eppn: string, browser = fetchBrowser()) {
      if (!(await findUserByEppn(server.store.db, eppn))) await seedUser(server, 1, eppn, { password: PASSWORD });
      const form = csrfOf((await browser.walk(`${server.url}/account`)).body);
      const res = await browser.post(`${server.url}/account/login`, {
        _csrf: form,
        username: eppn,
        password: PASSWORD,
      });
      assert.equal(res.status, 303, `${eppn} signs in`);
      const page = await browser.walk(`${server.url}/account`);
      assert.match(page.body, new RegExp(eppn.replace('.', '\\.')));
      return { browser, csrf: csrfOf(page.body), page };
    }

    /** "Not now" on the passkey offer page a walk ended on, then on to the relying party. */
    async function declineOffer(browser: Browser, offer: { url: string; status: number; body: string }) {
      const action = /action="([^"]*\/offer\/later)"/.exec(offer.body)?.[1];
      assert.ok(
        action,
        `the passkey offer: ${offer.url} ${offer.status} ${offer.body.replace(/<head>[\s\S]*<\/head>/, '').slice(0, 1200)}`,
      );
      const later = await browser.post(new URL(action, offer.url).href, { _csrf: csrfOf(offer.body) });
      return browser.walk(new URL(later.headers.get('location')!, offer.url).href, atRp);
    }

    /** A password sign-in at the relying party's request (prompt=login) in this browser: its session becomes the user's. */
    async function signInThroughRp(browser: Browser, eppn: string) {
      const begun = await rp.begin({ prompt: 'login' });
      const page = await browser.walk(begun.url, atRp);
      const uid = new URL(page.url).pathname.split('/')[2]!;
      const login = await browser.post(`${server.url}/interaction/${uid}/login`, {
        _csrf: csrfOf(page.body),
        username: eppn,
        password: PASSWORD,
      });
      assert.equal(login.status, 303, `${eppn} signs in at the relying party`);
      const next = await browser.walk(new URL(login.headers.get('location')!, page.url).href, atRp);
      let done = next;
      // oidc-provider ends the other user's session first (its auto-submitted form)
      const endSession = /action="([^"]*\/openid\/endsession\/confirm)"/.exec(done.body)?.[1];
      if (endSession) {
        const xsrf = /name="xsrf" value="([^"]+)"/.exec(done.body)![1]!;
        const ended = await browser.post(endSession, { xsrf, logout: 'yes' });
        done = await browser.walk(new URL(ended.headers.get('location')!, endSession).href, atRp);
      }
      if (done.status !== 0) done = await declineOffer(browser, done);
      assert.ok(atRp(new URL(done.url)));
    }

    const startLink = (browser: Browser, csrf: string, provider: string) =>
      browser.post(`${server.url}/account/links/link`, { _csrf: csrf, upstream: provider });

    /** Link through the OIDC upstream as `sub`, walking until stop (default: to the end). */
    async function linkOidc(
      browser: Browser,
      csrf: string,
      sub: string,
      stop?: (u: URL) => boolean,
      claims: Record<string, unknown> = {},
    ) {
      upstream.next = { sub, claims };
      const started = await startLink(browser, csrf, oidcId);
      assert.equal(started.status, 303, 'sent upstream');
      const location = started.headers.get('location')!;
      assert.ok(location.startsWith(upstream.issuer), location);
      assert.equal(new URL(location).searchParams.get('prompt'), 'login', 'a fresh sign-in at the upstream');
      assert.equal(new URL(location).searchParams.get('max_age'), '0', 'a sign-in no older than the request');
      return browser.walk(location, stop);
    }

    /** Link through the SAML IdP as nameId: the AuthnRequest goes out, a Response made to order comes back. */
    async function linkSaml(
      browser: Browser,
      csrf: string,
      eppn: string,
      nameId: string,
      forged: { authnInstant?: number; eppn?: string } = {},
    ) {
      const started = await startLink(browser, csrf, samlId);
      assert.equal(started.status, 303, 'sent to the IdP');
      const location = new URL(started.headers.get('location')!);
      assert.ok(atForgedIdp(location) && location.searchParams.has('SAMLRequest'), location.href);
      const authnRequest = inflateRawSync(Buffer.from(location.searchParams.get('SAMLRequest')!, 'base64')).toString();
      assert.match(authnRequest, /ForceAuthn="true"/, 'a fresh sign-in at the IdP');
      const [pending] = (await linkRequests(eppn)).filter((r) => r.consumed_at === null);
      assert.ok(pending, 'a link request under way');
      const posted = await browser.post(acs(), {
        SAMLResponse: forgeResponse(idp, {
          destination: acs(),
          audience: audience(),
          inResponseTo: pending.id,
          nameId,
          ...forged,
        }),
      });
      assert.equal(posted.status, 303, 'the ACS accepts the Response');
      return browser.walk(new URL(posted.headers.get('location')!, acs()).href);
    }

    it('lists the enabled providers of the organization not linked yet, each with a Link button', async () => {
      const { page } = await signedIn('list@example.org');
      assert.match(page.body, /Link a sign-in provider/);
      assert.match(page.body, /Link Old IdP/);
      assert.match(page.body, /Link Uni SAML/);
      assert.match(page.body, /action="\/account\/links\/link"/);
      assert.doesNotMatch(page.body, /Foreign IdP/, "another organization's provider is not offered");
      const disabled = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Switched Off IdP',
        issuer: `http://127.0.0.1:${await pickFreePort()}`,
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.secret,
      });
      await setUpstreamEnabled(server.store, disabled.id, false);
      const again = await signedIn('list@example.org');
      assert.doesNotMatch(again.page.body, /Switched Off IdP/);
    });

    it('links through OpenID Connect, audited with the user as actor, without changing the session; the linked provider then signs in to that account', async () => {
      const { browser, csrf } = await signedIn('ada@example.org');
      const end = await linkOidc(browser, csrf, 'ada-upstream');
      assert.equal(new URL(end.url).pathname, '/account');
      assert.equal(end.status, 200);
      assert.match(end.body, /The sign-in provider is linked to your account/);
      assert.match(end.body, /ada@example\.org/, 'still signed in as Ada');
      assert.match(end.body, /Unlink Old IdP/);
      assert.doesNotMatch(end.body, /Link Old IdP/);
      assert.deepEqual(await links('ada@example.org'), [[oidcId, 'ada-upstream']]);
      const ada = await user('ada@example.org');
      assert.deepEqual(await listUserIds(server.store.db, ada.id), [
        { namespace: 'edugain', identifier: 'ada-upstream' },
      ]);
      const record = (await audit('upstream.link')).at(-1)!;
      assert.equal(record.eppn, 'ada@example.org');
      assert.equal(record.actor_type, 'user');
      assert.equal(record.actor, 'ada@example.org');
      assert.equal(JSON.parse(record.details).how, 'user');

      // Signing in through the provider (link-by none) now lands on Ada's account.
      upstream.next = { sub: 'ada-upstream', claims: {} };
      const other = fetchBrowser();
      const begun = await rp.begin({ upstream: oidcId });
      const done = await declineOffer(other, await other.walk(begun.url, atRp));
      const claims = (await rp.finish(done.url, begun)).claims()!;
      assert.equal(claims.sub, ada.sub);
      assert.deepEqual(claims.amr, ['fed']);
    });

    it('links through SAML; the linked IdP then signs in to that account', async () => {
      const { browser, csrf } = await signedIn('bob@example.org');
      const end = await linkSaml(browser, csrf, 'bob@example.org', 'bob-persistent');
      assert.equal(new URL(end.url).pathname, '/account');
      assert.match(end.body, /The sign-in provider is linked to your account/);
      assert.match(end.body, /Unlink Uni SAML/);
      assert.deepEqual(await links('bob@example.org'), [[samlId, 'bob-persistent']]);
      assert.equal((await audit('upstream.link')).at(-1)!.actor, 'bob@example.org');

      const other = fetchBrowser();
      const begun = await rp.begin({ upstream: samlId });
      const atIdp = await other.walk(begun.url, atForgedIdp);
      assert.ok(atForgedIdp(new URL(atIdp.url)));
      const pending = await server.store.db
        .selectFrom('upstream_requests')
        .selectAll()
        .where('provider_id', '=', samlId)
        .where('purpose', '=', 'sign-in')
        .where('consumed_at', 'is', null)
        .executeTakeFirstOrThrow();
      const posted = await other.post(acs(), {
        SAMLResponse: forgeResponse(idp, {
          destination: acs(),
          audience: audience(),
          inResponseTo: pending.id,
          nameId: 'bob-persistent',
          eppn: 'someone-else@example.org',
        }),
      });
      assert.equal(posted.status, 303);
      const done = await declineOffer(
        other,
        await other.walk(new URL(posted.headers.get('location')!, acs()).href, atRp),
      );
      assert.equal((await rp.finish(done.url, begun)).claims()!.sub, (await user('bob@example.org')).sub);
    });

    it('refuses an identity already linked to another account, audited; nothing changes', async () => {
      const { browser, csrf } = await signedIn('carl@example.org');
      const end = await linkOidc(browser, csrf, 'ada-upstream');
      assert.equal(end.status, 409);
      assert.match(end.body, /Linking Old IdP did not work/);
      assert.match(end.body, /already linked to another account here/);
      assert.match(end.body, /href="\/account"/);
      assert.deepEqual(await links('carl@example.org'), []);
      assert.deepEqual(await links('ada@example.org'), [[oidcId, 'ada-upstream']]);
      const refusal = await lastRefusal();
      assert.equal(refusal.reason, 'identity_linked_elsewhere');
      const record = (await audit('upstream.refused')).at(-1)!;
      assert.equal(record.eppn, 'carl@example.org');
      assert.equal(record.actor, 'carl@example.org');
      // an identity whose secondary id (edugain:<subject>) another account holds is that account's
      await seedUser(server, 1, 'holder@example.org');
      await insertUserId(server.store.db, (await user('holder@example.org')).id, 'edugain', 'held-elsewhere');
      // a new browser: the upstream keeps its own session of the first attempt in the other
      const fresh = await signedIn('carl@example.org');
      const held = await linkOidc(fresh.browser, fresh.csrf, 'held-elsewhere');
      assert.equal(held.status, 409);
      assert.match(held.body, /already linked to another account here/);
      assert.equal((await lastRefusal()).reason, 'identity_linked_elsewhere');
      assert.deepEqual(await links('carl@example.org'), []);
    });

    it('refuses a provider the account is linked with already (at the start, and when linked while the request was under way)', async () => {
      const { browser, csrf } = await signedIn('dora@example.org');
      upstream.next = { sub: 'dora-new', claims: {} };
      const started = await startLink(browser, csrf, oidcId);
      const location = started.headers.get('location')!;
      // an administrator links another identity meanwhile
      await linkAccount(server.store, oidcId, 'dora@example.org', 'dora-admin');
      const end = await browser.walk(location);
      assert.equal(end.status, 409);
      assert.match(end.body, /already linked to another account at Old IdP/);
      assert.equal((await lastRefusal()).reason, 'account_linked_elsewhere');
      assert.deepEqual(await links('dora@example.org'), [[oidcId, 'dora-admin']]);
      const again = await startLink(browser, csrf, oidcId);
      assert.equal(again.status, 409);
      assert.match(await again.text(), /Old IdP is already linked to your account/);
    });

    it('refuses a disabled account, and a provider of another organization or none at all', async () => {
      const { browser, csrf } = await signedIn('eve@example.org');
      upstream.next = { sub: 'eve-upstream', claims: {} };
      const started = await startLink(browser, csrf, oidcId);
      const eve = await user('eve@example.org');
      await server.store.db.updateTable('users').set({ disabled_at: Date.now() }).where('id', '=', eve.id).execute();
      const end = await browser.walk(started.headers.get('location')!);
      assert.equal(end.status, 403);
      assert.match(end.body, /This account is disabled/);
      assert.equal((await lastRefusal()).reason, 'disabled');
      assert.deepEqual(await links('eve@example.org'), []);

      const { browser: b2, csrf: c2 } = await signedIn('fay@example.org');
      for (const id of [foreignId, 'no-such-provider', 'x'.repeat(41)]) {
        const res = await startLink(b2, c2, id);
        assert.ok(res.status === 404 || res.status === 400, `${id}: ${res.status}`);
        assert.match(res.headers.get('content-type') ?? '', /text\/html/);
      }
      assert.deepEqual(await linkRequests('fay@example.org'), [], 'nothing started');
      // the linking rule itself: a provider of another organization is refused and audited
      const foreign = (await findUpstreamProvider(server.store, foreignId))!;
      const fay = await user('fay@example.org');
      assert.deepEqual(await linkOwnIdentity(server.store, foreign, fay, 'fay-foreign'), {
        ok: false,
        reason: 'wrong_organization',
      });
      assert.equal((await lastRefusal()).reason, 'wrong_organization');
      assert.deepEqual(await links('fay@example.org'), []);
    });

    it('refuses a disabled provider at the start', async () => {
      const { browser, csrf } = await signedIn('gus@example.org');
      await setUpstreamEnabled(server.store, oidcId, false);
      try {
        const res = await startLink(browser, csrf, oidcId);
        assert.equal(res.status, 403);
        assert.match(await res.text(), /Signing in through Old IdP is turned off/);
      } finally {
        await setUpstreamEnabled(server.store, oidcId, true);
      }
    });

    it("refuses an identity the upstream did not authenticate anew (an upstream that ignores prompt=login and max_age): someone else's session left in the browser", async () => {
      const { browser, csrf } = await signedIn('quin@example.org');
      // Someone signed in at the upstream in this browser an hour ago; the upstream then answers from that session.
      upstream.ignoreReauthentication = true;
      try {
        upstream.next = { sub: 'mallory-upstream', claims: {}, authTime: Math.floor(Date.now() / 1000) - 3600 };
        // (through an abandoned start here: the upstream's session is what matters)
        const first = await startLink(browser, csrf, oidcId);
        const planted = await browser.walk(
          first.headers.get('location')!,
          (u) => u.pathname === `/upstream/${oidcId}/callback`,
        );
        assert.equal(planted.status, 0, 'signed in at the upstream');
        const end = await linkOidc(browser, csrf, 'quin-upstream');
        assert.equal(end.status, 403);
        assert.match(end.body, /Old IdP did not ask you to sign in again/);
        const refusal = await lastRefusal();
        assert.equal(refusal.reason, 'not_fresh');
        assert.equal(refusal.upstream_subject, 'mallory-upstream');
        assert.equal((await audit('upstream.refused')).at(-1)!.eppn, 'quin@example.org');
        assert.deepEqual(await links('quin@example.org'), []);
        const [request] = (await linkRequests('quin@example.org')).slice(-1);
        assert.notEqual(request!.finished_at, null, 'the request is used up');
      } finally {
        upstream.ignoreReauthentication = false;
      }
      // An upstream that does ask: the person signs in anew there, and that identity is linked.
      let end = await linkOidc(browser, csrf, 'quin-upstream', undefined, { email: 'quin@uni.example' });
      // the upstream ends the other account's session there first (its auto-submitted form)
      const endSession = /action="([^"]*\/session\/end\/confirm)"/.exec(end.body)?.[1];
      if (endSession) {
        const xsrf = /name="xsrf" value="([^"]+)"/.exec(end.body)![1]!;
        const ended = await browser.post(endSession, { xsrf, logout: 'yes' });
        end = await browser.walk(new URL(ended.headers.get('location')!, endSession).href);
      }
      assert.equal(new URL(end.url).pathname, '/account', `${end.status} ${end.body.slice(0, 3000)}`);
      assert.match(end.body, /Linked Old IdP as quin@uni\.example/);
      assert.deepEqual(await links('quin@example.org'), [[oidcId, 'quin-upstream']]);
    });

    it('refuses a SAML assertion whose AuthnInstant is before the link request; one after it (within the clock skew) is linked', async () => {
      const { browser, csrf } = await signedIn('rae@example.org');
      const stale = await linkSaml(browser, csrf, 'rae@example.org', 'rae-old-session', {
        authnInstant: Date.now() - 3600_000,
      });
      assert.equal(stale.status, 403);
      assert.match(stale.body, /Uni SAML did not ask you to sign in again/);
      const refusal = await lastRefusal();
      assert.equal(refusal.reason, 'not_fresh');
      assert.equal(refusal.upstream_subject, 'rae-old-session');
      assert.deepEqual(await links('rae@example.org'), []);

      const end = await linkSaml(browser, csrf, 'rae@example.org', 'rae-persistent', {
        authnInstant: Date.now() - 2 * 60_000,
        eppn: 'rae.upstream@example.org',
      });
      assert.equal(new URL(end.url).pathname, '/account');
      assert.match(end.body, /Linked Uni SAML as rae\.upstream@example\.org/);
      assert.deepEqual(await links('rae@example.org'), [[samlId, 'rae-persistent']]);
      // the notice is the account's own link's, never what the address says
      const other = await signedIn('tom@example.org');
      const rid = new URL(end.url).searchParams.get('request')!;
      const shown = await other.browser.walk(`${server.url}/account?done=linked&request=${rid}`);
      assert.doesNotMatch(shown.body, /Linked Uni SAML as/);
    });

    it('refuses, and audits, a link whose provider was turned off while it was under way', async () => {
      const { browser, csrf } = await signedIn('sam@example.org');
      const stopped = await linkOidc(browser, csrf, 'sam-upstream', atReturn);
      await setUpstreamEnabled(server.store, oidcId, false);
      try {
        const end = await browser.walk(stopped.url);
        assert.equal(end.status, 403);
        assert.match(end.body, /Signing in through Old IdP is turned off/);
        const record = (await audit('upstream.refused')).at(-1)!;
        const details = JSON.parse(record.details as string);
        assert.equal(details.reason, 'provider_disabled');
        assert.equal(details.upstream_subject, 'sam-upstream');
        assert.equal(record.eppn, 'sam@example.org');
        assert.equal(record.actor, 'sam@example.org');
      } finally {
        await setUpstreamEnabled(server.store, oidcId, true);
      }
      assert.deepEqual(await links('sam@example.org'), []);
    });

    it("refuses the form without this session's CSRF token", async () => {
      const { browser, csrf } = await signedIn('hal@example.org');
      const { csrf: othersToken } = await signedIn('ida@example.org');
      const forms: Record<string, string>[] = [
        { upstream: oidcId },
        { _csrf: othersToken, upstream: oidcId },
        { _csrf: 'x', upstream: oidcId },
      ];
      for (const form of forms) {
        const res = await browser.post(`${server.url}/account/links/link`, form);
        assert.equal(res.status, 403);
        assert.match(await res.text(), /This form has expired/);
      }
      assert.deepEqual(await linkRequests('hal@example.org'), [], 'nothing started');
      // with the token it starts (the defence, not something else, refused)
      assert.equal((await startLink(browser, csrf, oidcId)).status, 303);
      // not signed in: back to the account page's sign-in
      const anonymous = await fetchBrowser().post(`${server.url}/account/links/link`, { upstream: oidcId });
      assert.equal(anonymous.status, 303);
      assert.equal(anonymous.headers.get('location'), '/account');
    });

    it('asks to sign in again when the sign-in is older than 10 minutes', async () => {
      const { browser, csrf } = await signedIn('ivy@example.org');
      offset = RECENT_SIGN_IN_MS + 60_000;
      try {
        const res = await startLink(browser, csrf, oidcId);
        assert.equal(res.status, 401);
        const body = await res.text();
        assert.match(body, /To link a sign-in provider, sign in again/);
        assert.match(body, /action="\/account\/login"/);
        assert.deepEqual(await linkRequests('ivy@example.org'), [], 'nothing started');
        // signing in again makes it recent
        const login = await browser.post(`${server.url}/account/login`, {
          _csrf: csrfOf(body),
          username: 'ivy@example.org',
          password: PASSWORD,
        });
        assert.equal(login.status, 303);
        const fresh = csrfOf((await browser.walk(`${server.url}/account`)).body);
        assert.equal((await startLink(browser, fresh, oidcId)).status, 303);
      } finally {
        offset = 0;
      }
    });

    it("refuses a link request finished in another browser: the victim's request in the attacker's browser", async () => {
      const { browser: victim, csrf } = await signedIn('jan@example.org');
      const started = await startLink(victim, csrf, oidcId);
      // The authorization URL the victim's browser was sent to, opened in the attacker's browser,
      // where the attacker signs in at the upstream as themselves.
      upstream.next = { sub: 'attacker-upstream', claims: {} };
      const attacker = fetchBrowser();
      const end = await attacker.walk(started.headers.get('location')!);
      assert.equal(end.status, 400);
      assert.match(end.body, /expired or was already used/);
      assert.deepEqual(await links('jan@example.org'), []);
    });

    it("refuses a link request finished in another session: the attacker's own link handed to a signed-in victim", async () => {
      // The attacker links their own account, stops short of the return to the account page, and
      // has the victim's browser (signed in as the victim) open it.
      const { browser: attacker, csrf } = await signedIn('kim@example.org');
      const stopped = await linkOidc(attacker, csrf, 'kim-upstream', atReturn);
      const returnUrl = stopped.url;
      const { browser: victim } = await signedIn('lou@example.org');
      const end = await victim.walk(returnUrl);
      assert.equal(end.status, 403);
      assert.match(end.body, /no longer signed in to the account that asked for it/);
      assert.deepEqual(await links('lou@example.org'), [], "the attacker's identity is not in the victim's account");
      assert.match(end.body, /Linking Old IdP did not work/);
      assert.deepEqual(await links('kim@example.org'), []);
      const record = (await audit('upstream.refused')).at(-1)!;
      assert.equal(JSON.parse(record.details).reason, 'session');
      assert.equal(record.eppn, 'kim@example.org');
      assert.equal(record.actor, 'lou@example.org');
      // and the request is over: not even its own browser finishes it now
      const over = await attacker.walk(returnUrl);
      assert.equal(over.status, 400);
      assert.match(over.body, /has expired or was already used/);
      assert.deepEqual(await links('kim@example.org'), []);
    });

    it('refuses a link whose session is gone or is now another user’s by the time the answer arrives', async () => {
      // signed out: the return without the session cookie
      const { browser, csrf } = await signedIn('max@example.org');
      const stopped = await linkOidc(browser, csrf, 'max-upstream', atReturn);
      const gone = await fetch(stopped.url, { redirect: 'manual' });
      assert.equal(gone.status, 403);
      assert.match(await gone.text(), /no longer signed in to the account that asked for it/);
      // an id that names no request
      const unknown = await browser.walk(`${server.url}/account/links/return/u${'A'.repeat(32)}`);
      assert.equal(unknown.status, 400);
      assert.equal((await browser.walk(`${server.url}/account/links/return/nonsense`)).status, 400);
      assert.deepEqual(await links('max@example.org'), []);

      // another user signs in in the same browser before the answer comes back (SAML this time)
      const { browser: shared, csrf: c2 } = await signedIn('ned@example.org');
      const started = await startLink(shared, c2, samlId);
      assert.equal(started.status, 303);
      const [pending] = await linkRequests('ned@example.org');
      await seedUser(server, 1, 'oli@example.org', { password: PASSWORD });
      await signInThroughRp(shared, 'oli@example.org');
      const posted = await shared.post(acs(), {
        SAMLResponse: forgeResponse(idp, {
          destination: acs(),
          audience: audience(),
          inResponseTo: pending!.id,
          nameId: 'ned-persistent',
        }),
      });
      assert.equal(posted.status, 303);
      const end = await shared.walk(new URL(posted.headers.get('location')!, acs()).href);
      assert.equal(end.status, 403);
      assert.match(end.body, /no longer signed in to the account that asked for it/);
      assert.deepEqual(await links('ned@example.org'), []);
      assert.deepEqual(await links('oli@example.org'), []);
      const page = await shared.walk(`${server.url}/account`);
      assert.match(page.body, /oli@example\.org/, 'the session is still the other user’s');
    });

    it('a link request never signs in through an interaction', async () => {
      const { browser, csrf } = await signedIn('pia@example.org');
      const stopped = await linkOidc(browser, csrf, 'pia-upstream', atReturn);
      const rid = new URL(stopped.url).pathname.split('/').at(-1)!;
      const begun = await rp.begin({ login_hint: 'pia@example.org', prompt: 'login' });
      const page = await browser.walk(begun.url, (u) => u.pathname.startsWith('/interaction/') && !u.search);
      const uid = new URL(page.url).pathname.split('/')[2]!;
      const res = await browser.walk(`${server.url}/interaction/${uid}/upstream-return/${rid}`, atRp);
      assert.equal(res.status, 400);
      // the link itself still finishes on the account page, once
      const end = await browser.walk(stopped.url);
      assert.match(end.body, /The sign-in provider is linked/);
      assert.deepEqual(await links('pia@example.org'), [[oidcId, 'pia-upstream']]);
      const replayed = await browser.walk(stopped.url);
      assert.equal(replayed.status, 400);
      assert.match(replayed.body, /Linking Old IdP did not work/);
      assert.match(replayed.body, /has expired or was already used/);
    });
  });
}
