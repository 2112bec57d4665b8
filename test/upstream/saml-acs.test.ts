// The AssertionConsumerService over plain HTTP, on both databases: an accepted Response goes on to
// its interaction; every refusal (unsigned, wrongly signed, a key not in the metadata, another
// provider's Response, a replay, unsolicited or unknown InResponseTo, wrong audience or destination,
// expired, a DTD, signature wrapping, a refusal status, garbage) ends on an error page with the
// request id: never a 500, never a stack trace. And the SP metadata the service publishes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, seedOrg } from '../helpers.ts';
import { startServer, type E2EServer } from '../e2e/helpers.ts';
import { buildIdpMetadata, parseSpMetadata } from '../../src/saml/metadata/index.ts';
import { encryptElement, NS, parseXml, type Document } from '../../src/saml/xml/index.ts';
import { addUpstreamProvider, removeUpstreamProvider, setUpstreamEnabled } from '../../src/upstream/providers.ts';
import { startUpstreamRequest } from '../../src/upstream/requests.ts';
import { STATUS } from '../../src/saml-idp/response.ts';
import { party, type Party } from '../saml/saml-fixtures.ts';
import {
  b64,
  forgedIdp,
  forgeResponse,
  forgeResponseXml,
  wrapped,
  type ForgedIdp,
  type ForgeOptions,
} from './saml-forge.ts';

