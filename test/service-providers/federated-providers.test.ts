// Service providers of trusted federations through the registry's findServiceProvider: what they
// get (consent, NameID, signing, encryption, attribute groups and exactly the attributes of their
// entity categories), precedence of registered SPs, stale metadata, their clients, and MDQ.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, migratedDatabase, testConfig, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import {
  addFederation,
  federationSettings,
  removeFederation,
  updateFederation,
  type FederationSettings,
} from '../../src/service-providers/federations.ts';
import {
  ensureServiceProviderClient,
  findServiceProvider,
  findServiceProviderByClientId,
  addServiceProvider,
  serviceProviderClientId,
} from '../../src/service-providers/index.ts';
import { forgetMetadataQueryMisses, mdqUrl } from '../../src/service-providers/federated-providers.ts';
import {
  categoryAttributes,
  categoryGroups,
  categoryReleasesPairwiseId,
  restrictToCategories,
  SAML_ATTRIBUTE as A,
} from '../../src/service-providers/entity-categories.ts';
import { findClient } from '../../src/store/clients.ts';
import { party } from '../saml/saml-fixtures.ts';
import {
  ANONYMOUS,
  inDays,
  mdqPath,
  metadataServer,
  PERSONALIZED,
  PSEUDONYMOUS,
  RS,
  signedAggregate,
  signedEntity,
  spEntity,
  type MetadataServer,
} from '../saml/federation-fixtures.ts';

const LOCAL = { PUBLIC_URL: 'http://localhost:8080' };
const federation = await party('federation.example.org');
const attacker = await party('attacker.example.org');
const WIKI = 'https://wiki.example.edu/shibboleth';
const JOURNAL = 'https://journal.example.com/sp';
const PERSISTENT = 'https://persistent.example.edu/sp';
const LOCAL_SP = 'https://local.example.edu/sp';
const PERSISTENT_FORMAT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';

describe('entity categories', () => {
  const carrying = (...entityCategories: string[]) => ({ entityCategories });
  const all = ['research-and-scholarship', 'personalized', 'pseudonymous', 'anonymous'];

  it('release exactly what each category says', () => {
    assert.deepEqual(
      [...categoryAttributes(carrying(RS), all)].sort(),
      [A.eduPersonPrincipalName, A.mail, A.displayName, A.givenName, A.sn, A.eduPersonScopedAffiliation].sort(),
    );
    assert.deepEqual(
      [...categoryAttributes(carrying(PERSONALIZED), all)].sort(),
      [
        A.subjectId,
        A.mail,
        A.displayName,
        A.givenName,
        A.sn,
        A.eduPersonScopedAffiliation,
        A.schacHomeOrganization,
        A.eduPersonAssurance,
      ].sort(),
    );
    assert.deepEqual(
      [...categoryAttributes(carrying(PSEUDONYMOUS), all)].sort(),
      [A.pairwiseId, A.eduPersonScopedAffiliation, A.schacHomeOrganization, A.eduPersonAssurance].sort(),
    );
    assert.deepEqual(
      [...categoryAttributes(carrying(ANONYMOUS), all)].sort(),
      [A.eduPersonScopedAffiliation, A.schacHomeOrganization].sort(),
    );
    // pseudonymous and anonymous never carry a name, a mail address or a directed identifier
    for (const category of [PSEUDONYMOUS, ANONYMOUS]) {
      const released = categoryAttributes(carrying(category), all);
      for (const personal of [A.mail, A.displayName, A.givenName, A.sn, A.eduPersonPrincipalName, A.subjectId])
        assert.ok(!released.has(personal), `${category} releases ${personal}`);
    }
  });

  it('only for categories the federation released and the SP carries', () => {
    assert.deepEqual([...categoryAttributes(carrying(RS), [])], []);
    assert.deepEqual([...categoryAttributes(carrying(RS), ['personalized'])], []);
    assert.deepEqual([...categoryAttributes(carrying(), all)], []);
    assert.deepEqual([...categoryAttributes(carrying('https://example.org/category/other'), all)], []);
    assert.deepEqual(categoryGroups(carrying(RS), ['research-and-scholarship']), [
      'email',
      'groups-org',
      'userid-idp',
      'userinfo-name',
    ]);
    assert.deepEqual(categoryGroups(carrying(ANONYMOUS), ['anonymous']), ['groups-org']);
  });

  it("the SSO keeps only the attributes of a federation SP's categories", () => {
    // what the groups of an R&S SP release (userinfo-name also has cn; groups-org the affiliations and more)
    const fromGroups = [
      A.eduPersonPrincipalName,
      A.subjectId,
      A.mail,
      A.displayName,
      'urn:oid:2.5.4.3',
      A.givenName,
      A.sn,
      'urn:oid:1.3.6.1.4.1.5923.1.1.1.1',
      A.eduPersonScopedAffiliation,
      A.schacHomeOrganization,
    ].map((name) => ({ name }));
    const rs = { releasedAttributes: [...categoryAttributes(carrying(RS), all)] };
    assert.deepEqual(
      restrictToCategories(fromGroups, rs).map((a) => a.name),
      [A.eduPersonPrincipalName, A.mail, A.displayName, A.givenName, A.sn, A.eduPersonScopedAffiliation],
    );
    assert.equal(restrictToCategories(fromGroups, {}).length, fromGroups.length);
    assert.deepEqual(restrictToCategories(fromGroups, { releasedAttributes: [] }), []);
    assert.equal(
      categoryReleasesPairwiseId({ releasedAttributes: [...categoryAttributes(carrying(PSEUDONYMOUS), all)] }),
      true,
    );
    assert.equal(categoryReleasesPairwiseId(rs), false);
    assert.equal(categoryReleasesPairwiseId({}), false);
  });
});

