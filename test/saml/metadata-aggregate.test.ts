// A federation's signed aggregate and MDQ answers: nothing is used unless the root's enveloped
// signature verifies with the pinned certificate and its validUntil is present and bounded; only
// the verified element is read, so wrapped, moved or added content never counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DOMParser, XMLSerializer } from '@xmldom/xmldom';
import {
  serviceProviderElements,
  verifySignedMetadata,
  parseDuration,
  verifyAggregate,
  verifyEntityAnswer,
  type TrustOptions,
} from '../../src/saml/metadata/aggregate.ts';
import { XmlSecurityError } from '../../src/saml/xml/index.ts';
import { parseIdpMetadata } from '../../src/saml/metadata/index.ts';
import { verifyAggregateIsolated } from '../../src/service-providers/aggregate-process.ts';
import { party } from './saml-fixtures.ts';
import {
  aggregateXml,
  idpEntity,
  inDays,
  MD,
  RS,
  signedAggregate,
  signedEntity,
  signRoot,
  spEntity,
} from './federation-fixtures.ts';

const federation = await party('federation.example.org');
const other = await party('attacker.example.org');
const DAY = 86_400_000;
const trust = (over: Partial<TrustOptions> = {}): TrustOptions => ({
  certificates: [federation.certificate],
  maxValidityMs: 14 * DAY,
  ...over,
});

const members = [
  spEntity({ entityId: 'https://wiki.example.edu/shibboleth', categories: [RS] }),
  idpEntity('https://idp.other.example.edu/idp'),
  spEntity({ entityId: 'https://journal.example.com/sp' }),
];

function refusedWith(reason: string) {
  return (err: unknown) => {
    assert.ok(err instanceof XmlSecurityError, String(err));
    assert.equal(err.reason, reason, err.message);
    return true;
  };
}

test('a signed aggregate verifies and hands out its SP entities (IdPs left out), with categories', () => {
  const xml = signedAggregate(federation, { entities: members });
  const verified = verifySignedMetadata(xml, 'EntitiesDescriptor', trust());
  const { entities } = serviceProviderElements(verified);
  assert.deepEqual(
    entities.map((e) => e.entityId),
    ['https://wiki.example.edu/shibboleth', 'https://journal.example.com/sp'],
  );
  assert.ok(Math.abs(verified.validUntil - inDays(7).getTime()) < 5000);
});

test('the same aggregate from bytes (a Buffer) verifies too', () => {
  const xml = signedAggregate(federation, { entities: members });
  assert.doesNotThrow(() => verifySignedMetadata(Buffer.from(xml), 'EntitiesDescriptor', trust()));
});

test('an entity changed after signing is refused', () => {
  const xml = signedAggregate(federation, { entities: members });
  const tampered = xml.replace('https://journal.example.com/Shibboleth.sso', 'https://evil.example.net/Shibboleth.sso');
  assert.notEqual(tampered, xml);
  assert.throws(() => verifySignedMetadata(tampered, 'EntitiesDescriptor', trust()), refusedWith('signature-invalid'));
});

test('an entity added after signing is refused', () => {
  const xml = signedAggregate(federation, { entities: members });
  const added = xml.replace(
    '</md:EntitiesDescriptor>',
    spEntity({ entityId: 'https://evil.example.net/sp' }) + '</md:EntitiesDescriptor>',
  );
  assert.throws(() => verifySignedMetadata(added, 'EntitiesDescriptor', trust()), refusedWith('signature-invalid'));
});

test('an aggregate signed by another key is refused, whatever certificate its KeyInfo carries', () => {
  const xml = signedAggregate(other, { entities: members });
  assert.ok(xml.includes('X509Certificate'));
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), refusedWith('signature-invalid'));
  // the attacker's key verifies it: the refusal above is the pinned certificate's doing
  assert.doesNotThrow(() =>
    verifySignedMetadata(xml, 'EntitiesDescriptor', trust({ certificates: [other.certificate] })),
  );
});

test('an unsigned aggregate is refused', () => {
  const xml = aggregateXml({ entities: members, validUntil: inDays(7) });
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), refusedWith('signature-missing'));
});