for (const dialect of dialects()) {
  describe(`the SAML ACS (${dialect})`, () => {
    let server: E2EServer;
    let idp: ForgedIdp;
    let other: ForgedIdp;
    let stranger: Party;
    let p1: string;
    let p2: string;
    let acs: string;
    let audience: string;

    before(async () => {
      server = await startServer(dialect);
      await seedOrg(server, 1, 'uni.example');
      await seedOrg(server, 2, 'other.example', 'Other');
      idp = await forgedIdp();
      other = await forgedIdp('https://other.example/idp', ['other.example']);
      stranger = await party('stranger');
      const add = async (orgId: number, i: ForgedIdp, name: string) =>
        (
          await addUpstreamProvider(server.store, server.keys, {
            orgId,
            type: 'saml',
            name,
            linkBy: 'eppn',
            saml: { entityId: i.entityId, metadataXml: i.metadata },
          })
        ).id;
      p1 = await add(1, idp, 'Uni IdP');
      p2 = await add(2, other, 'Other IdP');
      acs = `${server.url}/saml2/sp/acs`;
      audience = `${server.url}/saml2/sp/metadata`;
    });

    after(async () => {
      await server?.close();
    });

    // the browser's binding cookies, one per sign-in it started (the service runs on plain http here)
    const jar: string[] = [];
    const started = async (providerId = p1) => {
      const browserBinding = `binding-${jar.length}`;
      const { id } = await startUpstreamRequest(server.store, {
        providerId,
        purpose: { kind: 'sign-in', interactionUid: 'interaction-uid-1' },
        browserBinding,
      });
      jar.push(`upstream-${id}=${browserBinding}`);
      return id;
    };

    const post = (fields: Record<string, string>, cookies = jar) =>
      fetch(acs, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookies.join('; ') },
        body: new URLSearchParams(fields).toString(),
      });

    async function refused(fields: Record<string, string>, what: string) {
      const response = await post(fields);
      const body = await response.text();
      assert.ok(response.status >= 400 && response.status < 500, `${what}: status ${response.status}`);
      assert.match(response.headers.get('content-type') ?? '', /text\/html/, what);
      assert.doesNotMatch(body, /\bat [\w.<>]+ \(|Error:|stack/i, `${what}: no stack trace`);
      assert.match(body, /req-|[0-9a-f]{8}/, `${what}: a reference`);
      return body;
    }

    const options = async (over: Partial<ForgeOptions> = {}): Promise<ForgeOptions> => ({
      destination: acs,
      audience,
      inResponseTo: await started(),
      ...over,
    });

    it('publishes SP metadata whose entityID and ACS are derived from PUBLIC_URL', async () => {
      const response = await fetch(audience);
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /application\/samlmetadata\+xml/);
      const sp = await parseSpMetadata(await response.text());
      assert.equal(sp.entityId, audience);
      assert.deepEqual(
        sp.assertionConsumerServices.map((s) => s.location),
        [acs],
      );
      assert.equal(sp.authnRequestsSigned, true);
      assert.ok(sp.signingCertificates.length >= 1 && sp.encryptionCertificates.length >= 1);
    });

    it('accepts a good Response and sends the browser on to its interaction', async () => {
      const o = await options();
      const response = await post({ SAMLResponse: forgeResponse(idp, o) });
      assert.equal(response.status, 303);
      assert.equal(
        response.headers.get('location'),
        `/interaction/interaction-uid-1/upstream-return/${o.inResponseTo}`,
      );
      // the same Response again: refused (its request is consumed, its assertion remembered)
      await refused({ SAMLResponse: forgeResponse(idp, o) }, 'replayed');
    });

    it('accepts a Subject whose NameID is encrypted to the service (EncryptedID) and reads it', async () => {
      const sp = await parseSpMetadata(await (await fetch(audience)).text());
      const nameId = parseXml(
        `<saml:NameID xmlns:saml="${NS.assertion}" Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent">sealed-subject-9</saml:NameID>`,
      ).root;
      const data = encryptElement(nameId, { certificate: sp.encryptionCertificates[0]! });
      const edit = (document: Document) => {
        const plain = document.getElementsByTagNameNS(NS.assertion, 'NameID')[0]!;
        const container = document.createElementNS(NS.assertion, 'saml:EncryptedID');
        container.appendChild(document.importNode(data, true));
        plain.parentNode!.replaceChild(container, plain);
      };
      const o = await options({ edit });
      const response = await post({ SAMLResponse: forgeResponse(idp, o) });
      assert.equal(response.status, 303);
      const row = await server.store.db
        .selectFrom('upstream_requests')
        .select('assertion')
        .where('id', '=', o.inResponseTo!)
        .executeTakeFirstOrThrow();
      assert.equal((JSON.parse(row.assertion!) as { subject: string }).subject, 'sealed-subject-9');
    });

    it('refuses unsigned, wrongly signed and foreign-key Responses', async () => {
      await refused({ SAMLResponse: forgeResponse(idp, await options({ sign: 'none' })) }, 'unsigned');
      await refused({ SAMLResponse: forgeResponse(idp, await options({ signer: stranger })) }, 'key not in metadata');
      const altered = forgeResponseXml(idp, await options()).replace('opaque-subject-1', 'victim');
      await refused({ SAMLResponse: b64(altered) }, 'altered after signing');
    });

    it('refuses a Response delivered by another browser than the one that started the sign-in', async () => {
      const o = await options();
      // a browser without the binding cookie, or with another sign-in's: refused, the request left as it was
      for (const cookies of [[], [`upstream-${o.inResponseTo}=binding-forged`], jar.slice(0, -1)]) {
        const response = await post({ SAMLResponse: forgeResponse(idp, o) }, cookies);
        assert.equal(response.status, 400);
        assert.equal(response.headers.get('location'), null);
        assert.doesNotMatch(await response.text(), /upstream-return/);
      }
      // the browser that started it completes it, and its binding cookie is cleared
      const response = await post({ SAMLResponse: forgeResponse(idp, o) });
      assert.equal(response.status, 303);
      assert.match(response.headers.get('set-cookie') ?? '', new RegExp(`upstream-${o.inResponseTo}=;`));
    });

    it('validates a Response against the provider whose sign-in it answers, among those sharing its entityID', async () => {
      // org 2 registers the same entityID with other keys (whichever comes first in id order, each
      // provider's sign-in must be checked against that provider alone)
      const impostor = await forgedIdp(idp.entityId, ['uni.example']);
      const { id: stale } = await addUpstreamProvider(server.store, server.keys, {
        orgId: 2,
        type: 'saml',
        name: 'Same IdP, stale keys',
        linkBy: 'eppn',
        saml: { entityId: impostor.entityId, metadataXml: impostor.metadata },
      });
      try {
        // p1's sign-in: checked with p1's keys, whatever org 2 registered
        const o = await options();
        const response = await post({ SAMLResponse: forgeResponse(idp, o) });
        assert.equal(response.status, 303);
        assert.equal(
          response.headers.get('location'),
          `/interaction/interaction-uid-1/upstream-return/${o.inResponseTo}`,
        );
        // org 2's sign-in: checked with its own keys only (the other registration's keys do not do)
        const theirs = await options({ inResponseTo: await started(stale) });
        await refused({ SAMLResponse: forgeResponse(idp, theirs) }, 'signed with the other registration’s key');
        assert.equal((await post({ SAMLResponse: forgeResponse(impostor, theirs) })).status, 303);
      } finally {
        await removeUpstreamProvider(server.store, stale);
      }
    });

    it('refuses a Response of another provider for this provider’s sign-in (mix-up)', async () => {
      // genuinely from the other IdP, answering p1's request
      await refused({ SAMLResponse: forgeResponse(other, await options()) }, 'mix-up');
      // the request is still there for p1: the refusal did not consume it
      const o = await options();
      await refused({ SAMLResponse: forgeResponse(other, o) }, 'mix-up');
      assert.equal((await post({ SAMLResponse: forgeResponse(idp, o) })).status, 303);
      // and the other IdP's Response for its own provider's request is accepted
      const theirs = await options({ inResponseTo: await started(p2) });
      assert.equal((await post({ SAMLResponse: forgeResponse(other, theirs) })).status, 303);
    });

    it('refuses every Response while the provider is disabled, at once', async () => {
      await setUpstreamEnabled(server.store, p1, false);
      try {
        const body = await refused({ SAMLResponse: forgeResponse(idp, await options()) }, 'disabled provider');
        assert.match(body, /Uni IdP/);
      } finally {
        await setUpstreamEnabled(server.store, p1, true);
      }
      assert.equal((await post({ SAMLResponse: forgeResponse(idp, await options()) })).status, 303);
    });

    it('refuses Responses of a provider whose stored metadata has expired, with a page naming it', async () => {
      const stale = await forgedIdp('https://stale.example/idp', ['stale.example']);
      const expired = buildIdpMetadata({
        entityId: stale.entityId,
        ssoUrl: 'https://stale.example/sso',
        sloUrl: 'https://stale.example/slo',
        signingCertificates: [stale.key.certificate],
        encryptionCertificates: [],
        scopes: [],
        validUntil: Date.now() - 1000,
        cacheDurationMs: 3600_000,
        signingKey: { privateKey: stale.key.privateKey, certificate: stale.key.certificate },
      });
      const { id } = await addUpstreamProvider(server.store, server.keys, {
        orgId: 1,
        type: 'saml',
        name: 'Stale IdP',
        saml: { entityId: stale.entityId, metadataXml: expired },
      });
      const inResponseTo = await started(id);
      const body = await refused(
        { SAMLResponse: forgeResponse(stale, { destination: acs, audience, inResponseTo }) },
        'stale',
      );
      assert.match(body, /Stale IdP/);
    });

    it('refuses unsolicited Responses and unknown InResponseTo', async () => {
      await refused({ SAMLResponse: forgeResponse(idp, await options({ inResponseTo: undefined })) }, 'unsolicited');
      await refused(
        { SAMLResponse: forgeResponse(idp, await options({ inResponseTo: 'uUnknownRequest000000000000000000' })) },
        'unknown',
      );
    });

    it('refuses a wrong audience, destination, an expired assertion', async () => {
      await refused(
        { SAMLResponse: forgeResponse(idp, await options({ audience: 'https://sp.other/sp' })) },
        'audience',
      );
      await refused(
        { SAMLResponse: forgeResponse(idp, await options({ destination: 'https://sp.other/acs' })) },
        'destination',
      );
      await refused({ SAMLResponse: forgeResponse(idp, await options({ now: Date.now() - 3600_000 })) }, 'expired');
    });

    it('refuses a DTD, signature wrapping, a refusal status, and garbage', async () => {
      const xml = forgeResponseXml(idp, await options());
      await refused({ SAMLResponse: b64(`<!DOCTYPE r [<!ENTITY x "y">]>${xml}`) }, 'dtd');
      const genuine = forgeResponseXml(idp, await options({ sign: 'assertion' }));
      for (const shape of ['sibling', 'inside-evil', 'extensions'] as const)
        await refused({ SAMLResponse: b64(wrapped(genuine, shape)) }, `wrapping ${shape}`);
      const denied = await refused(
        { SAMLResponse: forgeResponse(idp, await options({ status: STATUS.requestDenied })) },
        'denied',
      );
      assert.match(denied, /Uni IdP/, 'the page names the provider');
      await refused({ SAMLResponse: '%%%not base64' }, 'garbage');
      await refused({ SAMLResponse: b64('<a/>') }, 'not a Response');
      await refused({}, 'no SAMLResponse');
      await refused({ SAMLResponse: b64('<samlp:Response') }, 'not well-formed');
    });
  });
}
