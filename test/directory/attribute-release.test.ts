// The one table of what each attribute group releases, as OIDC claims and SAML attributes: the
// names the SAML tests and federations rely on, what a user's directory attributes become, and the
// table printed in docs/saml.md and docs/userinfo.md (both must show exactly this table).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ATTRIBUTE_RELEASE, claimNames, groupClaims, samlAttributes } from '../../src/directory/attribute-release.ts';
import { ATTRIBUTE_GROUPS } from '../../src/vocabulary.ts';
import type { User } from '../../src/store/directory.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** The table as the docs print it: one row per group. */
function releaseTable(): string {
  const names = claimNames({ claimsNamespace: '{claims_ns}' });
  const rows = ATTRIBUTE_GROUPS.map((group) => {
    const release = ATTRIBUTE_RELEASE[group];
    const claims =
      release
        .claims(names)
        .map((c) => `\`${c}\``)
        .join(', ') || '–';
    const saml = release.saml.map((a) => `${a.friendlyName} (\`${a.name}\`)`).join(', ') || '–';
    return `| \`${group}\` | ${claims} | ${saml} |`;
  });
  return [
    '| Group | OpenID Connect claims | SAML attributes (FriendlyName and name) |',
    '| --- | --- | --- |',
    ...rows,
  ].join('\n');
}

const user = {
  id: 1,
  sub: 'c0ffee00-1111-4222-8333-444455556666',
  eppn: 'ada@example.org',
  name: 'Ada Lovelace',
  display_name: 'Ada',
  email: 'ada@mail.example.org',
  given_name: 'Ada',
  family_name: 'Lovelace',
  affiliation: 'member faculty',
  primary_affiliation: 'faculty',
  org_unit: 'Mathematics',
  title: null,
  entitlement: 'urn:mace:example.org:library',
} as unknown as User;

describe('attribute release table', () => {
  it('releases the names the issue fixes for each group', () => {
    const names = (group: keyof typeof ATTRIBUTE_RELEASE) => ATTRIBUTE_RELEASE[group].saml.map((a) => a.name);
    assert.deepEqual(names('userid-idp'), [
      'urn:oid:1.3.6.1.4.1.5923.1.1.1.6',
      'urn:oasis:names:tc:SAML:attribute:subject-id',
      'urn:oid:1.3.6.1.4.1.5923.1.1.1.10',
    ]);
    assert.deepEqual(names('userinfo-name'), [
      'urn:oid:2.16.840.1.113730.3.1.241',
      'urn:oid:2.5.4.3',
      'urn:oid:2.5.4.42',
      'urn:oid:2.5.4.4',
    ]);
    assert.deepEqual(names('email'), ['urn:oid:0.9.2342.19200300.100.1.3']);
    for (const name of [
      'urn:oid:1.3.6.1.4.1.5923.1.1.1.1',
      'urn:oid:1.3.6.1.4.1.5923.1.1.1.9',
      'urn:oid:1.3.6.1.4.1.25178.1.2.9',
    ])
      assert.ok(names('groups-org').includes(name), name);
    assert.deepEqual(names('userinfo-entitlement'), ['urn:oid:1.3.6.1.4.1.5923.1.1.1.7']);
  });

  it('keeps the OIDC claims of each group as they were', () => {
    const claims = groupClaims({ claimsNamespace: 'https://idp.example.org/claims' });
    assert.deepEqual(claims.email, ['email', 'email_verified']);
    assert.deepEqual(claims['userinfo-name'], ['name']);
    assert.deepEqual(claims['userid-idp'], [
      'https://idp.example.org/claims/userid_sec',
      'idp-userid_sec',
      'connect-userid_sec',
      'https://idp.example.org/claims/eduPersonPrincipalName',
    ]);
  });

  it('fills SAML attributes from the directory attributes, scoped with the realm, each once', () => {
    const released = samlAttributes(user, ['groups-org', 'userinfo-affiliation', 'userid-idp'], {
      realm: 'example.org',
    });
    const byName = Object.fromEntries(released.map((a) => [a.friendlyName, a.values]));
    assert.deepEqual(byName.eduPersonScopedAffiliation, ['member@example.org', 'faculty@example.org']);
    assert.deepEqual(byName.schacHomeOrganization, ['example.org']);
    assert.deepEqual(byName['subject-id'], ['c0ffee00-1111-4222-8333-444455556666@example.org']);
    assert.deepEqual(byName.ou, ['Mathematics']);
    assert.equal(byName.title, undefined, 'no value, no attribute');
    assert.equal(released.filter((a) => a.friendlyName === 'eduPersonAffiliation').length, 1);
    assert.equal(byName.eduPersonTargetedID, undefined, 'only if requested, made by the SSO for the SP');
    assert.deepEqual(samlAttributes(user, [], { realm: 'example.org' }), []);
  });

  it('is printed in docs/saml.md and docs/userinfo.md as it is', () => {
    const table = releaseTable();
    for (const doc of ['docs/saml.md', 'docs/userinfo.md']) {
      assert.ok(readFileSync(join(ROOT, doc), 'utf8').includes(table), `${doc} shows the table:\n${table}`);
    }
  });
});