test('validUntil is required', () => {
  const xml = signRoot(aggregateXml({ entities: members }), federation);
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), /no validUntil/);
});

test('an expired aggregate is refused', () => {
  const xml = signedAggregate(federation, { entities: members, validUntil: new Date(Date.now() - 60_000) });
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), /expired/);
});

test('an aggregate valid for longer than the maximum validity is refused', () => {
  const xml = signedAggregate(federation, { entities: members, validUntil: inDays(30) });
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), /further away/);
  assert.doesNotThrow(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust({ maxValidityMs: 31 * DAY })));
});

test('a validUntil without a time zone is refused rather than read in local time', () => {
  const local = new Date(Date.now() + DAY).toISOString().replace('Z', '');
  const xml = signRoot(aggregateXml({ entities: members }).replace('Name=', `validUntil="${local}" Name=`), federation);
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), /not a date and time/);
});

test('wrapping: the signed root moved into an unsigned wrapper with other entities is refused', () => {
  const signed = signedAggregate(federation, { entities: members });
  const inner = signed.replace(/^<\?xml[^>]*\?>/, '');
  const wrapper =
    `<md:EntitiesDescriptor xmlns:md="${MD}" ID="_wrap" validUntil="${inDays(7).toISOString()}">` +
    spEntity({ entityId: 'https://evil.example.net/sp' }) +
    inner +
    `</md:EntitiesDescriptor>`;
  assert.throws(() => verifySignedMetadata(wrapper, 'EntitiesDescriptor', trust()), refusedWith('signature-missing'));
});

test('wrapping: the signature moved to a wrapper that references the original root is refused', () => {
  const signed = signedAggregate(federation, { entities: members });
  const document = new DOMParser().parseFromString(signed, 'text/xml');
  const root = document.documentElement!;
  const signature = root.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'Signature')[0]!;
  root.removeChild(signature);
  const wrapper = document.createElementNS(MD, 'md:EntitiesDescriptor');
  wrapper.setAttribute('ID', '_evil');
  wrapper.setAttribute('validUntil', inDays(7).toISOString());
  wrapper.appendChild(signature);
  wrapper.appendChild(
    document.importNode(
      new DOMParser().parseFromString(
        aggregateXml({ entities: [spEntity({ entityId: 'https://evil.example.net/sp' })], id: '_x' }),
        'text/xml',
      ).documentElement!.firstChild!,
      true,
    ),
  );
  wrapper.appendChild(root.cloneNode(true));
  const xml = new XMLSerializer().serializeToString(wrapper);
  assert.throws(() => verifySignedMetadata(xml, 'EntitiesDescriptor', trust()), XmlSecurityError);
});

test('wrapping: a second EntitiesDescriptor beside the signed one, or a second root, is refused', () => {
  const signed = signedAggregate(federation, { entities: members }).replace(/^<\?xml[^>]*\?>/, '');
  const second = aggregateXml({
    entities: [spEntity({ entityId: 'https://evil.example.net/sp' })],
    id: '_two',
    validUntil: inDays(7),
  });
  assert.throws(() => verifySignedMetadata(signed + second, 'EntitiesDescriptor', trust()), XmlSecurityError);
  // a nested unsigned EntitiesDescriptor added inside the signed one breaks the digest
  const nested = signed.replace(
    '</md:EntitiesDescriptor>',
    second.replace(` xmlns:md="${MD}"`, '') + '</md:EntitiesDescriptor>',
  );
  assert.throws(() => verifySignedMetadata(nested, 'EntitiesDescriptor', trust()), refusedWith('signature-invalid'));
});

test('wrapping: a copy of an entity with the same ID elsewhere in the document is refused', () => {
  const signed = signedAggregate(federation, { entities: members });
  const duplicated = signed.replace('</md:EntitiesDescriptor>', '<md:Extensions ID="_agg1"/></md:EntitiesDescriptor>');
  assert.throws(() => verifySignedMetadata(duplicated, 'EntitiesDescriptor', trust()), XmlSecurityError);
});

