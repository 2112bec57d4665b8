// Every refusal of validateSamlResponse, each with a Response that differs from an accepted one in
// the one point the check is about (the first test shows the unaltered one is accepted).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  ENCRYPTION,
  encryptElement,
  NS,
  parseXml,
  serialize,
  XmlSecurityError,
  type Document,
  type Element,
} from '../../src/saml/xml/index.ts';
import { STATUS } from '../../src/saml-idp/response.ts';
import {
  receiveSamlResponse,
  samlRefusalReason,
  validateSamlResponse,
  type SamlUpstream,
} from '../../src/upstream/saml-response.ts';
import { encryptedInShape, REFUSED_SHAPES, type EncryptionShape } from '../saml/encryption-shapes.ts';
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

const SP = 'https://sp.example.org/saml2/sp/metadata';
const ACS = 'https://sp.example.org/saml2/sp/acs';
let idp: ForgedIdp;
let other: ForgedIdp;
let stranger: Party;
let decryption: Party;

before(async () => {
  idp = await forgedIdp();
  other = await forgedIdp('https://other.example/idp', ['other.example']);
  stranger = await party('stranger');
  decryption = await party('sp encryption');
});

const upstreamOf = (i: ForgedIdp, id = 'p1'): SamlUpstream => ({
  providerId: id,
  idp: i.descriptor,
  mappings: {},
  emailVerified: false,
  requireEncryption: false,
});

function once(requests = new Set(['ureq1'])) {
  const seen = new Set<string>();
  return {
    consumeRequest: async (id: string) => requests.delete(id),
    firstUse: async (key: string) => (seen.has(key) ? false : (seen.add(key), true)),
  };
}

const base = (over: Partial<ForgeOptions> = {}): ForgeOptions => ({
  destination: ACS,
  audience: SP,
  inResponseTo: 'ureq1',
  ...over,
});

async function run(samlResponse: string, upstream = upstreamOf(idp), now = Date.now(), o = once()) {
  const received = await receiveSamlResponse({ SAMLResponse: samlResponse });
  return validateSamlResponse(
    received,
    upstream,
    { spEntityId: SP, acsUrl: ACS, decryptionKeys: [decryption.privateKey], now },
    o,
  );
}

async function refused(samlResponse: string, reason: string, upstream = upstreamOf(idp), now = Date.now()) {
  await assert.rejects(run(samlResponse, upstream, now), (err: unknown) => {
    assert.equal(samlRefusalReason(err), reason, `reason of ${String(err)}`);
    assert.equal((err as { status: number }).status, 400);
    return true;
  });
}

test('an unaltered Response is accepted, signed on the Response, the assertion or both', async () => {
  for (const sign of ['response', 'assertion', 'both'] as const) {
    const result = await run(forgeResponse(idp, base({ sign })));
    assert.equal(result.assertion.subject, 'opaque-subject-1');
    assert.equal(result.assertion.attributes.eppn, 'ada@uni.example');
    assert.deepEqual(result.assertion.amr, ['pwd']);
  }
});

test('unsigned, wrongly signed, or signed by a key not in the metadata: refused', async () => {
  await refused(forgeResponse(idp, base({ sign: 'none' })), 'unsigned');
  await refused(forgeResponse(idp, base({ signer: stranger })), 'signature-invalid');
  await refused(forgeResponse(idp, base({ sign: 'assertion', signer: stranger })), 'signature-invalid');
  // altered after signing: another subject in a signed Response
  const altered = forgeResponseXml(idp, base()).replace('opaque-subject-1', 'victim-subject');
  await refused(b64(altered), 'signature-invalid');
});

test('mix-up: a Response of another provider, even for a live request, is refused', async () => {
  // other IdP's genuine Response, received as if for provider p1 (idp)
  await refused(forgeResponse(other, base()), 'issuer');
  // other IdP's key, but claiming to be idp
  await refused(forgeResponse(other, base({ issuer: idp.entityId })), 'signature-invalid');
  // the request belongs to another provider: the consume says no
  await assert.rejects(
    run(forgeResponse(idp, base()), upstreamOf(idp), Date.now(), once(new Set(['ureq-of-other']))),
    (err: unknown) => samlRefusalReason(err) === 'request',
  );
});

