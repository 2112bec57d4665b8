// Sign-in pages through Fastify inject(): headers, cookies, CSRF, consent, locales, logout and
// error pages, static assets. The browser journeys live in test/e2e/.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Fastify, { type LightMyRequestResponse } from 'fastify';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, PUBLIC_URL, type TestContext } from '../helpers.ts';
import { findConsent, saveConsent } from '../../src/store/consents.ts';
import { pickLocale, translator } from '../../src/ui/i18n.ts';
import { explainError } from '../../src/web/provider-views.ts';
import { html, raw } from '../../src/ui/html.ts';
import { createBranding, webPlugin } from '../../src/web/index.ts';
import { AppError, tooManyRequests } from '../../src/errors.ts';

const PASSWORD = 'correct horse battery staple';
const REDIRECT = 'https://rp.example.test/callback';

/** A minimal cookie jar: every cookie the server set, sent back on every request. */
function browser(ctx: TestContext) {
  const jar = new Map<string, string>();
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) {
      if (c.expires && new Date(c.expires).getTime() < Date.now()) jar.delete(c.name);
      else jar.set(c.name, c.value);
    }
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    jar,
    async get(url: string, headers: Record<string, string> = {}) {
      const res = await ctx.app.inject({
        method: 'GET',
        url: url.replace(PUBLIC_URL, ''),
        headers: { cookie: cookie(), ...headers },
      });
      remember(res);
      return res;
    },
    async post(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: url.replace(PUBLIC_URL, ''),
        headers: { cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded', ...headers },
        payload: new URLSearchParams(form).toString(),
      });
      remember(res);
      return res;
    },
  };
}

