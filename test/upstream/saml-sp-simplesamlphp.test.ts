// The SAML service-provider primitives against a real identity provider: Debian's SimpleSAMLphp
// reads the SP metadata we build, verifies our signed AuthnRequests (HTTP-Redirect and HTTP-POST,
// it is configured to require signed requests), and its Responses (signed, or with the assertion
// encrypted to our key) pass validateSamlResponse into the UpstreamAssertion of the contract.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { parseIdpMetadata, buildSpMetadata, parseSpMetadata } from '../../src/saml/metadata/index.ts';
import { buildAuthnRequest } from '../../src/upstream/saml-request.ts';
import {
  receiveSamlResponse,
  validateSamlResponse,
  UpstreamSamlError,
  type SamlUpstream,
} from '../../src/upstream/saml-response.ts';
import { XmlSecurityError } from '../../src/saml/xml/index.ts';
import { party, type Party } from '../saml/saml-fixtures.ts';
import { signInAtSsp, simpleSamlPhpMissing, startSimpleSamlPhp, type SimpleSamlPhp } from './simplesamlphp.ts';

const skip = simpleSamlPhpMissing();
const SP = 'http://localhost:8999/saml2/sp/metadata';
const ACS = 'http://localhost:8999/saml2/sp/acs';

let signing: Party;
let encryption: Party;
let spMetadata: string;
const idps: SimpleSamlPhp[] = [];

before(async () => {
  if (skip) return;
  signing = await party('sp signing');
  encryption = await party('sp encryption');
  spMetadata = buildSpMetadata({
    entityId: SP,
    acsUrl: ACS,
    signingCertificates: [signing.certificate],
    encryptionCertificates: [encryption.certificate],
    displayName: 'Test service',
    validUntil: Date.now() + 86400_000,
    cacheDurationMs: 3600_000,
    signingKey: { privateKey: signing.privateKey, certificate: signing.certificate },
  });
});

after(async () => {
  for (const idp of idps) await idp.stop();
});

/** An in-memory stand-in for the in-flight request table and the assertion cache. */
function memoryOnce(requests: Set<string>) {
  const seen = new Set<string>();
  return {
    consumeRequest: async (id: string) => requests.delete(id),
    firstUse: async (key: string) => (seen.has(key) ? false : (seen.add(key), true)),
  };
}

async function signIn(
  idp: SimpleSamlPhp,
  binding: 'redirect' | 'post',
  user = { username: 'ada', password: 'ada-pass-123' },
) {
  const descriptor = await parseIdpMetadata(await idp.metadata());
  const requestId = `u${Math.random().toString(36).slice(2)}x`;
  const outgoing = buildAuthnRequest({
    requestId,
    spEntityId: SP,
    acsUrl: ACS,
    idp: descriptor,
    binding,
    signingKey: { privateKey: signing.privateKey, certificate: signing.certificate },
    now: Date.now(),
  });
  const answer = await signInAtSsp(
    outgoing.binding === 'post' ? { url: outgoing.url, form: outgoing.form } : { url: outgoing.url },
    user,
  );
  return { descriptor, requestId, answer };
}

test('the SP metadata we build is valid SAML metadata with our ACS and both keys', { skip }, async () => {
  const read = await parseSpMetadata(spMetadata);
  assert.equal(read.entityId, SP);
  assert.equal(read.assertionConsumerServices[0]!.location, ACS);
  assert.equal(read.authnRequestsSigned, true);
  assert.equal(read.wantAssertionsSigned, true);
  assert.equal(read.signingCertificates.length, 1);
  assert.equal(read.encryptionCertificates.length, 1);
  assert.equal(read.subjectIdRequirement, 'any');
});

for (const binding of ['redirect', 'post'] as const) {
  test(
    `a sign-in at SimpleSAMLphp with a signed AuthnRequest (${binding}) gives the UpstreamAssertion`,
    { skip },
    async () => {
      const idp = await startSimpleSamlPhp({ spMetadata });
      idps.push(idp);
      const { descriptor, requestId, answer } = await signIn(idp, binding);
      assert.equal(answer.action, ACS);
      const received = await receiveSamlResponse(answer.fields);
      assert.equal(received.issuer, idp.entityId);
      const upstream: SamlUpstream = {
        providerId: 'p1',
        idp: descriptor,
        mappings: {},
        emailVerified: false,
        requireEncryption: false,
      };
      const requests = new Set([requestId]);
      const once = memoryOnce(requests);
      const sp = { spEntityId: SP, acsUrl: ACS, decryptionKeys: [encryption.privateKey], now: Date.now() };
      const result = await validateSamlResponse(received, upstream, sp, once);
      assert.equal(result.requestId, requestId);
      assert.equal(result.encrypted, false);
      const a = result.assertion;
      assert.equal(a.providerId, 'p1');
      assert.match(a.subject, /^[0-9a-f]{40}$/, 'the persistent NameID SimpleSAMLphp derives from uid');
      assert.equal(a.attributes.eppn, 'ada@uni.example');
      assert.equal(a.attributes.email, 'ada@uni.example');
      assert.equal(a.attributes.email_verified, 'false');
      assert.equal(a.attributes.given_name, 'Ada');
      assert.equal(a.attributes.family_name, 'Lovelace');
      assert.equal(a.attributes.name, 'Ada Lovelace');
      assert.deepEqual(a.attributes.affiliation, ['member', 'staff']);
      assert.equal(a.acr, 'urn:oasis:names:tc:SAML:2.0:ac:classes:Password');
      assert.deepEqual(a.amr, ['pwd']);
      // the same Response again: the request is consumed
      await assert.rejects(
        validateSamlResponse(await receiveSamlResponse(answer.fields), upstream, sp, once),
        (err: unknown) => err instanceof UpstreamSamlError && err.reason === 'request',
      );
      // and with the request somehow live again, the assertion ID is remembered
      requests.add(requestId);
      await assert.rejects(
        validateSamlResponse(await receiveSamlResponse(answer.fields), upstream, sp, once),
        (err: unknown) => err instanceof UpstreamSamlError && err.reason === 'replayed',
      );
    },
  );
}