test('unsolicited, unknown InResponseTo, replayed: refused', async () => {
  await refused(forgeResponse(idp, base({ inResponseTo: undefined })), 'unsolicited');
  await refused(forgeResponse(idp, base({ inResponseTo: 'uunknown' })), 'request');
  const o = once(new Set(['ureq1', 'ureq1-again']));
  const response = forgeResponse(idp, base());
  await run(response, upstreamOf(idp), Date.now(), o);
  await assert.rejects(
    run(response, upstreamOf(idp), Date.now(), o),
    (err: unknown) => samlRefusalReason(err) === 'request',
  );
});

test('wrong audience, destination or recipient: refused', async () => {
  await refused(forgeResponse(idp, base({ audience: 'https://other-sp.example/sp' })), 'audience');
  await refused(forgeResponse(idp, base({ destination: 'https://other-sp.example/acs' })), 'destination');
  // the Response names our ACS, but the assertion's Recipient is another one
  const recipient = forgeResponse(
    idp,
    base({
      edit: (d) =>
        d
          .getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'SubjectConfirmationData')[0]!
          .setAttribute('Recipient', 'https://other-sp.example/acs'),
    }),
  );
  await refused(recipient, 'subject-confirmation');
});

test('expired, or not valid yet, beyond the clock skew: refused; within it: accepted', async () => {
  const made = Date.now() - 60 * 60_000;
  await refused(forgeResponse(idp, base({ now: made })), 'subject-confirmation');
  await refused(forgeResponse(idp, base({ now: Date.now() + 10 * 60_000 })), 'expired');
  // 2 minutes out (the skew allows 3)
  await run(forgeResponse(idp, base({ now: Date.now() + 2 * 60_000 })));
});

test('a DTD, or a non-Response document: refused before anything else', async () => {
  const xml = forgeResponseXml(idp, base());
  const withDtd = `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "y">]>${xml}`;
  await assert.rejects(
    run(b64(withDtd)),
    (err: unknown) => err instanceof XmlSecurityError && err.reason === 'forbidden-construct',
  );
  await assert.rejects(run(b64('<a/>')), (err: unknown) => err instanceof XmlSecurityError);
  await assert.rejects(run('%%%'), (err: unknown) => err instanceof XmlSecurityError);
  await assert.rejects(receiveSamlResponse({}), (err: unknown) => samlRefusalReason(err) === 'binding');
});

test('XML signature wrapping: a signed assertion moved beside, inside or under an evil one', async () => {
  const genuine = forgeResponseXml(idp, base({ sign: 'assertion' }));
  for (const shape of ['sibling', 'inside-evil', 'extensions'] as const) {
    await assert.rejects(
      run(b64(wrapped(genuine, shape))),
      (err: unknown) => {
        const reason = samlRefusalReason(err);
        assert.ok(reason, `refused with a reason (${shape}): ${String(err)}`);
        return true;
      },
      shape,
    );
  }
  // a signed Response with a second (evil) assertion added after signing
  const signedResponse = forgeResponseXml(idp, base());
  const evil = signedResponse.replace(
    /(<saml:Assertion[\s\S]*<\/saml:Assertion>)/,
    (a) => a.replace(/ID="[^"]+"/, 'ID="_evil"').replace('opaque-subject-1', 'victim') + a,
  );
  await assert.rejects(run(b64(evil)), (err: unknown) => !!samlRefusalReason(err));
});

test('a status other than Success ends with what the IdP said, in plain words', async () => {
  await refused(forgeResponse(idp, base({ status: STATUS.requestDenied })), 'access-denied');
  await refused(forgeResponse(idp, base({ status: STATUS.authnFailed })), 'access-denied');
  await refused(forgeResponse(idp, base({ status: STATUS.noAuthnContext })), 'authn-context');
  await refused(forgeResponse(idp, base({ status: 'urn:example:odd' })), 'status');
});

