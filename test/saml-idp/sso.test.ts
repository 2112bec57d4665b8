// SAML single sign-on's protocol and security rules, on both databases: every refusal is the
// service's error page with the request id (never a Response to an unverified address), and each
// check has a request that only it refuses.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { deflateRawSync } from 'node:zlib';
import { buildApp } from '../../src/app.ts';
import { openStore } from '../../src/store/index.ts';
import {
  addServiceProvider,
  samlKeys,
  setServiceProviderEnabled,
  updateServiceProvider,
} from '../../src/service-providers/index.ts';
import {
  childElements,
  decodePostMessage,
  decodeRedirectMessage,
  NS,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
} from '../../src/saml/xml/index.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { cli, dialects, seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import { party } from '../saml/saml-fixtures.ts';
import {
  authnRequestXml,
  getSso,
  mellon,
  postSso,
  redirectQuery,
  requestId,
  sha1RedirectQuery,
  shibboleth,
  signedXml,
  type TestSp,
} from './sso-fixtures.ts';

type Res = Awaited<ReturnType<TestContext['app']['inject']>>;

/** Accepted: the browser is sent to sign in (no session here) for the SP's client. */
function accepted(res: Res): URLSearchParams {
  assert.equal(res.statusCode, 303, res.body.slice(0, 300));
  const location = String(res.headers.location);
  assert.ok(location.startsWith('/oauth/authorization?'), location);
  return new URL(location, 'http://x').searchParams;
}

/** Refused: the error page with the request id, no Response, no stack trace. */
function refused(res: Res, status = 400): void {
  assert.equal(res.statusCode, status, res.body.slice(0, 300));
  assert.match(String(res.headers['content-type']), /^text\/html/);
  const id = String(res.headers['x-request-id']);
  assert.ok(res.body.includes(id), 'the page shows the request id');
  assert.ok(!res.body.includes('SAMLResponse'), 'no Response is sent');
  assert.ok(!/\bat .+\.ts:\d+/.test(res.body), 'no stack trace');
}

/** The Response a page posts to the SP, read and checked against the IdP's key. */
async function postedResponse(ctx: TestContext, res: Res, acs: string) {
  assert.equal(res.statusCode, 200, res.body.slice(0, 300));
  assert.ok(res.body.includes(`action="${acs}"`), 'posted to the verified ACS');
  assert.match(String(res.headers['content-security-policy']), new RegExp(`form-action 'self' ${new URL(acs).origin}`));
  const value = /name="SAMLResponse" value="([^"]+)"/.exec(res.body)![1]!;
  const parsed = decodePostMessage(value);
  await validateSchema(parsed, 'protocol');
  const keys = await samlKeys(ctx.store, ctx.keys);
  verifyEnvelopedSignature(parsed, parsed.root, { keys: [keys.signing.certificate] });
  const codes = (element: Element): string[] => {
    const code = childElements(element, NS.protocol, 'StatusCode')[0];
    return code ? [code.getAttribute('Value')!, ...codes(code)] : [];
  };
  return { root: parsed.root, status: codes(childElements(parsed.root, NS.protocol, 'Status')[0]!) };
}
type Element = ReturnType<typeof decodePostMessage>['root'];

