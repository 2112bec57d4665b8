// Single sign-on for a service provider known only through a trusted federation's aggregate: its
// AuthnRequest is accepted and the browser sent to sign in for its (new) client, with the consent
// page (not first party) and the attribute groups of its entity categories; once the aggregate's
// validUntil has passed, or the federation is removed, it is an unknown issuer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  addFederation,
  removeFederation,
  updateFederation,
  type FederationSettings,
} from '../../src/service-providers/federations.ts';
import { serviceProviderClientId } from '../../src/service-providers/index.ts';
import { findClient } from '../../src/store/clients.ts';
import { dialects, seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import { party } from '../saml/saml-fixtures.ts';
import { metadataServer, RS, signedAggregate, spEntity, type MetadataServer } from '../saml/federation-fixtures.ts';
import { authnRequestXml, getSso, postSso, redirectQuery, signedXml } from './sso-fixtures.ts';

const WIKI = 'https://wiki.example.edu/shibboleth';
const ACS = 'https://wiki.example.edu/Shibboleth.sso/SAML2/POST';
/** says AuthnRequestsSigned in the federation's metadata */
const SIGNER = 'https://signer.example.edu/shibboleth';
const SIGNER_ACS = 'https://signer.example.edu/Shibboleth.sso/SAML2/POST';
/** of a second federation, added with requireSignedRequests */
const STRICT = 'https://strict.example.net/sp';
const STRICT_ACS = 'https://strict.example.net/Shibboleth.sso/SAML2/POST';
const federation = await party('federation.example.org');
const wikiKey = await party('wiki.example.edu');
const signerKey = await party('signer.example.edu');
const strictKey = await party('strict.example.net');
const settings: FederationSettings = {
  fetch: { development: true },
  maxAggregateBytes: 10 * 1024 * 1024,
  timeoutMs: 10_000,
  isolateAboveBytes: 10 * 1024 * 1024,
};

for (const dialect of dialects()) {
  describe(`SAML single sign-on for a federation's service provider (${dialect})`, () => {
    let ctx: TestContext;
    let server: MetadataServer;
    let id: number;
    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      server = await metadataServer();
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [
            spEntity({ entityId: WIKI, categories: [RS], certificate: wikiKey.certificate }),
            spEntity({ entityId: SIGNER, certificate: signerKey.certificate, authnRequestsSigned: true }),
          ],
        }),
      );
      ({ id } = await addFederation(ctx.store, settings, {
        url: `${server.url}/fed.xml`,
        certificate: federation.certificate,
        releases: ['research-and-scholarship'],
      }));
      server.documents.set(
        '/strict.xml',
        signedAggregate(federation, { entities: [spEntity({ entityId: STRICT, certificate: strictKey.certificate })] }),
      );
      await addFederation(ctx.store, settings, {
        url: `${server.url}/strict.xml`,
        certificate: federation.certificate,
        requireSignedRequests: true,
      });
    });
    after(async () => {
      await ctx?.close();
      await server?.close();
    });

    const request = () => redirectQuery(authnRequestXml(ctx, { issuer: WIKI, acsUrl: ACS }));

    it('is accepted: sign in for its client, with the groups of its categories, and the client is not first party', async () => {
      const res = await getSso(ctx, request());
      assert.equal(res.statusCode, 303, res.body.slice(0, 300));
      const params = new URL(String(res.headers.location), 'http://x').searchParams;
      assert.equal(params.get('client_id'), serviceProviderClientId(WIKI));
      assert.deepEqual(params.get('scope')!.split(' ').sort(), [
        'email',
        'groups-org',
        'openid',
        'userid-idp',
        'userinfo-name',
      ]);
      const client = await findClient(ctx.store.db, serviceProviderClientId(WIKI));
      assert.equal(client?.protocol, 'saml');
      assert.equal(client?.first_party, 0);
    });

    it('a return address the federation metadata does not list is refused', async () => {
      const res = await getSso(
        ctx,
        redirectQuery(authnRequestXml(ctx, { issuer: WIKI, acsUrl: 'https://evil.example.net/acs' })),
      );
      assert.equal(res.statusCode, 400);
      assert.ok(!res.body.includes('SAMLResponse'));
    });

    it('past the aggregate validUntil it is an unknown issuer', async () => {
      const saved = await ctx.store.db
        .selectFrom('saml_federation_entities')
        .select('valid_until')
        .executeTakeFirstOrThrow();
      await ctx.store.db
        .updateTable('saml_federation_entities')
        .set({ valid_until: Date.now() - 1 })
        .execute();
      try {
        assert.equal((await getSso(ctx, request())).statusCode, 403);
      } finally {
        await ctx.store.db
          .updateTable('saml_federation_entities')
          .set({ valid_until: Number(saved.valid_until) })
          .execute();
      }
      assert.equal((await getSso(ctx, request())).statusCode, 303);
    });

    /** The status of an unsigned and a signed request on each binding: 303 accepted, 400 refused. */
    const bindings = async (issuer: string, acsUrl: string, signer: typeof wikiKey) => {
      const xml = () => authnRequestXml(ctx, { issuer, acsUrl });
      return {
        unsignedRedirect: (await getSso(ctx, redirectQuery(xml()))).statusCode,
        unsignedPost: (await postSso(ctx, xml())).statusCode,
        signedRedirect: (await getSso(ctx, redirectQuery(xml(), signer))).statusCode,
        signedPost: (await postSso(ctx, signedXml(xml(), signer))).statusCode,
      };
    };
    const refusedUnsigned = { unsignedRedirect: 400, unsignedPost: 400, signedRedirect: 303, signedPost: 303 };
    const acceptedAll = { unsignedRedirect: 303, unsignedPost: 303, signedRedirect: 303, signedPost: 303 };

    it('an SP whose federation metadata says AuthnRequestsSigned gets unsigned requests refused on both bindings', async () => {
      assert.deepEqual(await bindings(SIGNER, SIGNER_ACS, signerKey), refusedUnsigned);
      assert.deepEqual(await bindings(WIKI, ACS, wikiKey), acceptedAll, 'the other SP signs when it likes');
    });

    it('a federation added with requireSignedRequests refuses its SPs’ unsigned requests on both bindings', async () => {
      assert.deepEqual(await bindings(STRICT, STRICT_ACS, strictKey), refusedUnsigned);
      // a request signed by another key is no signed request of the SP
      const forged = await getSso(
        ctx,
        redirectQuery(authnRequestXml(ctx, { issuer: STRICT, acsUrl: STRICT_ACS }), wikiKey),
      );
      assert.equal(forged.statusCode, 400);
    });

    it('updating a federation to require signed requests applies to every SP it holds at once, and back', async () => {
      const view = await updateFederation(ctx.store, id, { requireSignedRequests: true });
      assert.equal(view.require_signed_requests, true);
      try {
        assert.deepEqual(await bindings(WIKI, ACS, wikiKey), refusedUnsigned);
      } finally {
        await updateFederation(ctx.store, id, { requireSignedRequests: false });
      }
      assert.deepEqual(await bindings(WIKI, ACS, wikiKey), acceptedAll);
      assert.deepEqual(await bindings(SIGNER, SIGNER_ACS, signerKey), refusedUnsigned, 'its metadata still says so');
    });

    it('once the federation is removed it is an unknown issuer, and its client is gone', async () => {
      await removeFederation(ctx.store, id);
      assert.equal((await getSso(ctx, request())).statusCode, 403);
      assert.equal(await findClient(ctx.store.db, serviceProviderClientId(WIKI)), undefined);
    });
  });
}
