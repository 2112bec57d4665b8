// Signing in through an upstream OpenID Connect provider (a real oidc-provider on a loopback port),
// through this service, by an openid-client relying party, over plain HTTP: the linking rules and
// their refusals with the audit records they write, replay and mix-up, an upstream that refuses,
// one that cannot be reached and one that does not answer; on SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, pickFreePort, seedOrg, seedUser } from '../helpers.ts';
import { startRelyingParty, startServer, type E2EServer, type RelyingParty } from '../e2e/helpers.ts';
import {
  addUpstreamProvider,
  setUpstreamEnabled,
  updateUpstreamProvider,
  removeUpstreamProvider,
  type UpstreamInput,
} from '../../src/upstream/providers.ts';
import { consumeUpstreamRequest, startUpstreamRequest } from '../../src/upstream/requests.ts';
import { updateUpstreamProvider as setProviderRow } from '../../src/store/upstream.ts';
import { linksOfUser } from '../../src/upstream/linking.ts';
import { findUserByEppn, listUserIds } from '../../src/store/directory.ts';
import { setPassword } from '../../src/directory/index.ts';
import { authTimeOf, upstreamAcr } from '../../src/web/upstream-signin.ts';
import { startTestUpstream, fetchBrowser, type TestUpstream } from './oidc-upstream.ts';

const CLIENT = { clientId: 'idp-upstream-test', secret: 'upstream-client-secret-0123456789' };

