// Single sign-on for a service provider known only through a trusted federation's aggregate: its
// AuthnRequest is accepted and the browser sent to sign in for its (new) client, with the consent
// page (not first party) and the attribute groups of its entity categories; once the aggregate's
// validUntil has passed, or the federation is removed, it is an unknown issuer.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addFederation, removeFederation, type FederationSettings } from '../../src/service-providers/federations.ts';
import { serviceProviderClientId } from '../../src/service-providers/index.ts';
import { findClient } from '../../src/store/clients.ts';
import { dialects, seedOrg, startTestApp, type TestContext } from '../helpers.ts';
import { party } from '../saml/saml-fixtures.ts';
import { metadataServer, RS, signedAggregate, spEntity, type MetadataServer } from '../saml/federation-fixtures.ts';
import { authnRequestXml, getSso, redirectQuery } from './sso-fixtures.ts';

const WIKI = 'https://wiki.example.edu/shibboleth';
const ACS = 'https://wiki.example.edu/Shibboleth.sso/SAML2/POST';
const federation = await party('federation.example.org');
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
        signedAggregate(federation, { entities: [spEntity({ entityId: WIKI, categories: [RS] })] }),
      );
      ({ id } = await addFederation(ctx.store, settings, {
        url: `${server.url}/fed.xml`,
        certificate: federation.certificate,
        releases: ['research-and-scholarship'],
      }));
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

    it('once the federation is removed it is an unknown issuer, and its client is gone', async () => {
      await removeFederation(ctx.store, id);
      assert.equal((await getSso(ctx, request())).statusCode, 403);
      assert.equal(await findClient(ctx.store.db, serviceProviderClientId(WIKI)), undefined);
    });
  });
}