test('a DOCTYPE is refused before parsing', () => {
  const signed = signedAggregate(federation, { entities: members });
  const withDtd = signed.replace(/^(<\?xml[^>]*\?>)?/, '<!DOCTYPE md:EntitiesDescriptor [<!ENTITY x "y">]>');
  assert.throws(() => verifySignedMetadata(withDtd, 'EntitiesDescriptor', trust()), refusedWith('forbidden-construct'));
});

test('the size cap is enforced before parsing', () => {
  const signed = signedAggregate(federation, { entities: members });
  assert.throws(
    () => verifySignedMetadata(signed, 'EntitiesDescriptor', trust({ maxBytes: 1000 })),
    refusedWith('too-large'),
  );
});

test('a document that is not an EntitiesDescriptor is refused as an aggregate', () => {
  const entity = signedEntity(federation, { entityId: 'https://wiki.example.edu/shibboleth' });
  assert.throws(() => verifySignedMetadata(entity, 'EntitiesDescriptor', trust()), /not SAML metadata/);
  assert.doesNotThrow(() => verifySignedMetadata(entity, 'EntityDescriptor', trust()));
});

test('entities past their own validUntil are left out; duplicates count once', () => {
  const xml = signedAggregate(federation, {
    entities: [
      spEntity({ entityId: 'https://old.example.edu/sp', validUntil: new Date(Date.now() - 1000).toISOString() }),
      spEntity({ entityId: 'https://twice.example.edu/sp', categories: [RS] }),
      spEntity({ entityId: 'https://twice.example.edu/sp' }),
    ],
  });
  const { entities, expired, duplicates } = serviceProviderElements(
    verifySignedMetadata(xml, 'EntitiesDescriptor', trust()),
  );
  assert.deepEqual(
    entities.map((e) => e.entityId),
    ['https://twice.example.edu/sp'],
  );
  assert.equal(expired, 1);
  assert.equal(duplicates, 1);
});

test('categories given by an enclosing EntitiesDescriptor are inherited', () => {
  const group =
    `<md:EntitiesDescriptor Name="group"><md:Extensions><mdattr:EntityAttributes xmlns:mdattr="urn:oasis:names:tc:SAML:metadata:attribute">` +
    `<saml:Attribute xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" Name="http://macedir.org/entity-category"><saml:AttributeValue>${RS}</saml:AttributeValue></saml:Attribute>` +
    `</mdattr:EntityAttributes></md:Extensions>${spEntity({ entityId: 'https://nested.example.edu/sp' })}</md:EntitiesDescriptor>`;
  const xml = signedAggregate(federation, { entities: [group] });
  const { entities } = serviceProviderElements(verifySignedMetadata(xml, 'EntitiesDescriptor', trust()));
  assert.deepEqual(
    entities.map((e) => [e.entityId, e.inheritedCategories]),
    [['https://nested.example.edu/sp', [RS]]],
  );
});

test('cacheDuration is read as an xs:duration', () => {
  assert.equal(parseDuration('PT6H'), 6 * 3600_000);
  assert.equal(parseDuration('P1DT30M'), DAY + 30 * 60_000);
  assert.equal(parseDuration('P'), undefined);
  assert.equal(parseDuration('6 hours'), undefined);
  const entity = signedEntity(federation, { entityId: 'https://wiki.example.edu/shibboleth', cacheDuration: 'PT1H' });
  assert.equal(verifySignedMetadata(entity, 'EntityDescriptor', trust()).cacheDurationMs, 3600_000);
});

test('verifyAggregate reads each SP with spDescriptorOf and leaves out a member it cannot serve', () => {
  const broken = spEntity({ entityId: 'https://broken.example.edu/sp' }).replace(
    'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST',
    'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Artifact',
  );
  const xml = signedAggregate(federation, { entities: [...members, broken], name: 'urn:mace:example:fed' });
  const aggregate = verifyAggregate(xml, trust());
  assert.equal(aggregate.name, 'urn:mace:example:fed');
  assert.deepEqual(
    aggregate.entities.map((e) => [e.descriptor.entityId, e.descriptor.entityCategories]),
    [
      ['https://wiki.example.edu/shibboleth', [RS]],
      ['https://journal.example.com/sp', []],
    ],
  );
  assert.equal(
    aggregate.entities[0]!.descriptor.assertionConsumerServices[0]!.location,
    'https://wiki.example.edu/Shibboleth.sso/SAML2/POST',
  );
  assert.deepEqual(
    aggregate.skipped.map((s) => s.entityId),
    ['https://broken.example.edu/sp'],
  );
  assert.match(aggregate.skipped[0]!.reason, /HTTP-POST/);
});