for (const dialect of dialects()) {
  describe(`signing in through an upstream OpenID Connect provider (${dialect})`, () => {
    let server: E2EServer;
    let rp: RelyingParty;
    let upstream: TestUpstream;
    let providerId: string;

    before(async () => {
      server = await startServer(dialect, { UPSTREAM_TIMEOUT_MS: '1500' });
      await seedOrg(server);
      const port = await pickFreePort();
      const added = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Old University IdP',
        issuer: `http://127.0.0.1:${port}`,
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.secret,
        linkBy: 'eppn',
        scopes: 'openid email profile eppn',
      });
      providerId = added.id;
      // The namespace is set in the row: the registry gives edugain to SAML providers only, and a
      // social namespace only to its own issuer, which this loopback upstream is not. What is tested
      // here is that an OpenID Connect sign-in records the identity in the provider's namespace.
      await setProviderRow(server.store.db, providerId, { namespace: 'edugain' });
      upstream = await startTestUpstream(port, {
        ...CLIENT,
        redirectUri: `${server.url}/upstream/${providerId}/callback`,
      });
      rp = await startRelyingParty(server, { firstParty: true });
    });
    after(async () => {
      for (const other of others) await other.close();
      await rp?.close();
      await upstream?.close();
      await server?.close();
    });

    const atRp = (u: URL) => u.href.startsWith(rp.redirectUri);
    const others: TestUpstream[] = [];

    /** Another provider of the organization, at an upstream of its own. */
    async function freshProvider(input: Partial<UpstreamInput> = {}) {
      const port = await pickFreePort();
      const added = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Other IdP',
        issuer: `http://127.0.0.1:${port}`,
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.secret,
        scopes: 'openid email profile eppn',
        ...input,
      });
      const other = await startTestUpstream(port, {
        ...CLIENT,
        redirectUri: `${server.url}/upstream/${added.id}/callback`,
      });
      others.push(other);
      return { id: added.id, upstream: other };
    }

    async function audit(action: string) {
      return server.store.db.selectFrom('audit_events').selectAll().where('kind', '=', action).orderBy('id').execute();
    }

    /** Through the relying party's authorization request with upstream=<id>, to wherever it ends. */
    async function signInThroughUpstream(params: Record<string, string> = {}) {
      const browser = fetchBrowser();
      const begun = await rp.begin({ upstream: providerId, ...params });
      const end = await browser.walk(begun.url, atRp);
      return { browser, begun, end };
    }

    /** "Not now" on the passkey offer page the walk ended on, then on to the relying party. */
    async function declineOffer(browser: ReturnType<typeof fetchBrowser>, end: { url: string; body: string }) {
      const action = /action="([^"]*\/offer\/later)"/.exec(end.body)?.[1];
      const csrf = /name="_csrf" value="([^"]+)"/.exec(end.body)?.[1];
      assert.ok(action && csrf, 'the passkey offer page');
      const res = await browser.post(new URL(action, end.url).href, { _csrf: csrf });
      return browser.walk(new URL(res.headers.get('location')!, end.url).href, atRp);
    }

    it('links by eppn on the first sign-in; the relying party gets amr fed and userid_sec', async () => {
      await seedUser(server, 1, 'ada@example.org', { name: 'Ada' });
      upstream.next = { sub: 'old-ada', claims: { eduperson_principal_name: 'ada@example.org', name: 'Ada L' } };
      const { browser, begun, end } = await signInThroughUpstream();
      assert.equal(end.status, 200, end.body.slice(0, 500));
      assert.match(end.body, /offer\/later/, 'a user without a passkey is offered one');
      const done = await declineOffer(browser, end);
      const tokens = await rp.finish(done.url, begun);
      const claims = tokens.claims()!;
      assert.deepEqual(claims.amr, ['fed']);
      assert.equal(claims.acr, 'https://refeds.org/profile/sfa');
      const user = (await findUserByEppn(server.store.db, 'ada@example.org'))!;
      assert.equal(claims.sub, user.sub);
      assert.deepEqual(
        (await linksOfUser(server.store, user.id)).map((l) => [l.upstream, l.subject]),
        [[providerId, 'old-ada']],
      );
      assert.deepEqual(await listUserIds(server.store.db, user.id), [{ namespace: 'edugain', identifier: 'old-ada' }]);
      const linked = await audit('upstream.link');
      assert.equal(linked.at(-1)?.eppn, 'ada@example.org');
    });

    it('signs a linked identity in by its link, whatever its eppn says now; the state is single use', async () => {
      upstream.next = { sub: 'old-ada', claims: { eduperson_principal_name: 'someone-else@example.org' } };
      const browser = fetchBrowser();
      const begun = await rp.begin({ upstream: providerId });
      // Stop at the callback to replay it after it was used.
      const atCallback = (u: URL) => u.pathname === `/upstream/${providerId}/callback`;
      const first = await browser.walk(begun.url, atCallback);
      const callback = first.url;
      const end = await browser.walk(callback, atRp);
      assert.equal(end.status, 200);
      // the link, not the (changed) eppn, decides: still Ada
      const done = await declineOffer(browser, end);
      const claims = (await rp.finish(done.url, begun)).claims()!;
      assert.equal(claims.sub, (await findUserByEppn(server.store.db, 'ada@example.org'))!.sub);
      const replay = await browser.walk(callback);
      assert.equal(replay.status, 400);
      assert.match(replay.body, /expired or was already used/);
      assert.match(replay.body, /Reference for the helpdesk/);
    });

    it('refuses an identity that matches no account, on a clear page with an audit record', async () => {
      upstream.next = { sub: 'stranger', claims: { eduperson_principal_name: 'nobody@example.org' } };
      const { end } = await signInThroughUpstream();
      assert.equal(end.status, 403);
      assert.match(end.body, /not linked to an account here/);
      const refused = await audit('upstream.refused');
      assert.equal(JSON.parse(refused.at(-1)!.details as string).reason, 'no_account');
    });

    it('never moves a link: an account linked to another identity of the provider is refused', async () => {
      upstream.next = { sub: 'old-ada-2', claims: { eduperson_principal_name: 'ada@example.org' } };
      const { end } = await signInThroughUpstream();
      assert.equal(end.status, 403);
      assert.match(end.body, /already linked to another account at/);
      const refused = await audit('upstream.refused');
      const details = JSON.parse(refused.at(-1)!.details as string);
      assert.equal(details.reason, 'account_linked_elsewhere');
      assert.equal(refused.at(-1)!.eppn, 'ada@example.org');
    });

    it('ends on the error page when the user refuses at the upstream', async () => {
      upstream.next = undefined;
      const { end } = await signInThroughUpstream();
      assert.equal(end.status, 400);
      assert.match(end.body, /cancelled or refused/);
      assert.match(end.body, /Reference for the helpdesk/);
    });

    it('refuses a disabled provider at once, and a removed one removes its links', async () => {
      await setUpstreamEnabled(server.store, providerId, false);
      upstream.next = { sub: 'old-ada', claims: {} };
      const { end } = await signInThroughUpstream();
      // upstream=<id> of a disabled provider: the ordinary sign-in page, no link to it
      assert.equal(end.status, 200);
      assert.doesNotMatch(end.body, /Old University IdP/);
      await setUpstreamEnabled(server.store, providerId, true);
    });

    it('says so within the timeout when the upstream does not answer', async () => {
      // a provider whose discovery was never read, at an upstream that hangs
      const port = await pickFreePort();
      const hung = await startTestUpstream(port, { ...CLIENT, redirectUri: `${server.url}/upstream/x/callback` });
      hung.hang = true;
      const added = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Slow IdP',
        issuer: hung.issuer,
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.secret,
      });
      try {
        const browser = fetchBrowser();
        const begun = await rp.begin({ upstream: added.id });
        const started = Date.now();
        const end = await browser.walk(begun.url, atRp);
        assert.ok(Date.now() - started < 5000, 'answered within the timeout');
        assert.equal(end.status, 504);
        assert.match(end.body, /did not answer in time/);
      } finally {
        await hung.close();
        await removeUpstreamProvider(server.store, added.id);
      }
    });

    it('says so when the upstream cannot be reached', async () => {
      const port = await pickFreePort();
      const added = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'oidc',
        name: 'Gone IdP',
        issuer: `http://127.0.0.1:${port}`,
        clientId: CLIENT.clientId,
        clientSecret: CLIENT.secret,
      });
      const browser = fetchBrowser();
      const end = await browser.walk((await rp.begin({ upstream: added.id })).url, atRp);
      assert.equal(end.status, 502);
      assert.match(end.body, /could not be reached/);
      await removeUpstreamProvider(server.store, added.id);
    });

    it('links by a verified e-mail address only, within the organization', async () => {
      const { id, upstream: other } = await freshProvider({ linkBy: 'email' });
      await seedUser(server, 1, 'grace@example.org', { email: 'grace@mail.example' });
      other.next = { sub: 'g-unverified', claims: { email: 'grace@mail.example', email_verified: false } };
      const browser = fetchBrowser();
      const refused = await browser.walk((await rp.begin({ upstream: id })).url, atRp);
      assert.equal(refused.status, 403, 'an unverified address links nothing');
      assert.equal(JSON.parse((await audit('upstream.refused')).at(-1)!.details as string).reason, 'no_account');
      other.next = { sub: 'g-verified', claims: { email: 'Grace@mail.example', email_verified: true } };
      const end = await fetchBrowser().walk((await rp.begin({ upstream: id })).url, atRp);
      assert.equal(end.status, 200);
      assert.match(end.body, /offer\/later/);
      const grace = (await findUserByEppn(server.store.db, 'grace@example.org'))!;
      assert.deepEqual(
        (await linksOfUser(server.store, grace.id)).map((l) => l.subject),
        ['g-verified'],
      );
    });

    it('creates an account just in time with --create-users, from the mapped attributes', async () => {
      const { id, upstream: other } = await freshProvider({ createUsers: true, map: ['eppn=preferred_username'] });
      other.next = {
        sub: 'new-person',
        claims: { email: 'newbie@mail.example', email_verified: true, name: 'New Person' },
      };
      const end = await fetchBrowser().walk((await rp.begin({ upstream: id })).url, atRp);
      assert.equal(end.status, 200, end.body.slice(0, 300));
      assert.equal(
        await findUserByEppn(server.store.db, 'newbie@example.org'),
        undefined,
        'not from an outside address',
      );
      const user = (await server.store.db
        .selectFrom('users')
        .selectAll()
        .where('email', '=', 'newbie@mail.example')
        .executeTakeFirst())!;
      assert.match(user.eppn, /^u[0-9a-f]{16}@example\.org$/);
      assert.equal(user.name, 'New Person');
      assert.equal(user.email, 'newbie@mail.example');
      const link = (await audit('upstream.link')).at(-1)!;
      assert.equal(JSON.parse(link.details as string).how, 'created');
    });

    it('refuses a disabled account, with an audit record', async () => {
      const { id, upstream: other } = await freshProvider({ linkBy: 'eppn' });
      const user = await seedUser(server, 1, 'off@example.org');
      await server.store.db.updateTable('users').set({ disabled_at: Date.now() }).where('id', '=', user.id).execute();
      other.next = { sub: 'off', claims: { eduperson_principal_name: 'off@example.org' } };
      const end = await fetchBrowser().walk((await rp.begin({ upstream: id })).url, atRp);
      assert.equal(end.status, 403);
      assert.match(end.body, /This account is disabled/);
      assert.equal(JSON.parse((await audit('upstream.refused')).at(-1)!.details as string).reason, 'disabled');
    });

    it('refuses an answer meant for another provider (mix-up), an ID token for another nonce, a bad signature', async () => {
      const a = await freshProvider();
      const b = await freshProvider();
      a.upstream.next = { sub: 'mixed', claims: {} };
      const browser = fetchBrowser();
      const atCallback = (u: URL) => u.pathname.endsWith('/callback') && u.pathname.startsWith('/upstream/');
      const stopped = await browser.walk((await rp.begin({ upstream: a.id })).url, atCallback);
      const mixed = new URL(stopped.url);
      mixed.pathname = `/upstream/${b.id}/callback`;
      const mix = await browser.walk(mixed.href);
      assert.equal(mix.status, 400, 'the state is not one of this provider');
      assert.match(mix.body, /expired or was already used/);

      const nonce = await freshProvider();
      nonce.upstream.wrongNonce = true;
      nonce.upstream.next = { sub: 'n', claims: {} };
      const wrong = await fetchBrowser().walk((await rp.begin({ upstream: nonce.id })).url, atRp);
      assert.equal(wrong.status, 400);
      assert.match(wrong.body, /could not be verified/);

      const keys = await freshProvider();
      keys.upstream.badKeys = true;
      keys.upstream.next = { sub: 'k', claims: {} };
      const bad = await fetchBrowser().walk((await rp.begin({ upstream: keys.id })).url, atRp);
      assert.equal(bad.status, 400);
      assert.match(bad.body, /could not be verified/);
    });

    it('refuses an answer delivered by another browser than the one that started (a sign-in link passed on)', async () => {
      await seedUser(server, 1, 'victim@example.org', { name: 'Victim' });
      const { id, upstream: theirs } = await freshProvider({ linkBy: 'eppn' });
      // the attacker starts a sign-in and keeps the redirect to the upstream instead of following it
      const attacker = fetchBrowser();
      const seen: URL[] = [];
      const atUpstream = (u: URL) => (seen.push(u), u.searchParams.get('client_id') === CLIENT.clientId);
      const begun = await rp.begin({ upstream: id });
      const link = await attacker.walk(begun.url, atUpstream);
      const state = new URL(link.url).searchParams.get('state')!;
      const uid = seen.map((u) => /^\/interaction\/([^/]+)/.exec(u.pathname)?.[1]).find(Boolean)!;
      assert.ok(state && uid);
      // the victim, signed in at the upstream, follows it: the callback refuses it in the victim's browser
      theirs.next = { sub: 'victim-1', claims: { eduperson_principal_name: 'victim@example.org' } };
      const victim = await fetchBrowser().walk(link.url, atRp);
      assert.equal(victim.status, 400);
      assert.match(new URL(victim.url).pathname, /^\/upstream\/[^/]+\/callback$/);
      // and the attacker's return finds nothing to sign in with
      const back = await attacker.walk(`${server.url}/interaction/${uid}/upstream-return/${state}`, atRp);
      assert.equal(back.status, 400);
      assert.doesNotMatch(back.body, /offer\/later/);
      const victimUser = (await findUserByEppn(server.store.db, 'victim@example.org'))!;
      assert.deepEqual(await linksOfUser(server.store, victimUser.id), []);
      // the request was not consumed: the browser that started it can still complete it
      theirs.next = { sub: 'victim-1', claims: { eduperson_principal_name: 'victim@example.org' } };
      const own = await attacker.walk(link.url, atRp);
      assert.equal(own.status, 200, own.body.slice(0, 300));
      assert.match(own.body, /offer\/later/);
    });

    it('asks the upstream for a fresh sign-in when the relying party asks for one (prompt=login, max_age)', async () => {
      const toUpstream = async (params: Record<string, string>) => {
        const atUpstream = (u: URL) => u.searchParams.get('client_id') === CLIENT.clientId;
        const walked = await fetchBrowser().walk((await rp.begin({ upstream: providerId, ...params })).url, atUpstream);
        return new URL(walked.url).searchParams;
      };
      const plain = await toUpstream({});
      assert.equal(plain.get('prompt'), null);
      assert.equal(plain.get('max_age'), null);
      const login = await toUpstream({ prompt: 'login' });
      assert.equal(login.get('prompt'), 'login');
      assert.equal(login.get('max_age'), null);
      const aged = await toUpstream({ max_age: '300' });
      assert.equal(aged.get('max_age'), '300');
      assert.equal(aged.get('prompt'), null);
      // max_age=0 is read as prompt=login
      assert.equal((await toUpstream({ max_age: '0' })).get('prompt'), 'login');
    });

    it("records the upstream's auth time, never later than now", () => {
      const now = 1_800_000_000_000;
      const base = { providerId: 'p', subject: 's', attributes: {}, amr: [] };
      assert.equal(authTimeOf({ ...base, authTime: now - 600_000 }, now), (now - 600_000) / 1000);
      assert.equal(authTimeOf({ ...base, authTime: now + 600_000 }, now), now / 1000);
      assert.equal(authTimeOf(base, now), now / 1000);
    });

    it('a request under way works once, for its own provider, before it expires', async () => {
      const { id } = await freshProvider();
      const { id: otherId } = await freshProvider();
      const now = Date.now();
      const b = 'browser-binding';
      const started = await startUpstreamRequest(server.store, {
        providerId: id,
        purpose: { kind: 'sign-in', interactionUid: 'uid-1' },
        browserBinding: b,
        now,
      });
      assert.equal(await consumeUpstreamRequest(server.store, started.id, otherId, b, now), undefined);
      assert.equal(await consumeUpstreamRequest(server.store, started.id, id, b, now + 11 * 60_000), undefined);
      // another browser (no binding, another one): nothing, and the request is left for its own
      assert.equal(await consumeUpstreamRequest(server.store, started.id, id, undefined, now), undefined);
      assert.equal(await consumeUpstreamRequest(server.store, started.id, id, 'other-binding', now), undefined);
      assert.equal((await consumeUpstreamRequest(server.store, started.id, id, b, now))?.id, started.id);
      assert.equal(await consumeUpstreamRequest(server.store, started.id, id, b, now), undefined);
    });

    it("records the upstream's amr after fed as far as it is trusted (--trust-amr), and its acr, never one of the passkey classes", async () => {
      const { id, upstream: other } = await freshProvider({ linkBy: 'eppn' });
      await seedUser(server, 1, 'amr@example.org');
      const signIn = async () => {
        other.next = {
          sub: 'amr-1',
          claims: { eduperson_principal_name: 'amr@example.org' },
          amr: ['pwd', 'mfa', 'made-up'],
          acr: 'phr',
        };
        const browser = fetchBrowser();
        const begun = await rp.begin({ upstream: id });
        const done = await declineOffer(browser, await browser.walk(begun.url, atRp));
        return (await rp.finish(done.url, begun)).claims()!;
      };
      // by default only the upstream's password is repeated: its word for a second factor is not taken
      assert.deepEqual((await signIn()).amr, ['fed', 'pwd']);
      await updateUpstreamProvider(server.store, server.keys, id, { trustAmr: 'pwd,mfa' });
      const claims = await signIn();
      assert.deepEqual(claims.amr, ['fed', 'pwd', 'mfa']);
      await assert.rejects(
        updateUpstreamProvider(server.store, server.keys, id, { trustAmr: 'mfa,passkey' }),
        /RFC 8176/,
      );
      await updateUpstreamProvider(server.store, server.keys, id, { trustAmr: 'none' });
      assert.deepEqual((await signIn()).amr, ['fed']);
      assert.equal(claims.acr, 'https://refeds.org/profile/sfa', 'an upstream never reaches phr here');
      // as the upstream said it otherwise
      assert.equal(upstreamAcr('urn:mace:incommon:iap:silver'), 'urn:mace:incommon:iap:silver');
      assert.equal(upstreamAcr('https://refeds.org/profile/mfa'), 'https://refeds.org/profile/sfa');
      assert.equal(upstreamAcr(undefined), 'https://refeds.org/profile/sfa');
    });

    it('a request for a passkey class gets no upstream: the page offers the passkey only', async () => {
      const browser = fetchBrowser();
      const end = await browser.walk(
        (await rp.begin({ upstream: providerId, acr_values: 'phr', login_hint: 'ada@example.org' })).url,
        atRp,
      );
      assert.equal(end.status, 200);
      assert.match(end.body, /passkey-form/);
      assert.doesNotMatch(end.body, /Old University IdP/);
      const uid = /\/interaction\/([A-Za-z0-9_-]+)/.exec(end.url)![1]!;
      const started = await browser.walk(`${server.url}/interaction/${uid}/upstream/${providerId}`, atRp);
      assert.equal(started.status, 403);
      assert.match(started.body, /not enough here/);
    });

    it('finishes only in the browser that started: a callback URL handed to another browser goes nowhere', async () => {
      upstream.next = { sub: 'old-ada', claims: {} };
      const atCallback = (u: URL) => u.pathname === `/upstream/${providerId}/callback`;
      const stopped = await fetchBrowser().walk((await rp.begin({ upstream: providerId })).url, atCallback);
      const victim = fetchBrowser();
      const end = await victim.walk(stopped.url, atRp);
      assert.equal(end.status, 400);
      assert.match(end.body, /expired or was already used/);
      assert.ok(!atRp(new URL(end.url)));
    });

    it("shows the organization's providers on the page a login_hint in its realm leads to", async () => {
      const end = await fetchBrowser().walk((await rp.begin({ login_hint: 'someone@example.org' })).url, atRp);
      assert.equal(end.status, 200);
      assert.match(
        end.body,
        new RegExp(`href="/interaction/[A-Za-z0-9_-]+/upstream/${providerId}">Old University IdP</a>`),
      );
      const elsewhere = await fetchBrowser().walk((await rp.begin({ login_hint: 'someone@other.example' })).url, atRp);
      assert.doesNotMatch(elsewhere.body, /Old University IdP/);
    });

    it('the account page lists the link and unlinks it only while another way to sign in remains', async () => {
      const { id, upstream: other } = await freshProvider({ linkBy: 'eppn', name: 'Linked IdP' });
      await seedUser(server, 1, 'lin@example.org');
      other.next = { sub: 'lin-1', claims: { eduperson_principal_name: 'lin@example.org' } };
      const browser = fetchBrowser();
      const begun = await rp.begin({ upstream: id });
      const end = await browser.walk(begun.url, atRp);
      await declineOffer(browser, end);
      const page = await browser.walk(`${server.url}/account`);
      assert.equal(page.status, 200);
      assert.match(page.body, /Linked sign-in providers/);
      assert.match(page.body, /Unlink Linked IdP/);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
      const only = await browser.post(`${server.url}/account/links/unlink`, { _csrf: csrf, upstream: id });
      assert.equal(only.status, 409, 'the only way to sign in stays');
      assert.match(await only.text(), /only way to sign in/);
      await setPassword(server.store, 'lin@example.org', 'a long enough password 123');
      const done = await browser.post(`${server.url}/account/links/unlink`, { _csrf: csrf, upstream: id });
      assert.equal(done.status, 303);
      const lin = (await findUserByEppn(server.store.db, 'lin@example.org'))!;
      assert.deepEqual(await linksOfUser(server.store, lin.id), []);
      assert.equal((await audit('upstream.unlink')).at(-1)?.eppn, 'lin@example.org');
    });

    it('removing the provider removes its links, not the accounts', async () => {
      const user = (await findUserByEppn(server.store.db, 'ada@example.org'))!;
      const removed = await removeUpstreamProvider(server.store, providerId);
      assert.equal(removed.links, 1);
      assert.deepEqual(await linksOfUser(server.store, user.id), []);
      assert.ok(await findUserByEppn(server.store.db, 'ada@example.org'));
    });
  });
}