test(
  'an encrypted assertion is decrypted with the SP key; a provider that requires encryption refuses plain ones',
  { skip },
  async () => {
    // SimpleSAMLphp 1.19 encrypts with AES-128-CBC: accepted because the Response's signature covers it
    const encrypting = await startSimpleSamlPhp({ spMetadata, encryptAssertions: true });
    const plain = await startSimpleSamlPhp({ spMetadata });
    idps.push(encrypting, plain);
    const sp = { spEntityId: SP, acsUrl: ACS, decryptionKeys: [encryption.privateKey], now: Date.now() };
    {
      const { descriptor, requestId, answer } = await signIn(encrypting, 'redirect', {
        username: 'grace',
        password: 'grace-pass-123',
      });
      assert.match(Buffer.from(answer.fields.SAMLResponse!, 'base64').toString(), /EncryptedAssertion/);
      const upstream = {
        providerId: 'p2',
        idp: descriptor,
        mappings: { external_id: 'urn:oid:0.9.2342.19200300.100.1.1' },
        emailVerified: true,
        requireEncryption: true,
      };
      const result = await validateSamlResponse(
        await receiveSamlResponse(answer.fields),
        upstream,
        sp,
        memoryOnce(new Set([requestId])),
      );
      assert.equal(result.encrypted, true);
      assert.equal(result.assertion.attributes.eppn, 'grace@uni.example');
      assert.equal(result.assertion.attributes.email_verified, 'true');
      assert.equal(result.assertion.attributes.external_id, 'grace');
      // without our key, nothing
      const other = await party('other');
      await assert.rejects(
        validateSamlResponse(
          await receiveSamlResponse(answer.fields),
          upstream,
          { ...sp, decryptionKeys: [other.privateKey] },
          memoryOnce(new Set([requestId])),
        ),
        /decrypted/,
      );
    }
    {
      // the same, but only the assertion inside is signed: AES-CBC ciphertext nobody signed is refused
      const unsignedOutside = await startSimpleSamlPhp({ spMetadata, encryptAssertions: true, signResponse: false });
      idps.push(unsignedOutside);
      const { descriptor, requestId, answer } = await signIn(unsignedOutside, 'redirect');
      const upstream = {
        providerId: 'p4',
        idp: descriptor,
        mappings: {},
        emailVerified: false,
        requireEncryption: true,
      };
      await assert.rejects(
        validateSamlResponse(await receiveSamlResponse(answer.fields), upstream, sp, memoryOnce(new Set([requestId]))),
        (err: unknown) => err instanceof XmlSecurityError && err.reason === 'encryption-algorithm',
      );
    }
    {
      const { descriptor, requestId, answer } = await signIn(plain, 'redirect');
      const upstream = {
        providerId: 'p3',
        idp: descriptor,
        mappings: {},
        emailVerified: false,
        requireEncryption: true,
      };
      await assert.rejects(
        validateSamlResponse(await receiveSamlResponse(answer.fields), upstream, sp, memoryOnce(new Set([requestId]))),
        (err: unknown) => err instanceof UpstreamSamlError && err.reason === 'unencrypted',
      );
    }
  },
);

test('SimpleSAMLphp refuses an AuthnRequest that is not signed by our key (it validates them)', { skip }, async () => {
  const idp = await startSimpleSamlPhp({ spMetadata });
  idps.push(idp);
  const descriptor = await parseIdpMetadata(await idp.metadata());
  const stranger = await party('stranger');
  const outgoing = buildAuthnRequest({
    requestId: 'ustranger1',
    spEntityId: SP,
    acsUrl: ACS,
    idp: descriptor,
    signingKey: { privateKey: stranger.privateKey, certificate: stranger.certificate },
    now: Date.now(),
  });
  const response = await fetch(outgoing.url, { redirect: 'manual' });
  const body = await response.text();
  assert.ok(response.status >= 400 || /signature|error/i.test(body), `refused: ${response.status}`);
  assert.doesNotMatch(body, /name="username"/, 'no login form for a forged request');
});
