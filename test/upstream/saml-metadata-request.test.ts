// The IdP metadata reader (what it refuses), and the AuthnRequest: signed on both bindings (checked
// with the XML layer's own verifiers), valid against the protocol schema, ForceAuthn and
// RequestedAuthnContext only when asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildIdpMetadata, parseIdpMetadata, singleSignOnService, BINDING } from '../../src/saml/metadata/index.ts';
import {
  decodePostMessage,
  decodeRedirectMessage,
  parseRedirectQuery,
  validateSchema,
  verifyEnvelopedSignature,
  verifyRedirectSignature,
} from '../../src/saml/xml/index.ts';
import { buildAuthnRequest } from '../../src/upstream/saml-request.ts';
import { party } from '../saml/saml-fixtures.ts';
import { forgedIdp } from './saml-forge.ts';

test('IdP metadata: read into a descriptor; SP metadata, expired, unsigned-key and DTD documents refused', async () => {
  const idp = await forgedIdp();
  const d = idp.descriptor;
  assert.equal(d.entityId, idp.entityId);
  assert.equal(d.signingCertificates.length, 1);
  assert.deepEqual(d.scopes, ['uni.example']);
  assert.deepEqual(singleSignOnService(d, 'redirect').binding, 'redirect');
  assert.deepEqual(singleSignOnService(d, 'post').binding, 'post');
  const postOnly = { ...d, singleSignOnServices: d.singleSignOnServices.filter((e) => e.binding === BINDING.post) };
  assert.equal(singleSignOnService(postOnly, 'redirect').binding, 'post');

  const key = await party('k');
  const base = {
    entityId: 'https://idp.x.example/idp',
    ssoUrl: 'https://idp.x.example/sso',
    sloUrl: 'https://idp.x.example/slo',
    encryptionCertificates: [],
    scopes: [],
    cacheDurationMs: 3600_000,
    signingKey: { privateKey: key.privateKey, certificate: key.certificate },
  };
  const expired = buildIdpMetadata({ ...base, signingCertificates: [key.certificate], validUntil: Date.now() - 1000 });
  await assert.rejects(parseIdpMetadata(expired), /expired/);
  const keyless = buildIdpMetadata({ ...base, signingCertificates: [], validUntil: Date.now() + 3600_000 });
  await assert.rejects(parseIdpMetadata(keyless), /no signing certificate/);
  await assert.rejects(
    parseIdpMetadata(`<!DOCTYPE x>${idp.metadata.replace(/^<\?xml[^>]*>/, '')}`),
    /DTD|DOCTYPE|document type/i,
  );
  await assert.rejects(
    parseIdpMetadata('<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"/>'),
    /aggregate/,
  );
});

test('the AuthnRequest is signed on both bindings, schema-valid, and asks for more only when told', async () => {
  const idp = await forgedIdp();
  const sp = await party('sp');
  const common = {
    requestId: 'uRequest1',
    spEntityId: 'https://sp.example/saml2/sp/metadata',
    acsUrl: 'https://sp.example/saml2/sp/acs',
    idp: idp.descriptor,
    signingKey: { privateKey: sp.privateKey, certificate: sp.certificate },
    now: Date.now(),
  };
  const redirect = buildAuthnRequest({ ...common, binding: 'redirect', relayState: 'r1' });
  assert.equal(redirect.binding, 'redirect');
  const query = parseRedirectQuery(new URL(redirect.url).search.slice(1));
  assert.equal(verifyRedirectSignature(query, { keys: [sp.certificate] }), 0);
  const other = await party('other');
  assert.throws(() => verifyRedirectSignature(query, { keys: [other.certificate] }));
  const parsed = decodeRedirectMessage(query.message);
  await validateSchema(parsed, 'protocol');
  assert.equal(parsed.root.getAttribute('ID'), 'uRequest1');
  assert.equal(parsed.root.getAttribute('Destination'), 'https://idp.forged.example/sso');
  assert.equal(parsed.root.getAttribute('ForceAuthn'), null);
  assert.doesNotMatch(redirect.xml, /RequestedAuthnContext/);

  const post = buildAuthnRequest({
    ...common,
    binding: 'post',
    forceAuthn: true,
    authnContextClassRefs: ['https://refeds.org/profile/mfa'],
  });
  assert.equal(post.binding, 'post');
  if (post.binding !== 'post') return;
  const posted = decodePostMessage(post.form.SAMLRequest!);
  await validateSchema(posted, 'protocol');
  const verified = verifyEnvelopedSignature(posted, posted.root, { keys: [sp.certificate] });
  assert.equal(verified.element.getAttribute('ForceAuthn'), 'true');
  assert.match(
    post.xml,
    /<samlp:RequestedAuthnContext Comparison="exact"><saml:AuthnContextClassRef>https:\/\/refeds.org\/profile\/mfa</,
  );
});