for (const dialect of dialects()) {
  describe(`SAML single sign-on requests (${dialect})`, () => {
    let ctx: TestContext;
    let shib: TestSp;
    let signer: TestSp;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      [shib, signer] = await Promise.all([shibboleth(), mellon()]);
      await addServiceProvider(ctx.store, { metadata: shib.metadata, groups: ['userid-idp', 'email'] });
      await addServiceProvider(ctx.store, { metadata: signer.metadata, groups: ['userid-idp'] });
    });
    after(async () => ctx?.close());

    const request = (shape: Partial<Parameters<typeof authnRequestXml>[1]> = {}) =>
      authnRequestXml(ctx, { issuer: shib.entityId, acsUrl: shib.acs, ...shape });

    it('accepts an unsigned Redirect request and sends the browser to sign in for the SP’s client', async () => {
      const params = accepted(await getSso(ctx, redirectQuery(request(), undefined, 'relay-1')));
      assert.match(params.get('client_id')!, /^saml-[a-z2-7]{26}$/);
      assert.equal(params.get('redirect_uri'), `${ctx.config.publicUrl}/saml2/idp/continue`);
      assert.equal(params.get('response_type'), 'none', 'no code or token is issued for an SP’s client');
      assert.equal(params.get('scope'), 'openid userid-idp email');
      assert.equal(params.get('prompt'), null);
    });

    it('accepts a signed POST request and a signed Redirect request', async () => {
      accepted(await postSso(ctx, signedXml(request(), shib.signing)));
      accepted(await getSso(ctx, redirectQuery(request(), shib.signing)));
    });

    it('refuses an unknown issuer and a disabled SP', async () => {
      refused(await getSso(ctx, redirectQuery(request({ issuer: 'https://unknown.example.org/sp' }))), 403);
      await setServiceProviderEnabled(ctx.store, shib.entityId, false);
      try {
        refused(await getSso(ctx, redirectQuery(request())), 403);
      } finally {
        await setServiceProviderEnabled(ctx.store, shib.entityId, true);
      }
      accepted(await getSso(ctx, redirectQuery(request())));
    });

    it('keeps an SP between requests, dropped at once by a change here and within a second on another instance', async () => {
      const sso = (app: TestContext['app']) => getSso({ ...ctx, app }, redirectQuery(request()));
      const store = await openStore(ctx.config.databaseUrl);
      const other = await buildApp({ config: ctx.config, store, keys: ctx.keys });
      await other.app.ready();
      try {
        for (const app of [ctx.app, other.app]) accepted(await sso(app));
        await setServiceProviderEnabled(ctx.store, shib.entityId, false);
        refused(await sso(ctx.app), 403);
        await setServiceProviderEnabled(ctx.store, shib.entityId, true);
        for (const app of [ctx.app, other.app]) accepted(await sso(app));
        const r = await cli(ctx.config.databaseUrl, ['saml', 'sp', 'disable', shib.entityId]);
        assert.equal(r.code, 0, r.err);
        const started = Date.now();
        let refusedAfter = Infinity;
        for (let i = 0; i < 30; i++) {
          if ((await sso(other.app)).statusCode === 403) {
            refusedAfter = Date.now() - started;
            break;
          }
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        assert.ok(refusedAfter < 1000, `refused after ${refusedAfter} ms`);
      } finally {
        assert.equal((await cli(ctx.config.databaseUrl, ['saml', 'sp', 'enable', shib.entityId])).code, 0);
        await other.app.close();
        await store.close();
      }
    });

    it('refuses another Destination, and a signed request without one', async () => {
      refused(await getSso(ctx, redirectQuery(request({ destination: 'https://other.example.org/saml2/idp/sso' }))));
      refused(await postSso(ctx, signedXml(request({ destination: null }), shib.signing)));
      accepted(await getSso(ctx, redirectQuery(request({ destination: null }))));
    });

    it('refuses a stale or future IssueInstant', async () => {
      refused(await getSso(ctx, redirectQuery(request({ issueInstant: Date.now() - 10 * 60_000 }))));
      refused(await getSso(ctx, redirectQuery(request({ issueInstant: Date.now() + 10 * 60_000 }))));
      accepted(await getSso(ctx, redirectQuery(request({ issueInstant: Date.now() - 60_000 }))));
    });

    it('accepts a request ID once, also on a second instance sharing the database', async () => {
      const xml = request({ id: requestId() });
      accepted(await getSso(ctx, redirectQuery(xml)));
      refused(await getSso(ctx, redirectQuery(xml)));
      const store = await openStore(ctx.config.databaseUrl);
      const other = await buildApp({ config: ctx.config, store, keys: ctx.keys });
      try {
        const again = request({ id: requestId() });
        const [a, b] = await Promise.all([
          getSso(ctx, redirectQuery(again)),
          other.app.inject({ method: 'GET', url: `/saml2/idp/sso?${redirectQuery(again)}` }),
        ]);
        assert.deepEqual([a.statusCode, b.statusCode].sort(), [303, 400]);
      } finally {
        await other.app.close();
        await store.close();
      }
    });

    it('refuses a return address or index the SP’s metadata does not list, and another binding', async () => {
      refused(await getSso(ctx, redirectQuery(request({ acsUrl: 'https://evil.example.org/acs' }))));
      refused(await getSso(ctx, redirectQuery(request({ acsUrl: null, acsIndex: 9 }))));
      // index 3 is the SP's Artifact endpoint: not HTTP-POST
      refused(await getSso(ctx, redirectQuery(request({ acsUrl: null, acsIndex: 3 }))));
      refused(
        await getSso(
          ctx,
          redirectQuery(request({ protocolBinding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Artifact' })),
        ),
      );
      accepted(await getSso(ctx, redirectQuery(request({ acsUrl: null, acsIndex: 1 }))));
      accepted(await getSso(ctx, redirectQuery(request({ acsUrl: null, protocolBinding: null }))));
    });

    it('refuses unsigned requests from an SP whose metadata says it signs them', async () => {
      const mellonRequest = () => authnRequestXml(ctx, { issuer: signer.entityId, acsUrl: signer.acs });
      refused(await getSso(ctx, redirectQuery(mellonRequest())));
      refused(await postSso(ctx, mellonRequest()));
      accepted(await getSso(ctx, redirectQuery(mellonRequest(), signer.signing)));
      accepted(await postSso(ctx, signedXml(mellonRequest(), signer.signing)));
    });

    it('refuses a Redirect signature over other octets, by another key, or with an unlisted algorithm', async () => {
      const query = redirectQuery(request(), shib.signing, 'relay');
      refused(await getSso(ctx, query.replace('RelayState=relay', 'RelayState=other')));
      const attacker = await party('attacker');
      refused(await getSso(ctx, redirectQuery(request(), attacker)));
      refused(
        await getSso(
          ctx,
          query.replace(/SigAlg=[^&]+/, `SigAlg=${encodeURIComponent('http://www.w3.org/2000/09/xmldsig#dsa-sha1')}`),
        ),
      );
      // SHA-1 is accepted on input, from SPs that still send it
      accepted(await getSso(ctx, sha1RedirectQuery(request(), shib.signing.privateKey)));
    });

    it('refuses XML signature wrapping shapes of POST requests', async () => {
      const good = signedXml(request({ id: '_good' + requestId() }), shib.signing);
      // the signed request's ACS changed afterwards
      refused(await postSso(ctx, good.replace(shib.acs, 'https://evil.example.org/acs')));
      // a second request beside the signed one
      refused(await postSso(ctx, `${good}${request()}`));
      // the signed request moved into an outer, unsigned one that a naive reader would take
      const inner = good.replace(/^<\?xml[^>]*\?>/, '');
      const outer = request({ id: '_evil', acsUrl: 'https://evil.example.org/acs' }).replace(
        '</saml:Issuer>',
        `</saml:Issuer><samlp:Extensions>${inner}</samlp:Extensions>`,
      );
      refused(await postSso(ctx, outer));
      // an outer request carrying the signature of another element
      const signature = /<ds:Signature[\s\S]*<\/ds:Signature>/.exec(good)![0];
      const wrapped = request({ id: '_evil2' }).replace('</saml:Issuer>', `</saml:Issuer>${signature}`);
      refused(await postSso(ctx, wrapped));
      // the signature from a signed request, on another one with the same ID
      const id = /ID="([^"]+)"/.exec(good)![1]!;
      const copy = request({ id, acsUrl: shib.acs, force: true }).replace(
        '</saml:Issuer>',
        `</saml:Issuer>${signature}`,
      );
      refused(await postSso(ctx, copy));
    });

    it('refuses a DOCTYPE, an entity, and a deflate bomb without inflating it', async () => {
      const doctype = `<!DOCTYPE r [<!ENTITY x "y">]>${request()}`;
      refused(await postSso(ctx, doctype));
      refused(await getSso(ctx, redirectQuery(doctype)));
      const bomb = deflateRawSync(Buffer.alloc(20 * 1024 * 1024, 0x20), { level: 9 }).toString('base64');
      const started = Date.now();
      refused(await getSso(ctx, `SAMLRequest=${encodeURIComponent(bomb)}`));
      assert.ok(Date.now() - started < 2000, 'refused at the cap');
      refused(await getSso(ctx, 'SAMLRequest=not%20base64!'));
      refused(await postSso(ctx, '<samlp:AuthnRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol"/>'));
      refused(await getSso(ctx, ''));
    });

    it('refuses a RequestedAuthnContext with a comparison other than exact', async () => {
      refused(
        await getSso(ctx, redirectQuery(request({ acrs: ['https://refeds.org/profile/mfa'], comparison: 'minimum' }))),
      );
    });

    it('asks for a new sign-in on ForceAuthn, and for the exact classes of RequestedAuthnContext', async () => {
      assert.equal(accepted(await getSso(ctx, redirectQuery(request({ force: true })))).get('prompt'), 'login');
      const mfa = 'https://refeds.org/profile/mfa';
      const params = accepted(await getSso(ctx, redirectQuery(request({ acrs: [mfa, 'phr'] }))));
      assert.equal(params.get('acr_values'), `${mfa} phr`);
    });

    it('answers IsPassive without a session with a signed NoPassive Response to the verified ACS', async () => {
      const id = requestId();
      const res = await getSso(ctx, redirectQuery(request({ id, passive: true }), undefined, 'back-here'));
      const { root, status } = await postedResponse(ctx, res, shib.acs);
      assert.deepEqual(status, [
        'urn:oasis:names:tc:SAML:2.0:status:Responder',
        'urn:oasis:names:tc:SAML:2.0:status:NoPassive',
      ]);
      assert.equal(root.getAttribute('InResponseTo'), id);
      assert.equal(root.getAttribute('Destination'), shib.acs);
      assert.equal(
        textOf(childElements(root, NS.assertion, 'Issuer')[0]!),
        `${ctx.config.publicUrl}/saml2/idp/metadata`,
      );
      assert.ok(res.body.includes('name="RelayState" value="back-here"'));
      assert.equal(childElements(root, NS.assertion, 'Assertion').length, 0);
    });

    it('answers classes it does not offer with NoAuthnContext, and a NameID format it does not give with InvalidNameIDPolicy', async () => {
      const res = await getSso(
        ctx,
        redirectQuery(request({ acrs: ['urn:oasis:names:tc:SAML:2.0:ac:classes:Kerberos'] })),
      );
      assert.equal(
        (await postedResponse(ctx, res, shib.acs)).status[1],
        'urn:oasis:names:tc:SAML:2.0:status:NoAuthnContext',
      );
      const email = await getSso(
        ctx,
        redirectQuery(request({ nameIdFormat: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress' })),
      );
      assert.equal(
        (await postedResponse(ctx, email, shib.acs)).status[1],
        'urn:oasis:names:tc:SAML:2.0:status:InvalidNameIDPolicy',
      );
    });

    it('turns an error of the sign-in into a SAML status to the ACS, and refuses a state it did not seal', async () => {
      const params = accepted(await getSso(ctx, redirectQuery(request())));
      const state = params.get('state')!;
      const denied = await ctx.app.inject({
        method: 'GET',
        url: `/saml2/idp/continue?error=access_denied&state=${encodeURIComponent(state)}`,
      });
      assert.equal(
        (await postedResponse(ctx, denied, shib.acs)).status[1],
        'urn:oasis:names:tc:SAML:2.0:status:RequestDenied',
      );
      refused(
        await ctx.app.inject({
          method: 'GET',
          url: `/saml2/idp/continue?state=${encodeURIComponent(state.slice(0, -4) + 'AAAA')}`,
        }),
      );
      refused(await ctx.app.inject({ method: 'GET', url: '/saml2/idp/continue' }));
      // a state it sealed, but no session that signed in for the SP
      refused(await ctx.app.inject({ method: 'GET', url: `/saml2/idp/continue?state=${encodeURIComponent(state)}` }));
    });

    it('answers IdP-initiated sign-in only for SPs that allow it', async () => {
      const url = (id: string) =>
        `/saml2/idp/unsolicited?providerId=${encodeURIComponent(id)}&target=${encodeURIComponent('/x')}`;
      refused(await ctx.app.inject({ method: 'GET', url: url(shib.entityId) }), 403);
      refused(await ctx.app.inject({ method: 'GET', url: url('https://unknown.example.org/sp') }), 403);
      await updateServiceProvider(ctx.store, shib.entityId, { allowUnsolicited: true });
      try {
        accepted(await ctx.app.inject({ method: 'GET', url: url(shib.entityId) }));
      } finally {
        await updateServiceProvider(ctx.store, shib.entityId, { allowUnsolicited: false });
      }
    });

    it('takes only signed LogoutRequests, and answers one for no session of the SP with UnknownPrincipal', async () => {
      const logout = (id = requestId()) =>
        `<samlp:LogoutRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ` +
        `ID="${id}" Version="2.0" IssueInstant="${new Date().toISOString()}" Destination="${ctx.config.publicUrl}/saml2/idp/slo">` +
        `<saml:Issuer>${shib.entityId}</saml:Issuer><saml:NameID>someone</saml:NameID>` +
        `<samlp:SessionIndex>no-such-session</samlp:SessionIndex></samlp:LogoutRequest>`;
      const get = (query: string) => ctx.app.inject({ method: 'GET', url: `/saml2/idp/slo?${query}` });
      refused(await get(redirectQuery(logout())));
      refused(await get(redirectQuery(logout(), await party('attacker'))));
      // an AuthnRequest is not a LogoutRequest
      refused(await get(redirectQuery(request(), shib.signing)));
      const res = await get(redirectQuery(logout(), shib.signing));
      assert.equal(res.statusCode, 303);
      const location = new URL(String(res.headers.location));
      assert.equal(`${location.origin}${location.pathname}`, 'https://sp.example.org/Shibboleth.sso/SLO/Redirect');
      const answer = decodeRedirectMessage(location.searchParams.get('SAMLResponse')!);
      await validateSchema(answer, 'protocol');
      const code = childElements(childElements(answer.root, NS.protocol, 'Status')[0]!, NS.protocol, 'StatusCode')[0]!;
      assert.equal(
        childElements(code, NS.protocol, 'StatusCode')[0]!.getAttribute('Value'),
        'urn:oasis:names:tc:SAML:2.0:status:UnknownPrincipal',
      );
      assert.ok(location.searchParams.get('Signature'));
    });

    it('counts refusals and status answers by outcome and binding', async () => {
      const metrics = await ctx.app.inject({ method: 'GET', url: '/metrics' });
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="refused",binding="redirect"\} [1-9]/);
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="no_passive",binding="redirect"\} [1-9]/);
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="refused",binding="post"\} [1-9]/);
      assert.equal((await listAuditEvents(ctx.store.db, { action: 'saml.sso', limit: 5 })).length, 0);
    });
  });
}