function authorizeUrl(clientId: string, extra: Record<string, string> = {}) {
  return `/oauth/authorization?${new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', ...extra })}`;
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

for (const dialect of dialects()) {
  describe(`sign-in pages (${dialect})`, () => {
    let ctx: TestContext;
    let rp: { clientId: string };
    let firstParty: { clientId: string };

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      rp = await seedClient(ctx, {
        name: 'Course <b>Portal</b>',
        redirectUris: [REDIRECT],
        groups: ['email', 'userinfo-name'],
      });
      firstParty = await seedClient(ctx, { name: 'Own portal', redirectUris: [REDIRECT], firstParty: true });
    });
    after(() => ctx.close());

    async function openSignIn(b: ReturnType<typeof browser>, clientId: string, extra: Record<string, string> = {}) {
      const start = await b.get(authorizeUrl(clientId, extra));
      assert.equal(start.statusCode, 303);
      const location = start.headers.location as string;
      const uid = /\/interaction\/([^/?]+)$/.exec(location)![1]!;
      const page = await b.get(location, extra.headers ? JSON.parse(extra.headers) : {});
      return { uid, page, csrf: csrfOf(page.body) };
    }

    /** Follows redirects until the relying party's redirect URI or an HTML page. */
    async function follow(b: ReturnType<typeof browser>, res: LightMyRequestResponse) {
      while (res.statusCode === 303 || res.statusCode === 302) {
        const location = res.headers.location as string;
        if (location.startsWith(REDIRECT)) return { done: new URL(location), res };
        res = await b.get(location);
      }
      return { done: undefined, res };
    }

    it('the sign-in page has a strict CSP, no inline script or style, and the right autocomplete fields', async () => {
      const { page } = await openSignIn(browser(ctx), rp.clientId);
      assert.equal(page.statusCode, 200);
      assert.match(page.headers['content-type'] as string, /^text\/html/);
      const csp = page.headers['content-security-policy'] as string;
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /script-src 'self'(;|$)/);
      assert.match(csp, /style-src 'self'(;|$)/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.match(csp, /form-action 'self' https:\/\/rp\.example\.test(;|$)/);
      assert.doesNotMatch(csp, /unsafe/);
      assert.equal(page.headers['x-frame-options'], 'DENY');
      assert.doesNotMatch(page.body, /<script(?![^>]*\bsrc=)[^>]*>/);
      assert.doesNotMatch(page.body, /\sstyle=/);
      assert.doesNotMatch(page.body, /\son[a-z]+=/);
      assert.match(page.body, /<html lang="en">/);
      assert.match(page.body, /<meta name="viewport"/);
      assert.match(page.body, /autocomplete="username webauthn"/);
      assert.match(page.body, /autocomplete="current-password"/);
      assert.match(page.body, /Sign in with a passkey/);
      assert.match(page.body, /to continue to Course &lt;b&gt;Portal&lt;\/b&gt;/, 'client name escaped');
    });

    it('takes an interaction cookie only with its own signature: a changed or missing .sig is no interaction', async () => {
      const b = browser(ctx);
      const start = await b.get(authorizeUrl(rp.clientId));
      const location = start.headers.location as string;
      const signature = b.jar.get('__Secure-interaction.sig')!;
      assert.ok(signature, 'the interaction cookie is signed');
      const flipped = `${signature.slice(0, -1)}${signature.endsWith('A') ? 'B' : 'A'}`;
      for (const sig of [flipped, undefined]) {
        if (sig === undefined) b.jar.delete('__Secure-interaction.sig');
        else b.jar.set('__Secure-interaction.sig', sig);
        const page = await b.get(location);
        assert.doesNotMatch(page.body, /autocomplete="current-password"/, `no sign-in form with .sig ${sig}`);
        assert.notEqual(page.statusCode, 200);
      }
      // the cookie as it was signed opens the sign-in page
      b.jar.set('__Secure-interaction.sig', signature);
      const page = await b.get(location);
      assert.equal(page.statusCode, 200);
      assert.match(page.body, /autocomplete="current-password"/);
    });

    it('sets the browser cookie HttpOnly, Secure, SameSite=Lax with the __Host- prefix on https', async () => {
      const { page } = await openSignIn(browser(ctx), rp.clientId);
      const c = page.cookies.find((x) => x.name === '__Host-idp_browser')!;
      assert.ok(c, 'browser-id cookie set');
      assert.equal(c.httpOnly, true);
      assert.equal(c.secure, true);
      assert.equal(c.sameSite, 'Lax');
      assert.equal(c.path, '/');
    });

    it('on https the interaction cookies carry the __Secure- prefix and stay path-scoped', async () => {
      const b = browser(ctx);
      const start = await b.get(authorizeUrl(rp.clientId));
      const uid = /\/interaction\/([^/?]+)$/.exec(start.headers.location as string)![1]!;
      const names = start.cookies.map((c) => c.name).sort();
      assert.deepEqual(names, [
        '__Secure-interaction',
        '__Secure-interaction.sig',
        '__Secure-interaction_resume',
        '__Secure-interaction_resume.sig',
      ]);
      for (const c of start.cookies) {
        assert.equal(c.secure, true, c.name);
        assert.equal(c.httpOnly, true, c.name);
        assert.equal(c.domain, undefined, c.name);
      }
      assert.equal(start.cookies.find((c) => c.name === '__Secure-interaction')!.path, `/interaction/${uid}`);
      assert.equal(
        start.cookies.find((c) => c.name === '__Secure-interaction_resume')!.path,
        `/oauth/authorization/${uid}`,
      );
      // The account page's own sign-in writes the same session cookie.
      const account = browser(ctx);
      const form = await account.get('/account');
      const login = await account.post('/account/login', {
        _csrf: csrfOf(form.body),
        username: 'ada@example.org',
        password: PASSWORD,
      });
      assert.equal(login.statusCode, 303);
      const session = login.cookies.find((c) => c.name === '__Host-session');
      assert.ok(session, 'session cookie named __Host-session');
      assert.equal(session.secure, true);
      assert.equal(session.path, '/');
      assert.ok(!login.cookies.some((c) => c.name === '_session'));
      assert.match((await account.get('/account')).body, /<h1>Your account<\/h1>/);
    });

    it('pages send Strict-Transport-Security on https', async () => {
      const b = browser(ctx);
      const { page } = await openSignIn(b, rp.clientId);
      assert.equal(page.headers['strict-transport-security'], 'max-age=31536000');
      assert.equal((await b.get('/account')).headers['strict-transport-security'], 'max-age=31536000');
      assert.equal((await b.get('/static/style.css')).headers['strict-transport-security'], 'max-age=31536000');
    });

    it('signing in as someone else on /account starts a new session: the old session and its tokens stop working', async () => {
      await seedUser(ctx, 1, 'eve@example.org', { name: 'Eve', password: PASSWORD });
      const b = browser(ctx);
      const signInToken = csrfOf((await b.get('/account')).body);
      assert.equal(
        (await b.post('/account/login', { _csrf: signInToken, username: 'eve@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      const evePage = await b.get('/account');
      assert.match(evePage.body, /eve@example\.org/);
      const eveToken = csrfOf(evePage.body);
      const eveSession = b.jar.get('__Host-session')!;
      // The same browser signs in as Ada (the sign-in form's token belongs to the browser).
      assert.equal(
        (await b.post('/account/login', { _csrf: signInToken, username: 'ada@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      const adaPage = await b.get('/account');
      assert.match(adaPage.body, /ada@example\.org/);
      assert.notEqual(csrfOf(adaPage.body), eveToken, 'account forms get a token for the new session');
      assert.notEqual(b.jar.get('__Host-session'), eveSession);
      const stale = await b.post('/account/passkeys/1/rename', { _csrf: eveToken, label: 'x' });
      assert.equal(stale.statusCode, 403, "a token issued to Eve's session is refused in Ada's");
      const options = await ctx.app.inject({
        method: 'POST',
        url: '/account/passkeys/options',
        headers: { cookie: [...b.jar].map(([k, v]) => `${k}=${v}`).join('; '), 'x-csrf-token': eveToken },
      });
      assert.equal(options.statusCode, 403);
      const old = await ctx.app.inject({
        method: 'GET',
        url: '/account',
        headers: { cookie: `__Host-session=${eveSession}` },
      });
      assert.match(old.body, /<h1>Sign in<\/h1>/, "Eve's session is gone");
    });

    it('password sign-in creates a Secure, HttpOnly, SameSite=Lax session and asks consent naming the client and groups', async () => {
      const b = browser(ctx);
      const { uid, csrf } = await openSignIn(b, rp.clientId);
      const login = await b.post(`/interaction/${uid}/login`, {
        _csrf: csrf,
        username: 'ADA@example.org',
        password: PASSWORD,
      });
      assert.equal(login.statusCode, 303);
      const resumed = await b.get(login.headers.location as string);
      const session = resumed.cookies.find((c) => c.name === '__Host-session');
      assert.ok(session, 'session cookie set, with the __Host- prefix on https');
      assert.equal(session.httpOnly, true);
      assert.equal(session.secure, true);
      assert.equal(session.sameSite?.toLowerCase(), 'lax');
      assert.equal(session.path, '/');
      assert.equal(session.domain, undefined);
      const { done, res: consent } = await follow(b, resumed);
      assert.equal(done, undefined);
      assert.match(consent.body, /Course &lt;b&gt;Portal&lt;\/b&gt; wants to use your account \(ada@example\.org\)/);
      assert.match(consent.body, /Your email address/);
      assert.match(consent.body, /Your name/);
      assert.doesNotMatch(consent.body, /national identity number/);
      const consentUid = /action="\/interaction\/([^/]+)\/consent"/.exec(consent.body)![1]!;
      const allowed = await b.post(`/interaction/${consentUid}/consent`, {
        _csrf: csrfOf(consent.body),
        decision: 'allow',
      });
      const end = await follow(b, allowed);
      assert.ok(end.done?.searchParams.get('code'), 'code issued');
      assert.deepEqual((await findConsent(ctx.store.db, 1, rp.clientId))?.sort(), ['email', 'openid', 'userinfo-name']);
    });

    it('remembers consent for a new session, and never asks for a first-party client', async () => {
      for (const clientId of [rp.clientId, firstParty.clientId]) {
        const b = browser(ctx);
        const { uid, csrf } = await openSignIn(b, clientId);
        const end = await follow(
          b,
          await b.post(`/interaction/${uid}/login`, { _csrf: csrf, username: 'ada@example.org', password: PASSWORD }),
        );
        assert.ok(end.done?.searchParams.get('code'), `no consent page for ${clientId}`);
      }
    });

    it('prompt=consent shows the consent page even when consent is remembered, and for first-party clients', async () => {
      const client = await seedClient(ctx, { name: 'Asks again', redirectUris: [REDIRECT], groups: ['email'] });
      await saveConsent(ctx.store.db, 1, client.clientId, ['openid', 'email'], Date.now());
      for (const clientId of [client.clientId, firstParty.clientId]) {
        const b = browser(ctx);
        const { uid, csrf } = await openSignIn(b, clientId, { prompt: 'consent' });
        const { done, res } = await follow(
          b,
          await b.post(`/interaction/${uid}/login`, { _csrf: csrf, username: 'ada@example.org', password: PASSWORD }),
        );
        assert.equal(done, undefined, `consent asked for ${clientId}`);
        assert.match(res.body, /wants to use your account/);
        // Already signed in: prompt=consent asks again in the same session too.
        const again = await follow(b, await b.get(authorizeUrl(clientId, { prompt: 'consent' })));
        assert.equal(again.done, undefined);
        assert.match(again.res.body, /wants to use your account/);
        const consentUid = /action="\/interaction\/([^/]+)\/consent"/.exec(again.res.body)![1]!;
        const allowed = await follow(
          b,
          await b.post(`/interaction/${consentUid}/consent`, { _csrf: csrfOf(again.res.body), decision: 'allow' }),
        );
        assert.ok(allowed.done?.searchParams.get('code'));
      }
    });

    it('prompt=none succeeds after signing in on /account for a first-party client and a remembered consent, and only then', async () => {
      const remembered = await seedClient(ctx, { name: 'Remembered', redirectUris: [REDIRECT], groups: ['email'] });
      await saveConsent(ctx.store.db, 1, remembered.clientId, ['openid', 'email'], Date.now());
      const unknown = await seedClient(ctx, { name: 'Never asked', redirectUris: [REDIRECT], groups: ['email'] });
      const b = browser(ctx);
      const form = await b.get('/account');
      assert.equal(
        (await b.post('/account/login', { _csrf: csrfOf(form.body), username: 'ada@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      for (const clientId of [firstParty.clientId, remembered.clientId]) {
        const { done } = await follow(b, await b.get(authorizeUrl(clientId, { prompt: 'none' })));
        assert.ok(done?.searchParams.get('code'), `code for ${clientId}: ${done?.search}`);
      }
      const refused = await follow(b, await b.get(authorizeUrl(unknown.clientId, { prompt: 'none' })));
      assert.equal(refused.done?.searchParams.get('error'), 'consent_required');
      // A client that now receives more than was consented to needs consent again.
      const grown = await seedClient(ctx, {
        name: 'Grown',
        redirectUris: [REDIRECT],
        groups: ['email', 'userinfo-name'],
      });
      await saveConsent(ctx.store.db, 1, grown.clientId, ['openid', 'email'], Date.now());
      const more = await follow(b, await b.get(authorizeUrl(grown.clientId, { prompt: 'none' })));
      assert.equal(more.done?.searchParams.get('error'), 'consent_required');
      // Signed out, prompt=none is login_required.
      const signedOut = await follow(
        browser(ctx),
        await browser(ctx).get(authorizeUrl(firstParty.clientId, { prompt: 'none' })),
      );
      assert.equal(signedOut.done?.searchParams.get('error'), 'login_required');
    });

    it('denying consent returns access_denied to the relying party and remembers nothing', async () => {
      const other = await seedClient(ctx, { name: 'Other', redirectUris: [REDIRECT], groups: ['userid-nin'] });
      const b = browser(ctx);
      const { uid, csrf } = await openSignIn(b, other.clientId);
      const { res: consent } = await follow(
        b,
        await b.post(`/interaction/${uid}/login`, { _csrf: csrf, username: 'ada@example.org', password: PASSWORD }),
      );
      assert.match(consent.body, /Your national identity number/);
      const consentUid = /action="\/interaction\/([^/]+)\/consent"/.exec(consent.body)![1]!;
      const denied = await follow(
        b,
        await b.post(`/interaction/${consentUid}/consent`, { _csrf: csrfOf(consent.body), decision: 'deny' }),
      );
      assert.equal(denied.done?.searchParams.get('error'), 'access_denied');
      assert.equal(await findConsent(ctx.store.db, 1, other.clientId), undefined);
    });

    it('cancel returns access_denied to the relying party', async () => {
      const b = browser(ctx);
      const { uid, csrf } = await openSignIn(b, rp.clientId);
      const end = await follow(b, await b.post(`/interaction/${uid}/abort`, { _csrf: csrf }));
      assert.equal(end.done?.searchParams.get('error'), 'access_denied');
    });

    it('malformed sign-in input gets the generic page, never a 500', async () => {
      const b = browser(ctx);
      const { uid, csrf } = await openSignIn(b, rp.clientId);
      const empty = await b.post(`/interaction/${uid}/login`, { _csrf: csrf });
      assert.equal(empty.statusCode, 400);
      assert.match(empty.body, /The username or password is wrong/);
      const res = await ctx.app.inject({
        method: 'POST',
        url: `/interaction/${uid}/login`,
        headers: {
          cookie: [...b.jar].map(([k, v]) => `${k}=${v}`).join('; '),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: `_csrf=${csrf}&username=a&username=b&password=${'x'.repeat(2000)}`,
      });
      assert.equal(res.statusCode, 400);
      const passkey = await b.post(`/interaction/${uid}/passkey`, { _csrf: csrf, response: '{"id":' });
      assert.equal(passkey.statusCode, 401);
      assert.match(passkey.body, /Signing in with that passkey did not work/);
      const json = await ctx.app.inject({
        method: 'POST',
        url: `/interaction/${uid}/login`,
        headers: { 'content-type': 'application/json' },
        payload: '{',
      });
      assert.ok(json.statusCode >= 400 && json.statusCode < 500);
    });

    it('an unknown or expired interaction gets a clear page', async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/interaction/nosuchinteraction' });
      assert.equal(res.statusCode, 400);
      assert.match(res.body, /expired or was already used/);
      assert.match(res.headers['content-security-policy'] as string, /frame-ancestors 'none'/);
      const post = await ctx.app.inject({
        method: 'POST',
        url: '/interaction/nosuch/login',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'username=a&password=b',
      });
      assert.equal(post.statusCode, 400);
    });

    it('speaks Norwegian Bokmål for ui_locales=nb and for Accept-Language, English otherwise', async () => {
      const { page } = await openSignIn(browser(ctx), rp.clientId, { ui_locales: 'nb' });
      assert.match(page.body, /<html lang="nb">/);
      assert.match(page.body, /Logg inn med passnøkkel/);
      const account = await ctx.app.inject({
        method: 'GET',
        url: '/account',
        headers: { 'accept-language': 'de-DE, nb-NO;q=0.8, en;q=0.5' },
      });
      assert.match(account.body, /Brukernavn/);
      const german = await ctx.app.inject({ method: 'GET', url: '/account', headers: { 'accept-language': 'de-DE' } });
      assert.match(german.body, /<html lang="en">/);
      assert.equal(pickLocale('fr nb', 'en'), 'nb');
      assert.equal(pickLocale(undefined, 'en;q=0.1, no;q=0.9'), 'nb');
      assert.equal(pickLocale(undefined, undefined), 'en');
    });

    it('the logout confirmation and the signed-out page are pages with the same policy', async () => {
      const b = browser(ctx);
      const { uid, csrf } = await openSignIn(b, firstParty.clientId);
      await follow(
        b,
        await b.post(`/interaction/${uid}/login`, { _csrf: csrf, username: 'ada@example.org', password: PASSWORD }),
      );
      assert.match((await b.get('/account')).body, /<h1>Your account<\/h1>/);
      const stay = await b.get('/openid/endsession');
      const stayXsrf = /name="xsrf" value="([^"]+)"/.exec(stay.body)![1]!;
      const stayed = await b.get(
        (await b.post('/openid/endsession/confirm', { xsrf: stayXsrf })).headers.location as string,
      );
      assert.match(stayed.body, /You are still signed in/);
      assert.match((await b.get('/account')).body, /<h1>Your account<\/h1>/);
      const confirm = await b.get('/openid/endsession');
      assert.equal(confirm.statusCode, 200);
      assert.match(confirm.headers['content-security-policy'] as string, /frame-ancestors 'none'/);
      assert.match(confirm.body, /Do you want to sign out\?/);
      const xsrf = /name="xsrf" value="([^"]+)"/.exec(confirm.body)![1]!;
      const done = await b.post('/openid/endsession/confirm', { xsrf, logout: 'yes' });
      const signedOut = await b.get(done.headers.location as string);
      assert.match(signedOut.body, /You are signed out/);
      assert.match((await b.get('/account')).body, /<h1>Sign in<\/h1>/);
    });

    it("authorization errors explain in the user's language what happened and what to do, with a reference", async () => {
      const res = await ctx.app.inject({
        method: 'GET',
        url: authorizeUrl('no-such-client'),
        headers: { accept: 'text/html' },
      });
      assert.equal(res.statusCode, 400);
      assert.match(res.headers['content-type'] as string, /text\/html/);
      assert.match(res.headers['content-security-policy'] as string, /default-src 'none'/);
      assert.match(res.body, /<h1>Something went wrong<\/h1>/);
      assert.match(res.body, /The application that sent you here is not registered with this sign-in service\./);
      assert.match(res.body, /Go back to the application and try again/);
      const id = res.headers['x-request-id'] as string;
      assert.ok(id);
      assert.ok(res.body.includes(`Reference for the helpdesk: ${id}`), 'the request id is shown');
      assert.doesNotMatch(res.body, /invalid_client|client is invalid/, 'no protocol words');
      assert.doesNotMatch(res.body, /at .*\.js:\d+/);

      const nb = await ctx.app.inject({
        method: 'GET',
        url: authorizeUrl('no-such-client', { ui_locales: 'nb' }),
        headers: { accept: 'text/html' },
      });
      assert.match(nb.body, /<html lang="nb">/);
      assert.match(nb.body, /<h1>Noe gikk galt<\/h1>/);
      assert.match(nb.body, /Tjenesten som sendte deg hit, er ikke registrert/);
      assert.ok(nb.body.includes(`Referanse for brukerstøtten: ${nb.headers['x-request-id']}`));
      const byHeader = await ctx.app.inject({
        method: 'GET',
        url: authorizeUrl('no-such-client'),
        headers: { accept: 'text/html', 'accept-language': 'nb-NO,nb;q=0.9,en;q=0.5' },
      });
      assert.match(byHeader.body, /Tjenesten som sendte deg hit/);
      assert.doesNotMatch(byHeader.body, /invalid_client/);
    });

    it('maps the common OAuth errors to explanations; an expired sign-in request says so', async () => {
      const badRedirect = await ctx.app.inject({
        method: 'GET',
        url: authorizeUrl(rp.clientId, { redirect_uri: 'https://evil.example/cb' }),
        headers: { accept: 'text/html' },
      });
      assert.equal(badRedirect.statusCode, 400);
      assert.match(badRedirect.body, /asked to send you back to an address it has not registered/);
      assert.doesNotMatch(badRedirect.body, /evil\.example|redirect_uri/);
      const expired = await ctx.app.inject({
        method: 'GET',
        url: '/oauth/authorization/nosuchinteraction',
        headers: { accept: 'text/html' },
      });
      assert.equal(expired.statusCode, 400);
      assert.match(expired.body, /This sign-in request has expired or was already used/);
      for (const [code, text] of [
        ['invalid_request', /cannot accept/],
        ['invalid_scope', /not allowed to have/],
        ['unauthorized_client', /not allowed to sign you in this way/],
        ['access_denied', /cancelled or not allowed/],
        ['login_required', /need to sign in/],
        ['server_error', /Something went wrong on our side/],
        ['something_new', /The request could not be completed/],
      ] as const) {
        const { message } = explainError(code);
        assert.match(translator('en')(message), text, code);
        assert.notEqual(translator('nb')(message), translator('en')(message), `${code} in Norwegian`);
      }
    });

    it('an unknown path is an HTML page for browsers and JSON for API clients', async () => {
      const page = await ctx.app.inject({
        method: 'GET',
        url: '/no/such/page',
        headers: { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'accept-language': 'nb' },
      });
      assert.equal(page.statusCode, 404);
      assert.match(page.headers['content-type'] as string, /^text\/html/);
      assert.match(page.headers['content-security-policy'] as string, /frame-ancestors 'none'/);
      assert.match(page.body, /<h1>Fant ikke siden<\/h1>/);
      assert.match(page.body, /<link rel="stylesheet" href="\/static\/style.css">/);
      assert.ok(page.body.includes(`Referanse for brukerstøtten: ${page.headers['x-request-id']}`));
      for (const accept of [undefined, '*/*', 'application/json', 'application/json, text/html;q=0.5']) {
        const api = await ctx.app.inject({ method: 'GET', url: '/no/such/page', headers: accept ? { accept } : {} });
        assert.equal(api.statusCode, 404, String(accept));
        assert.match(api.headers['content-type'] as string, /^application\/json/, String(accept));
        assert.deepEqual(api.json(), { code: 404, message: 'Not Found' });
      }
    });

    it("the sign-in pages' own error pages show the reference too", async () => {
      const res = await ctx.app.inject({ method: 'GET', url: '/interaction/nosuchinteraction' });
      assert.ok(res.body.includes(`Reference for the helpdesk: ${res.headers['x-request-id']}`));
    });

    it('serves the static assets, and nothing else from that folder', async () => {
      const lib = await ctx.app.inject({ method: 'GET', url: '/static/webauthn-browser.js' });
      assert.equal(lib.statusCode, 200);
      assert.match(lib.headers['content-type'] as string, /text\/javascript/);
      assert.match(lib.body, /SimpleWebAuthnBrowser/);
      const css = await ctx.app.inject({ method: 'GET', url: '/static/style.css' });
      assert.equal(css.statusCode, 200);
      assert.equal((await ctx.app.inject({ method: 'GET', url: '/static/..%2Fpages.ts' })).statusCode, 404);
      assert.equal((await ctx.app.inject({ method: 'GET', url: '/static/index.ts' })).statusCode, 404);
      assert.equal(
        (
          await ctx.app.inject({
            method: 'GET',
            url: '/static/style.css',
            headers: { 'if-none-match': css.headers.etag as string },
          })
        ).statusCode,
        304,
      );
    });

    it('a public client must use PKCE; with it, the sign-in page appears', async () => {
      const spa = await seedClient(ctx, { name: 'SPA', public: true, redirectUris: [REDIRECT] });
      const without = await ctx.app.inject({ method: 'GET', url: authorizeUrl(spa.clientId) });
      assert.equal(without.statusCode, 303);
      const error = new URL(without.headers.location as string);
      assert.equal(error.origin + error.pathname, REDIRECT);
      assert.equal(error.searchParams.get('error'), 'invalid_request');
      assert.match(error.searchParams.get('error_description') ?? '', /PKCE/);
      const withPkce = await ctx.app.inject({
        method: 'GET',
        url: authorizeUrl(spa.clientId, {
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
        }),
      });
      assert.match(withPkce.headers.location as string, /^\/interaction\//);
    });

    it('account sign-in and passkey registration without their CSRF token are refused and change nothing', async () => {
      const b = browser(ctx);
      const form = await b.get('/account');
      assert.ok(csrfOf(form.body));
      for (const [url, body] of [
        ['/account/login', { username: 'ada@example.org', password: PASSWORD }],
        ['/account/login', { _csrf: 'x'.repeat(43), username: 'ada@example.org', password: PASSWORD }],
        ['/account/passkey', { response: '{}' }],
        ['/account/passkey', { _csrf: '', response: '{}' }],
      ] as const) {
        const res = await b.post(url, body);
        assert.equal(res.statusCode, 403, `${url} ${JSON.stringify(body)}`);
        assert.match(res.body, /This form has expired or was sent from another page/);
        assert.ok(!res.cookies.some((c) => /session/.test(c.name)), 'no session cookie');
      }
      assert.equal((await b.post('/account/passkey/options', {})).statusCode, 403);
      assert.match((await b.get('/account')).body, /<h1>Sign in<\/h1>/, 'nobody signed in');
      // Signed in, finishing a passkey registration needs the session's token.
      assert.equal(
        (await b.post('/account/login', { _csrf: csrfOf(form.body), username: 'ada@example.org', password: PASSWORD }))
          .statusCode,
        303,
      );
      const before = await ctx.store.db.selectFrom('passkeys').select('id').execute();
      for (const body of [{ response: '{}' }, { _csrf: csrfOf(form.body), response: '{}' }] as Record<
        string,
        string
      >[]) {
        const res = await b.post('/account/passkeys', body);
        assert.equal(res.statusCode, 403, JSON.stringify(Object.keys(body)));
        assert.match(res.body, /This form has expired or was sent from another page/);
      }
      assert.equal((await b.post('/account/passkeys/options', {})).statusCode, 403);
      assert.deepEqual(await ctx.store.db.selectFrom('passkeys').select('id').execute(), before);
    });

    it('logout refuses a post_logout_redirect_uri the client did not register', async () => {
      const client = await seedClient(ctx, {
        name: 'Logs out',
        redirectUris: [REDIRECT],
        postLogoutRedirectUris: ['https://rp.example.test/bye'],
      });
      const b = browser(ctx);
      const evil = await b.get(
        `/openid/endsession?${new URLSearchParams({ client_id: client.clientId, post_logout_redirect_uri: 'https://evil.example/' })}`,
        { accept: 'text/html' },
      );
      assert.equal(evil.statusCode, 400);
      assert.equal(evil.headers.location, undefined);
      assert.match(evil.body, /The application sent a request this service cannot accept/);
      assert.doesNotMatch(evil.body, /evil\.example/);
      const registered = await b.get(
        `/openid/endsession?${new URLSearchParams({ client_id: client.clientId, post_logout_redirect_uri: 'https://rp.example.test/bye' })}`,
      );
      assert.notEqual(registered.statusCode, 400, 'the registered URI is accepted');
      assert.doesNotMatch(registered.body, /not registered/);
    });

    it('account actions without a session send the browser to sign in', async () => {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/account/passkeys/1/delete',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'confirm=yes',
      });
      assert.equal(res.statusCode, 303);
      assert.equal(res.headers.location, '/account');
      const options = await ctx.app.inject({ method: 'POST', url: '/account/passkeys/options' });
      assert.equal(options.statusCode, 401);
    });
  });
}

describe('cookies on plain http (local development)', () => {
  it('are not Secure and drop the __Host- prefix when PUBLIC_URL is http', async () => {
    const ctx = await startTestApp('sqlite', { PUBLIC_URL: 'http://localhost:9' });
    try {
      await seedOrg(ctx);
      await seedUser(ctx, 1, 'ada@example.org', { password: PASSWORD });
      const res = await ctx.app.inject({ method: 'GET', url: '/account' });
      const c = res.cookies.find((x) => x.name === 'idp_browser')!;
      assert.ok(c);
      assert.equal(c.secure, undefined);
      assert.equal(c.httpOnly, true);
      assert.equal(res.headers['strict-transport-security'], undefined);
      const login = await ctx.app.inject({
        method: 'POST',
        url: '/account/login',
        headers: { cookie: `idp_browser=${c.value}`, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({
          _csrf: csrfOf(res.body),
          username: 'ada@example.org',
          password: PASSWORD,
        }).toString(),
      });
      assert.equal(login.statusCode, 303);
      const session = login.cookies.find((x) => x.name === '_session');
      assert.ok(session, 'plain _session cookie');
      assert.equal(session.secure, undefined);
      const start = await ctx.app.inject({ method: 'GET', url: authorizeUrl('nosuch') });
      assert.equal(start.headers['strict-transport-security'], undefined);
    } finally {
      await ctx.close();
    }
  });
});

describe('typed errors on pages', () => {
  it('answer with the error page at their own status and headers; anything else is a 500 page', async () => {
    const ctx = await startTestApp('sqlite');
    const app = Fastify();
    try {
      // A typed error thrown before a page route runs goes to the pages' own error handler.
      app.addHook('onRequest', async (request) => {
        const refuse = request.headers['x-refuse'];
        if (refuse === 'busy') throw tooManyRequests('Too many requests', 7);
        if (refuse === 'gone') throw new AppError(410, 'Gone');
        if (refuse === 'broken') throw new Error('boom');
      });
      const provider = {
        current: () => {
          throw new Error('not used');
        },
      };
      const branding = createBranding(ctx.config.brand, ctx.store);
      await app.register(webPlugin({ config: ctx.config, store: ctx.store, keys: ctx.keys, provider, branding }));
      const ask = (refuse: string) =>
        app.inject({ method: 'GET', url: '/account', headers: { 'x-refuse': refuse, 'accept-language': 'nb' } });

      const busy = await ask('busy');
      assert.equal(busy.statusCode, 429);
      assert.equal(busy.headers['retry-after'], '7');
      assert.match(busy.headers['content-type'] as string, /^text\/html/);
      assert.match(busy.body, /<html lang="nb">/);
      assert.match(busy.body, /<main class="card">/);

      const gone = await ask('gone');
      assert.equal(gone.statusCode, 410);
      assert.match(gone.headers['content-type'] as string, /^text\/html/);

      const broken = await ask('broken');
      assert.equal(broken.statusCode, 500);
      assert.match(broken.headers['content-type'] as string, /^text\/html/);
      assert.doesNotMatch(broken.body, /boom/);
    } finally {
      await app.close();
      await ctx.close();
    }
  });
});

describe('html templates', () => {
  it('escape every interpolation unless marked raw', () => {
    assert.equal(html`<p>${'<script>"&\''}</p>`.__html, '<p>&lt;script&gt;&quot;&amp;&#39;</p>');
    assert.equal(html`<p>${raw('<b>x</b>')}</p>`.__html, '<p><b>x</b></p>');
    assert.equal(html`<ul>${['<a>', html`<li>b</li>`]}</ul>`.__html, '<ul>&lt;a&gt;<li>b</li></ul>');
  });
});