test('an eppn outside the IdP scopes is dropped; a transient NameID is no subject', async () => {
  const result = await run(forgeResponse(idp, base({ eppn: 'mallory@evil.example' })));
  assert.equal(result.assertion.attributes.eppn, undefined);
  const transient = forgeResponse(
    idp,
    base({
      edit: (d) =>
        d
          .getElementsByTagNameNS('urn:oasis:names:tc:SAML:2.0:assertion', 'NameID')[0]!
          .setAttribute('Format', 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient'),
    }),
  );
  await refused(transient, 'subject');
});

/** A saml:EncryptedID holding `content` (a NameID unless given) encrypted to `certificate`. */
async function encryptedId(
  certificate: string,
  options: { content?: string; algorithm?: (typeof ENCRYPTION)[keyof typeof ENCRYPTION] } = {},
): Promise<Element> {
  const content =
    options.content ??
    `<saml:NameID xmlns:saml="${NS.assertion}" Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent">encrypted-subject-7</saml:NameID>`;
  const data = encryptElement(parseXml(content).root, {
    certificate,
    ...(options.algorithm ? { encryptionAlgorithm: options.algorithm } : {}),
  });
  const container = data.ownerDocument!.createElementNS(NS.assertion, 'saml:EncryptedID');
  container.appendChild(data);
  return container;
}

/** The Subject's NameID replaced by `encrypted` (or `keep`: put beside it). */
const withEncryptedId =
  (encrypted: Element, keep = false) =>
  (document: Document) => {
    const nameId = document.getElementsByTagNameNS(NS.assertion, 'NameID')[0]!;
    const imported = document.importNode(encrypted, true);
    if (keep) nameId.parentNode!.insertBefore(imported, nameId.nextSibling);
    else nameId.parentNode!.replaceChild(imported, nameId);
  };

test('a Subject with an EncryptedID: decrypted with the service key, its persistent NameID the subject', async () => {
  for (const sign of ['response', 'assertion'] as const) {
    const edit = withEncryptedId(await encryptedId(decryption.certificate));
    const result = await run(forgeResponse(idp, base({ sign, edit })));
    assert.equal(result.assertion.subject, 'encrypted-subject-7');
  }
  // AES-CBC too: the verified signature covers the ciphertext
  const cbc = withEncryptedId(await encryptedId(decryption.certificate, { algorithm: ENCRYPTION.aes256Cbc }));
  assert.equal((await run(forgeResponse(idp, base({ edit: cbc })))).assertion.subject, 'encrypted-subject-7');
});

test('an EncryptedID for another key, with an algorithm not allowed, not a NameID, or beside a NameID: refused', async () => {
  await refused(
    forgeResponse(idp, base({ edit: withEncryptedId(await encryptedId(stranger.certificate)) })),
    'decryption-failed',
  );
  const weak = await encryptedId(decryption.certificate);
  weak
    .getElementsByTagNameNS(NS.xenc, 'EncryptionMethod')[0]!
    .setAttribute('Algorithm', 'http://www.w3.org/2001/04/xmlenc#tripledes-cbc');
  await refused(forgeResponse(idp, base({ edit: withEncryptedId(weak) })), 'encryption-algorithm');
  const notNameId = await encryptedId(decryption.certificate, {
    content: `<saml:Issuer xmlns:saml="${NS.assertion}">opaque</saml:Issuer>`,
  });
  await refused(forgeResponse(idp, base({ edit: withEncryptedId(notNameId) })), 'subject');
  // a NameID and an EncryptedID both: the schema gate already refuses it (the Subject has one or the other)
  const beside = withEncryptedId(await encryptedId(decryption.certificate), true);
  await refused(forgeResponse(idp, base({ edit: beside })), 'schema-invalid');
});

/** The Response's assertion (or its NameID) replaced by its encryption to the service in `shape`. */
const encryptedAs = (name: 'Assertion' | 'NameID', shape: EncryptionShape) => (document: Document) => {
  const element = document.getElementsByTagNameNS(NS.assertion, name)[0]!;
  const container = name === 'Assertion' ? 'EncryptedAssertion' : 'EncryptedID';
  const xml = encryptedInShape(container, serialize(element), decryption.certificate, shape);
  element.parentNode!.replaceChild(document.importNode(parseXml(xml).root, true), element);
};

// The Response is signed, so AES-CBC is allowed for both: the worst case for the key transport.
for (const name of ['Assertion', 'NameID'] as const) {
  test(`the ${name} encrypted in the accepted shape, built by hand: accepted`, async () => {
    const result = await run(forgeResponse(idp, base({ edit: encryptedAs(name, 'sound') })));
    assert.equal(result.assertion.subject, 'opaque-subject-1');
  });
  for (const shape of REFUSED_SHAPES) {
    test(`the ${name} encrypted in a shape the decryption library could read differently (${shape}): refused`, async () => {
      await refused(forgeResponse(idp, base({ edit: encryptedAs(name, shape) })), 'encryption-algorithm');
    });
  }
}

test('a decrypted EncryptedID is validated against the schema', async () => {
  const invalid = await encryptedId(decryption.certificate, {
    content: `<saml:NameID xmlns:saml="${NS.assertion}" Format="urn:oasis:names:tc:SAML:2.0:nameid-format:persistent" Bogus="1">encrypted-subject-7</saml:NameID>`,
  });
  await refused(forgeResponse(idp, base({ edit: withEncryptedId(invalid) })), 'schema-invalid');
});
