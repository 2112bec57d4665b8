// SAML single logout's propagation, on both databases: an SP's LogoutRequest ends the session and
// each other SP of the session gets a signed LogoutRequest in turn (HTTP-Redirect or HTTP-POST, as
// its metadata offers), its LogoutResponse is verified against what was sent, and the SP that asked
// gets Success, or PartialLogout when an SP could not be signed out. Every LogoutResponse that does
// not answer the chain in progress is refused with the error page.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addServiceProvider, samlKeys } from '../../src/service-providers/index.ts';
import {
  buildRedirectQuery,
  childElements,
  decodePostMessage,
  decodeRedirectMessage,
  NS,
  parseRedirectQuery,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
  verifyRedirectSignature,
  type ParsedXml,
} from '../../src/saml/xml/index.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { listSessionSps, recordSessionSp } from '../../src/store/saml-sso.ts';
import { boundChain, MAX_CHAIN_SPS, type LogoutChain } from '../../src/saml-idp/logout-chain.ts';
import { dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { party } from '../saml/saml-fixtures.ts';
import {
  logoutRequestXml,
  logoutResponseXml,
  logoutSp,
  redirectQuery,
  requestId,
  signedXml,
  type TestSp,
} from './sso-fixtures.ts';

type Res = Awaited<ReturnType<TestContext['app']['inject']>>;
const PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';
const SUCCESS = 'urn:oasis:names:tc:SAML:2.0:status:Success';
const RESPONDER = 'urn:oasis:names:tc:SAML:2.0:status:Responder';
const PARTIAL = 'urn:oasis:names:tc:SAML:2.0:status:PartialLogout';

/** Refused: the error page with the request id, nothing sent to an SP. */
function refused(res: Res, status = 400): void {
  assert.equal(res.statusCode, status, res.body.slice(0, 300));
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.ok(res.body.includes(String(res.headers['x-request-id'])), 'the page shows the request id');
  assert.ok(!/name="SAML(Request|Response)"/.test(res.body), 'no message is posted');
  assert.equal(res.headers.location, undefined, 'no message is sent');
}

/** The chain's cookie the answer sets ('' when it ends it), or undefined when it sets none. */
function chainCookie(res: Res): string | undefined {
  const raw = res.headers['set-cookie'];
  const cookies = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  const cookie = cookies.find((c) => c.startsWith('saml_logout='));
  if (cookie === undefined) return undefined;
  // the tests' PUBLIC_URL is https: SameSite=None, so an SP's cross-site HTTP-POST still carries it
  assert.match(cookie, /; Path=\/saml2\/idp; HttpOnly; SameSite=None; Secure; Max-Age=\d+$/);
  return / Max-Age=0$/.test(cookie) ? '' : cookie.slice('saml_logout='.length, cookie.indexOf(';'));
}

function statusCodes(root: ParsedXml['root']): string[] {
  const codes = (element: ParsedXml['root']): string[] => {
    const code = childElements(element, NS.protocol, 'StatusCode')[0];
    return code ? [code.getAttribute('Value')!, ...codes(code)] : [];
  };
  return codes(childElements(root, NS.protocol, 'Status')[0]!);
}

for (const dialect of dialects()) {
  describe(`SAML single logout propagation (${dialect})`, () => {
    let clock = Date.now();
    let ctx: TestContext;
    let idpCertificate: string;
    let userId: number;
    // a: Redirect; b: Redirect; c: HTTP-POST only; d: no logout endpoint
    let a: TestSp, b: TestSp, c: TestSp, d: TestSp;
    before(async () => {
      ctx = await startTestApp(dialect, {}, { now: () => clock });
      await seedOrg(ctx);
      userId = (await seedUser(ctx, 1, 'ada@example.org')).id;
      [a, b, c, d] = await Promise.all([
        logoutSp('a.example.org', ['redirect', 'post']),
        logoutSp('b.example.org', ['redirect']),
        logoutSp('c.example.org', ['post']),
        logoutSp('d.example.org', []),
      ]);
      for (const sp of [a, b, c, d])
        await addServiceProvider(ctx.store, { metadata: sp.metadata, groups: ['userid-idp'] });
      idpCertificate = (await samlKeys(ctx.store, ctx.keys)).signing.certificate;
    });
    after(async () => ctx?.close());

    const nameIdOf = (uid: string, sp: TestSp) => `nid-${uid}-${new URL(sp.entityId).host}`;
    const indexOf = (uid: string, sp: TestSp) => `si-${uid}-${new URL(sp.entityId).host}`;

    /** The session `uid` signed in to the SPs, in this order, as single sign-on records it. */
    async function signedIn(uid: string, sps: TestSp[]) {
      for (const [n, sp] of sps.entries()) {
        await recordSessionSp(ctx.store.db, {
          session_uid: uid,
          entity_id: sp.entityId,
          user_id: userId,
          name_id: nameIdOf(uid, sp),
          name_id_format: PERSISTENT,
          session_index: indexOf(uid, sp),
          created_at: clock + n,
          expires_at: clock + 3_600_000,
        });
      }
    }

    /** `from` asks to sign the session's user out (HTTP-Redirect, or HTTP-POST). */
    function startLogout(uid: string, from: TestSp, binding: 'redirect' | 'post' = 'redirect', id = requestId()) {
      const xml = logoutRequestXml(ctx, {
        issuer: from.entityId,
        nameId: nameIdOf(uid, from),
        sessionIndex: indexOf(uid, from),
        id,
        issueInstant: clock,
      });
      if (binding === 'redirect') {
        const query = redirectQuery(xml, from.signing, 'relay-1');
        return ctx.app.inject({ method: 'GET', url: `/saml2/idp/slo?${query}` });
      }
      const form = new URLSearchParams({ SAMLRequest: Buffer.from(signedXml(xml, from.signing)).toString('base64') });
      form.set('RelayState', 'relay-1');
      return ctx.app.inject({
        method: 'POST',
        url: '/saml2/idp/slo',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: form.toString(),
      });
    }

    /** A message the IdP sent by HTTP-Redirect to `url`: its signature checked with the IdP's key. */
    async function redirected(res: Res, url: string, parameter: 'SAMLRequest' | 'SAMLResponse') {
      assert.equal(res.statusCode, 303, res.body.slice(0, 300));
      const location = String(res.headers.location);
      assert.ok(location.startsWith(`${url}?`), location);
      const query = parseRedirectQuery(location.slice(url.length + 1));
      verifyRedirectSignature(query, { keys: [idpCertificate] });
      const parsed = decodeRedirectMessage(new URL(location).searchParams.get(parameter)!);
      await validateSchema(parsed, 'protocol');
      return { root: parsed.root, relayState: new URL(location).searchParams.get('RelayState') };
    }

    /** A message the IdP posted (the auto-submitting form) to `url`: its enveloped signature checked. */
    async function posted(res: Res, url: string, parameter: 'SAMLRequest' | 'SAMLResponse') {
      assert.equal(res.statusCode, 200, res.body.slice(0, 300));
      assert.ok(res.body.includes(`action="${url}"`), 'posted to the SP’s logout endpoint');
      const value = new RegExp(`name="${parameter}" value="([^"]+)"`).exec(res.body)![1]!;
      const parsed = decodePostMessage(value);
      await validateSchema(parsed, 'protocol');
      verifyEnvelopedSignature(parsed, parsed.root, { keys: [idpCertificate] });
      return { root: parsed.root };
    }

    /** The LogoutRequest sent to `to`: the NameID and SessionIndex recorded for it. */
    function checkRequest(root: ParsedXml['root'], uid: string, to: TestSp, destination: string): string {
      assert.equal(root.localName, 'LogoutRequest');
      assert.equal(root.getAttribute('Destination'), destination);
      assert.equal(
        textOf(childElements(root, NS.assertion, 'Issuer')[0]!),
        `${ctx.config.publicUrl}/saml2/idp/metadata`,
      );
      const nameId = childElements(root, NS.assertion, 'NameID')[0]!;
      assert.equal(textOf(nameId), nameIdOf(uid, to));
      assert.equal(nameId.getAttribute('Format'), PERSISTENT);
      assert.equal(nameId.getAttribute('SPNameQualifier'), to.entityId);
      assert.equal(textOf(childElements(root, NS.protocol, 'SessionIndex')[0]!), indexOf(uid, to));
      return root.getAttribute('ID')!;
    }

    /** `from` answers the LogoutRequest `inResponseTo` by HTTP-Redirect, signed with `signer`. */
    function answerRedirect(
      cookie: string | undefined,
      from: TestSp,
      inResponseTo: string,
      options: {
        status?: string[];
        signer?: TestSp['signing'] | null;
        destination?: string;
        issueInstant?: number;
      } = {},
    ) {
      const xml = logoutResponseXml(ctx, {
        issuer: from.entityId,
        inResponseTo,
        status: options.status,
        issueInstant: options.issueInstant ?? clock,
        destination: options.destination,
      });
      const signer = options.signer === undefined ? from.signing : options.signer;
      const query = buildRedirectQuery({ parameter: 'SAMLResponse', xml, signingKey: signer?.privateKey });
      const headers = cookie === undefined ? {} : { cookie: `other=1; saml_logout=${cookie}` };
      return ctx.app.inject({ method: 'GET', url: `/saml2/idp/slo?${query}`, headers });
    }

    /** `from` answers by HTTP-POST (an enveloped signature). */
    function answerPost(cookie: string, from: TestSp, inResponseTo: string, status?: string[]) {
      const xml = logoutResponseXml(ctx, { issuer: from.entityId, inResponseTo, status, issueInstant: clock });
      const form = new URLSearchParams({ SAMLResponse: Buffer.from(signedXml(xml, from.signing)).toString('base64') });
      return ctx.app.inject({
        method: 'POST',
        url: '/saml2/idp/slo',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `saml_logout=${cookie}` },
        payload: form.toString(),
      });
    }

    const slo = (sp: TestSp, binding: 'redirect' | 'post') => `https://${new URL(sp.entityId).host}/slo/${binding}`;

    it('sends each other SP a LogoutRequest in turn (Redirect, then POST) and answers the SP that asked Success', async () => {
      await signedIn('s1', [a, b, c]);
      const asked = requestId();
      const first = await startLogout('s1', a, 'redirect', asked);
      const toB = checkRequest(
        (await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root,
        's1',
        b,
        slo(b, 'redirect'),
      );
      assert.equal(
        await listSessionSps(ctx.store.db, 's1', clock).then((rows) => rows.length),
        0,
        'the session ended first',
      );
      const second = await answerRedirect(chainCookie(first), b, toB);
      const toC = checkRequest((await posted(second, slo(c, 'post'), 'SAMLRequest')).root, 's1', c, slo(c, 'post'));
      const last = await answerPost(chainCookie(second)!, c, toC);
      const answer = await redirected(last, slo(a, 'redirect'), 'SAMLResponse');
      assert.equal(answer.root.localName, 'LogoutResponse');
      assert.equal(answer.root.getAttribute('InResponseTo'), asked);
      assert.equal(answer.relayState, 'relay-1');
      assert.deepEqual(statusCodes(answer.root), [SUCCESS]);
      assert.equal(chainCookie(last), '', 'the chain ends');

      const audit = await listAuditEvents(ctx.store.db, { action: 'saml.logout', limit: 10 });
      const recorded = audit.map((e) => JSON.parse(String(e.details)) as Record<string, string>);
      assert.deepEqual(recorded.map((r) => r.entity_id).sort(), [a.entityId, b.entityId, c.entityId].sort());
      assert.ok(recorded.every((r) => r.initiated_by === a.entityId));
    });

    it('answers PartialLogout when an SP has no logout endpoint or answers other than Success', async () => {
      await signedIn('s2', [a, d, b]);
      const first = await startLogout('s2', a);
      // d cannot be sent one: on to b
      const toB = checkRequest(
        (await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root,
        's2',
        b,
        slo(b, 'redirect'),
      );
      const last = await answerRedirect(chainCookie(first), b, toB, { status: [RESPONDER] });
      assert.deepEqual(statusCodes((await redirected(last, slo(a, 'redirect'), 'SAMLResponse')).root), [
        SUCCESS,
        PARTIAL,
      ]);

      await signedIn('s2b', [a, b]);
      const again = await startLogout('s2b', a);
      const toB2 = checkRequest(
        (await redirected(again, slo(b, 'redirect'), 'SAMLRequest')).root,
        's2b',
        b,
        slo(b, 'redirect'),
      );
      // an SP that itself only partly signed out
      const end = await answerRedirect(chainCookie(again), b, toB2, { status: [SUCCESS, PARTIAL] });
      assert.deepEqual(statusCodes((await redirected(end, slo(a, 'redirect'), 'SAMLResponse')).root), [
        SUCCESS,
        PARTIAL,
      ]);
    });

    it('posts the LogoutResponse to an SP whose logout endpoint is HTTP-POST only', async () => {
      await signedIn('s3', [c, b]);
      const asked = requestId();
      const first = await startLogout('s3', c, 'post', asked);
      const toB = checkRequest(
        (await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root,
        's3',
        b,
        slo(b, 'redirect'),
      );
      const last = await answerRedirect(chainCookie(first), b, toB);
      const answer = await posted(last, slo(c, 'post'), 'SAMLResponse');
      assert.equal(answer.root.getAttribute('InResponseTo'), asked);
      assert.deepEqual(statusCodes(answer.root), [SUCCESS]);
      assert.ok(last.body.includes('name="RelayState" value="relay-1"'));
    });

    it('refuses a LogoutResponse that does not answer the chain in progress', async () => {
      await signedIn('s4', [a, b]);
      const first = await startLogout('s4', a);
      const toB = checkRequest(
        (await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root,
        's4',
        b,
        slo(b, 'redirect'),
      );
      const cookie = chainCookie(first)!;
      refused(await answerRedirect(undefined, b, toB), 400); // unsolicited: no chain in this browser
      refused(await answerRedirect(`${cookie.slice(0, -2)}xx`, b, toB)); // a chain that is not ours
      refused(await answerRedirect(cookie, b, requestId())); // InResponseTo another request
      refused(await answerRedirect(cookie, b, toB, { signer: await party('attacker') })); // bad signature
      refused(await answerRedirect(cookie, b, toB, { signer: null })); // not signed
      refused(await answerRedirect(cookie, c, toB, { signer: c.signing })); // another SP
      refused(await answerRedirect(cookie, b, toB, { destination: 'https://elsewhere.example.org/slo' }));
      refused(await answerRedirect(cookie, b, toB, { issueInstant: clock - 9 * 60_000 })); // too old
      // the chain is intact: the right answer goes on to the end
      const last = await answerRedirect(cookie, b, toB);
      assert.deepEqual(statusCodes((await redirected(last, slo(a, 'redirect'), 'SAMLResponse')).root), [SUCCESS]);
      // ... which awaits nothing more
      refused(await answerRedirect(chainCookie(last) || undefined, b, toB));
    });

    it('refuses the LogoutResponse of an expired chain', async () => {
      await signedIn('s5', [a, b]);
      const first = await startLogout('s5', a);
      const toB = checkRequest(
        (await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root,
        's5',
        b,
        slo(b, 'redirect'),
      );
      const started = clock;
      clock += 11 * 60_000;
      try {
        refused(await answerRedirect(chainCookie(first), b, toB));
        refused(
          await ctx.app.inject({
            method: 'GET',
            url: '/saml2/idp/slo/continue',
            headers: { cookie: `saml_logout=${chainCookie(first)}` },
          }),
        );
      } finally {
        clock = started;
      }
    });

    it('goes on past an SP that never answered when the browser comes back, and says PartialLogout', async () => {
      await signedIn('s6', [a, b, c]);
      const first = await startLogout('s6', a);
      checkRequest((await redirected(first, slo(b, 'redirect'), 'SAMLRequest')).root, 's6', b, slo(b, 'redirect'));
      const skipped = await ctx.app.inject({
        method: 'GET',
        url: '/saml2/idp/slo/continue',
        headers: { cookie: `saml_logout=${chainCookie(first)}` },
      });
      const toC = checkRequest((await posted(skipped, slo(c, 'post'), 'SAMLRequest')).root, 's6', c, slo(c, 'post'));
      const last = await answerPost(chainCookie(skipped)!, c, toC);
      assert.deepEqual(statusCodes((await redirected(last, slo(a, 'redirect'), 'SAMLResponse')).root), [
        SUCCESS,
        PARTIAL,
      ]);
    });

    it('counts the answers of the other SPs', async () => {
      const metrics = await ctx.app.inject({ method: 'GET', url: '/metrics' });
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="logout_propagated",binding="redirect"\} [1-9]/);
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="logout_propagated",binding="post"\} [1-9]/);
      assert.match(
        metrics.body,
        /idp_saml_responses_total\{outcome="logout_not_propagated",binding="redirect"\} [1-9]/,
      );
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="partial_logout",binding="redirect"\} [1-9]/);
      assert.match(metrics.body, /idp_saml_responses_total\{outcome="logout",binding="post"\} [1-9]/);
    });
  });
}