test('an MDQ answer verifies, describes the entity asked for, and is cached no longer than it says', () => {
  const now = Date.now();
  const answer = signedEntity(federation, {
    entityId: 'https://wiki.example.edu/shibboleth',
    categories: [RS],
    cacheDuration: 'PT1H',
  });
  const entity = verifyEntityAnswer(answer, 'https://wiki.example.edu/shibboleth', trust({ now }));
  assert.deepEqual(entity.descriptor.entityCategories, [RS]);
  assert.equal(entity.cacheUntil, now + 3600_000);
  assert.throws(
    () => verifyEntityAnswer(answer, 'https://other.example.edu/sp', trust({ now })),
    /does not describe https:\/\/other.example.edu\/sp/,
  );
  const forged = signedEntity(other, { entityId: 'https://wiki.example.edu/shibboleth' });
  assert.throws(
    () => verifyEntityAnswer(forged, 'https://wiki.example.edu/shibboleth', trust()),
    refusedWith('signature-invalid'),
  );
  const unbounded = signedEntity(federation, {
    entityId: 'https://wiki.example.edu/shibboleth',
    validUntilDate: inDays(60),
  });
  assert.throws(() => verifyEntityAnswer(unbounded, 'https://wiki.example.edu/shibboleth', trust()), /further away/);
});

test('an identity provider asked for is copied out as a document of its own, read as --metadata is; or refused with why', async () => {
  const IDP = 'https://idp.member.example.edu/idp';
  const bare = federation.certificate.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
  const idp =
    `<md:EntityDescriptor entityID="${IDP}"><md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
    `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${bare}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
    `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${IDP}/sso"/>` +
    `</md:IDPSSODescriptor></md:EntityDescriptor>`;
  // ds declared by the enclosing group only, which also shortens the validity to three days
  const groupUntil = inDays(3);
  const group = `<md:EntitiesDescriptor xmlns:ds="http://www.w3.org/2000/09/xmldsig#" Name="group" validUntil="${groupUntil.toISOString()}">${idp}</md:EntitiesDescriptor>`;
  const xml = signedAggregate(federation, { entities: [...members, group] });
  const wanted = [
    IDP,
    'https://absent.example.edu/idp',
    'https://wiki.example.edu/shibboleth',
    'https://idp.other.example.edu/idp',
  ];
  for (const aggregate of [
    verifyAggregate(xml, { ...trust(), identityProviders: wanted }),
    // the same through the child process large aggregates are verified in
    await verifyAggregateIsolated(Buffer.from(xml), { ...trust(), identityProviders: wanted }, 0),
  ]) {
    const [copy, absent, sp, keyless] = aggregate.identityProviders;
    assert.ok(copy && 'metadataXml' in copy, JSON.stringify(copy));
    assert.match(copy.metadataXml, /^<md:EntityDescriptor [^>]*xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/);
    const read = await parseIdpMetadata(copy.metadataXml);
    assert.equal(read.entityId, IDP);
    assert.equal(read.signingCertificates.length, 1);
    assert.equal(read.validUntil, Math.floor(groupUntil.getTime() / 1000) * 1000, 'the group validUntil');
    assert.equal(copy.validUntil, read.validUntil);
    assert.match('refused' in absent! ? absent.refused : '', /is not in the federation's metadata/);
    assert.match('refused' in sp! ? sp.refused : '', /has no IDPSSODescriptor for SAML 2\.0/);
    assert.match('refused' in keyless! ? keyless.refused : '', /publishes no signing certificate/);
  }
  // none asked for: none copied
  assert.deepEqual(verifyAggregate(xml, trust()).identityProviders, []);
});