for (const dialect of dialects()) {
  describe(`federated service providers (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    let server: MetadataServer;
    let settings: FederationSettings;
    let id: number;

    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      server = await metadataServer();
      settings = federationSettings(testConfig(db.url, LOCAL));
      server.documents.set(
        '/fed.xml',
        signedAggregate(federation, {
          entities: [
            spEntity({ entityId: WIKI, categories: [RS, PSEUDONYMOUS] }),
            spEntity({ entityId: JOURNAL }),
            spEntity({ entityId: PERSISTENT, nameIdFormats: [PERSISTENT_FORMAT], categories: [RS] }),
            spEntity({ entityId: LOCAL_SP, categories: [RS] }),
          ],
        }),
      );
      ({ id } = await addFederation(store, settings, {
        url: `${server.url}/fed.xml`,
        certificate: federation.certificate,
        releases: ['research-and-scholarship'],
        mdqUrl: `${server.url}/mdq`,
      }));
    });
    after(async () => {
      await store.close();
      await server.close();
      await db.drop();
    });

    it('an SP of the aggregate is a federation SP: consent, transient NameID, signed assertion, its categories', async () => {
      const sp = await findServiceProvider(store, WIKI);
      assert.ok(sp);
      assert.equal(sp.federationId, String(id));
      assert.equal(sp.firstParty, false);
      assert.equal(sp.nameId, 'transient');
      assert.equal(sp.encrypt, 'auto');
      assert.equal(sp.sign, 'assertion');
      assert.equal(sp.allowUnsolicited, false);
      assert.equal(sp.disabled, false);
      assert.equal(sp.clientId, serviceProviderClientId(WIKI));
      assert.deepEqual(sp.groups, ['email', 'groups-org', 'userid-idp', 'userinfo-name']);
      // research-and-scholarship was released for this federation; pseudonymous was not
      assert.deepEqual(
        [...sp.releasedAttributes!].sort(),
        [A.eduPersonPrincipalName, A.mail, A.displayName, A.givenName, A.sn, A.eduPersonScopedAffiliation].sort(),
      );
      assert.equal((await findServiceProviderByClientId(store, sp.clientId))?.entityId, WIKI);
    });

    it('an SP without a released category gets no attribute groups', async () => {
      const sp = await findServiceProvider(store, JOURNAL);
      assert.deepEqual([sp?.groups, sp?.releasedAttributes], [[], []]);
    });

    it('persistent NameID when the metadata lists it first', async () => {
      assert.equal((await findServiceProvider(store, PERSISTENT))?.nameId, 'persistent');
    });

    it('a registered SP takes precedence over the federation', async () => {
      const metadata = spEntity({ entityId: LOCAL_SP }).replace(
        '<md:EntityDescriptor ',
        '<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" ',
      );
      await addServiceProvider(store, { metadata, groups: ['email'], firstParty: true });
      const sp = await findServiceProvider(store, LOCAL_SP);
      assert.deepEqual([sp?.federationId, sp?.firstParty, sp?.releasedAttributes], [null, true, undefined]);
    });

    it('past the aggregate validUntil its SPs are not served', async () => {
      const row = await store.db.selectFrom('saml_federations').select('valid_until').executeTakeFirstOrThrow();
      await store.db
        .updateTable('saml_federation_entities')
        .set({ valid_until: Date.now() - 1 })
        .where('source', '=', 'aggregate')
        .execute();
      assert.equal(await findServiceProvider(store, JOURNAL), undefined);
      await store.db
        .updateTable('saml_federation_entities')
        .set({ valid_until: Number(row.valid_until) })
        .where('source', '=', 'aggregate')
        .execute();
      assert.ok(await findServiceProvider(store, JOURNAL));
    });

    it('MDQ: an entity not in the aggregate is asked for, verified and cached', async () => {
      const entityId = 'https://mdq-only.example.edu/sp';
      assert.equal(mdqUrl(`${server.url}/mdq`, entityId), `${server.url}/mdq${mdqPath(entityId)}`);
      assert.match(mdqPath(entityId), /^\/entities\/%7Bsha1%7D[0-9a-f]{40}$/);
      server.documents.set(
        `/mdq${mdqPath(entityId)}`,
        signedEntity(federation, { entityId, categories: [RS], cacheDuration: 'PT1H' }),
      );
      server.requests.length = 0;
      const sp = await findServiceProvider(store, entityId);
      assert.equal(sp?.federationId, String(id));
      assert.ok(sp?.releasedAttributes?.includes(A.mail));
      assert.equal(server.requests.length, 1);
      assert.equal(server.requests[0]!.path, `/mdq${mdqPath(entityId)}`);
      // served from the database now
      assert.ok(await findServiceProvider(store, entityId));
      assert.equal(server.requests.length, 1);
      const cached = await store.db
        .selectFrom('saml_federation_entities')
        .select(['source', 'valid_until'])
        .where('entity_id', '=', entityId)
        .executeTakeFirstOrThrow();
      assert.equal(cached.source, 'mdq');
      assert.ok(Number(cached.valid_until) <= Date.now() + 3600_000);
    });

    it('MDQ: once the aggregate is stale, an SP its metadata service answered is refused and none is asked for', async () => {
      const answered = 'https://mdq-only.example.edu/sp';
      const fresh = 'https://mdq-new.example.edu/sp';
      for (const entityId of [answered, fresh])
        server.documents.set(
          `/mdq${mdqPath(entityId)}`,
          signedEntity(federation, { entityId, categories: [RS], cacheDuration: 'PT1H' }),
        );
      assert.ok(await findServiceProvider(store, answered), 'answered by the metadata service');
      const row = await store.db
        .selectFrom('saml_federations')
        .select(['valid_until', 'state'])
        .executeTakeFirstOrThrow();
      // the aggregate's validUntil has passed; the MDQ answer's own (cacheDuration) has not
      await store.db
        .updateTable('saml_federations')
        .set({ valid_until: Date.now() - 1, state: 'stale' })
        .execute();
      try {
        forgetMetadataQueryMisses();
        server.requests.length = 0;
        assert.equal(await findServiceProvider(store, answered), undefined);
        assert.equal(await findServiceProvider(store, JOURNAL), undefined);
        assert.equal(await findServiceProvider(store, fresh), undefined);
        assert.deepEqual(server.requests, [], 'a stale federation’s metadata service is not asked');
      } finally {
        await store.db
          .updateTable('saml_federations')
          .set({ valid_until: Number(row.valid_until), state: row.state })
          .execute();
      }
      forgetMetadataQueryMisses();
      assert.ok(await findServiceProvider(store, answered));
      assert.equal((await findServiceProvider(store, fresh))?.entityId, fresh);
    });

    it("the federation's requireSignedRequests reaches its SPs, those of the aggregate and of MDQ", async () => {
      const answered = 'https://mdq-signed.example.edu/sp';
      server.documents.set(`/mdq${mdqPath(answered)}`, signedEntity(federation, { entityId: answered }));
      assert.equal((await findServiceProvider(store, WIKI))?.requireSignedRequests, false);
      await updateFederation(store, id, { requireSignedRequests: true });
      try {
        forgetMetadataQueryMisses();
        assert.equal((await findServiceProvider(store, WIKI))?.requireSignedRequests, true);
        assert.equal((await findServiceProvider(store, answered))?.requireSignedRequests, true);
        assert.equal(
          (await findServiceProviderByClientId(store, serviceProviderClientId(WIKI)))?.requireSignedRequests,
          true,
        );
      } finally {
        await updateFederation(store, id, { requireSignedRequests: false });
      }
      assert.equal((await findServiceProvider(store, answered))?.requireSignedRequests, false);
    });

    it('MDQ: an unknown entity is asked about once, then remembered as unknown', async () => {
      forgetMetadataQueryMisses();
      server.requests.length = 0;
      assert.equal(await findServiceProvider(store, 'https://unknown.example.edu/sp'), undefined);
      assert.equal(await findServiceProvider(store, 'https://unknown.example.edu/sp'), undefined);
      assert.equal(server.requests.length, 1);
    });

    it('MDQ: an answer the pinned certificate did not sign, or about another entity, is refused', async () => {
      forgetMetadataQueryMisses();
      const forged = 'https://forged.example.edu/sp';
      server.documents.set(`/mdq${mdqPath(forged)}`, signedEntity(attacker, { entityId: forged }));
      assert.equal(await findServiceProvider(store, forged), undefined);
      const swapped = 'https://swapped.example.edu/sp';
      server.documents.set(`/mdq${mdqPath(swapped)}`, signedEntity(federation, { entityId: WIKI }));
      assert.equal(await findServiceProvider(store, swapped), undefined);
      const expired = 'https://expired.example.edu/sp';
      server.documents.set(
        `/mdq${mdqPath(expired)}`,
        signedEntity(federation, { entityId: expired, validUntilDate: inDays(-1) }),
      );
      assert.equal(await findServiceProvider(store, expired), undefined);
      const rows = await store.db
        .selectFrom('saml_federation_entities')
        .select('entity_id')
        .where('entity_id', 'in', [forged, swapped, expired])
        .execute();
      assert.deepEqual(rows, []);
    });

    it('removing the federation removes the clients its SPs were paired with, not a registered one', async () => {
      const wiki = (await findServiceProvider(store, WIKI))!;
      await ensureServiceProviderClient(store, wiki);
      const client = await findClient(store.db, wiki.clientId);
      assert.equal(client?.first_party, 0);
      assert.equal(client?.groups, 'email groups-org userid-idp userinfo-name');
      await removeFederation(store, id);
      assert.equal(await findClient(store.db, wiki.clientId), undefined);
      assert.equal(await findServiceProvider(store, WIKI), undefined);
      assert.ok(await findClient(store.db, serviceProviderClientId(LOCAL_SP)));
      assert.equal((await findServiceProvider(store, LOCAL_SP))?.federationId, null);
    });
  });
}