describe('SAML single logout chain bounds', () => {
  const key = Buffer.alloc(32, 7);
  const target = (n: number, size = 20) => ({
    sp: `https://sp${n}.example.org/sp`,
    nameId: 'n'.repeat(size),
    format: PERSISTENT,
    sessionIndex: `si-${n}`,
  });
  const chain = (queue: LogoutChain['queue']): LogoutChain => ({
    initiator: { kind: 'oidc', continueTo: 'https://idp.example.test/done' },
    queue,
    partial: false,
    at: 1_700_000_000_000,
  });

  it('keeps a chain within the bounds whole', () => {
    const queue = Array.from({ length: MAX_CHAIN_SPS }, (_, n) => target(n));
    assert.deepEqual(boundChain(key, chain(queue)), chain(queue));
  });

  it('leaves out SPs beyond the count, and beyond what the cookie carries, and says the logout is partial', () => {
    const many = boundChain(key, chain(Array.from({ length: MAX_CHAIN_SPS + 2 }, (_, n) => target(n))));
    assert.equal(many.queue.length, MAX_CHAIN_SPS);
    assert.equal(many.partial, true);
    const large = boundChain(key, chain(Array.from({ length: 4 }, (_, n) => target(n, 1000))));
    assert.ok(large.queue.length < 4 && large.queue.length > 0, String(large.queue.length));
    assert.equal(large.partial, true);
  });
});
