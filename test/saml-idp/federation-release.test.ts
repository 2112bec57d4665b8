// What the SSO's attribute statement holds for an SP of a trusted federation: exactly what its
// entity categories release, of what its groups would give (src/saml-idp/subject.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSecretKey } from 'node:crypto';
import { releasedAttributes } from '../../src/saml-idp/subject.ts';
import {
  categoryAttributes,
  categoryGroups,
  SAML_ATTRIBUTE as A,
} from '../../src/service-providers/entity-categories.ts';
import type { ServiceProvider } from '../../src/service-providers/index.ts';
import type { User } from '../../src/store/directory.ts';

const key = createSecretKey(Buffer.alloc(32, 7));
const RS = 'http://refeds.org/category/research-and-scholarship';
const PSEUDONYMOUS = 'https://refeds.org/category/pseudonymous';
const ANONYMOUS = 'https://refeds.org/category/anonymous';
const ALL = ['research-and-scholarship', 'personalized', 'pseudonymous', 'anonymous'];

const user = {
  sub: 'abc123',
  eppn: 'ada@example.org',
  name: 'Ada Lovelace',
  display_name: 'Ada Lovelace',
  given_name: 'Ada',
  family_name: 'Lovelace',
  email: 'ada@example.org',
  affiliation: 'staff member',
  primary_affiliation: 'staff',
  org_unit: 'Mathematics',
  title: null,
  entitlement: null,
} as unknown as User;

function federationSp(
  categories: string[],
  subjectIdRequirement?: ServiceProvider['descriptor']['subjectIdRequirement'],
): ServiceProvider {
  const descriptor = {
    entityId: 'https://sp.example.edu/shibboleth',
    assertionConsumerServices: [],
    singleLogoutServices: [],
    signingCertificates: [],
    encryptionCertificates: [],
    encryptionMethods: [],
    authnRequestsSigned: false,
    wantAssertionsSigned: false,
    nameIdFormats: [],
    entityCategories: categories,
    entityCategorySupport: [],
    requestedAttributes: [],
    ...(subjectIdRequirement ? { subjectIdRequirement } : {}),
  };
  return {
    entityId: descriptor.entityId,
    clientId: 'saml-x',
    name: 'SP',
    groups: categoryGroups(descriptor, ALL),
    firstParty: false,
    nameId: 'transient',
    encrypt: 'auto',
    sign: 'assertion',
    allowUnsolicited: false,
    disabled: false,
    federationId: '1',
    descriptor,
    releasedAttributes: [...categoryAttributes(descriptor, ALL)],
    createdAt: 0,
    updatedAt: 0,
  };
}

const names = (sp: ServiceProvider) =>
  releasedAttributes(sp, sp.groups, user, key)
    .map((a) => a.name)
    .sort();

test('Research and Scholarship: ePPN, mail, names and the scoped affiliation; not cn, subject-id or eduPersonAffiliation', () => {
  assert.deepEqual(
    names(federationSp([RS])),
    [A.eduPersonPrincipalName, A.mail, A.displayName, A.givenName, A.sn, A.eduPersonScopedAffiliation].sort(),
  );
});

test('Pseudonymous: pairwise-id with the scoped affiliation and home organization, whatever subject-id:req says', () => {
  const expected = [A.pairwiseId, A.eduPersonScopedAffiliation, A.schacHomeOrganization].sort();
  assert.deepEqual(names(federationSp([PSEUDONYMOUS])), expected);
  assert.deepEqual(names(federationSp([PSEUDONYMOUS], 'subject-id')), expected);
  const pairwise = releasedAttributes(federationSp([PSEUDONYMOUS]), ['userid-idp', 'groups-org'], user, key).find(
    (a) => a.name === A.pairwiseId,
  );
  assert.match(pairwise!.values[0]!, /^[0-9a-f]{64}@example\.org$/);
});

test('Anonymous: the scoped affiliation and home organization only', () => {
  assert.deepEqual(names(federationSp([ANONYMOUS])), [A.eduPersonScopedAffiliation, A.schacHomeOrganization].sort());
});

test('no released category: nothing, even if groups were given', () => {
  const sp = { ...federationSp([]), groups: ['email', 'userinfo-name'] as ServiceProvider['groups'] };
  assert.deepEqual(names(sp), []);
});

test('a registered SP (no releasedAttributes) gets what its groups release', () => {
  const sp = {
    ...federationSp([]),
    federationId: null,
    groups: ['email', 'userinfo-name'] as ServiceProvider['groups'],
  };
  delete sp.releasedAttributes;
  assert.ok(names(sp).includes('urn:oid:2.5.4.3'));
});
