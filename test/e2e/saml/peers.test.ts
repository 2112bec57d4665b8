// The SAML service providers the tests run (Apache with mod_auth_mellon, a pysaml2 Saml2Client),
// on their own: given an IdP's metadata, each sends the browser to that IdP's single sign-on URL
// with an AuthnRequest that the service's own XML layer reads and finds schema-valid, signed where
// the SP signs, and naming the SP's assertion consumer service.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import {
  childElements,
  createSelfSignedCertificate,
  decodePostMessage,
  decodeRedirectMessage,
  NS,
  parseRedirectQuery,
  SIGNATURE,
  textOf,
  validateSchema,
  verifyEnvelopedSignature,
  verifyRedirectSignature,
  type ParsedXml,
} from '../../../src/saml/xml/index.ts';
import { testIdpMetadata } from './keys.ts';
import { mellonMissing, startMellon, type Mellon } from './mellon.ts';
import { pysaml2Missing, startPysaml2, type Pysaml2Sp } from './pysaml2.ts';

const IDP = 'https://idp.invalid/saml2/idp/metadata';
const SSO = 'http://127.0.0.1:9/saml2/idp/sso';

async function idpMetadata(): Promise<string> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const certificate = await createSelfSignedCertificate({ privateKey, commonName: 'idp.invalid' });
  return testIdpMetadata({ entityId: IDP, ssoUrl: SSO, sloUrl: 'http://127.0.0.1:9/saml2/idp/slo', certificate });
}

/** The Redirect binding's request at the IdP's SSO URL, read as the IdP will read it. */
async function redirectedRequest(location: string) {
  assert.ok(location.startsWith(`${SSO}?`), `sent to the IdP, not to ${location}`);
  const query = parseRedirectQuery(location.slice(SSO.length + 1));
  assert.equal(query.parameter, 'SAMLRequest');
  const parsed = decodeRedirectMessage(query.message);
  await validateSchema(parsed, 'protocol');
  return { query, parsed };
}

/** Follows the SP's own redirects (carrying its cookies) to the first one that leaves it. */
async function toIdp(start: string): Promise<string> {
  const origin = new URL(start).origin;
  let url = start;
  let cookie = '';
  for (let hop = 0; hop < 5; hop++) {
    const res = await fetch(url, { redirect: 'manual', headers: { cookie }, signal: AbortSignal.timeout(10_000) });
    assert.ok([302, 303].includes(res.status), `${url} answered ${res.status}`);
    for (const set of res.headers.getSetCookie()) cookie += `${cookie ? '; ' : ''}${set.split(';')[0]}`;
    url = new URL(res.headers.get('location')!, url).href;
    if (!url.startsWith(origin)) return url;
  }
  throw new Error(`${start} kept redirecting to itself`);
}

function authnRequestFacts(parsed: ParsedXml) {
  const root = parsed.root;
  assert.equal(root.namespaceURI, NS.protocol);
  assert.equal(root.localName, 'AuthnRequest');
  return {
    id: root.getAttribute('ID'),
    destination: root.getAttribute('Destination'),
    acs: root.getAttribute('AssertionConsumerServiceURL'),
    protocolBinding: root.getAttribute('ProtocolBinding'),
    issuer: textOf(childElements(root, NS.assertion, 'Issuer')[0]!),
  };
}

describe('Apache mod_auth_mellon as a SAML service provider', { skip: mellonMissing() }, () => {
  let mellon: Mellon;
  before(async () => {
    mellon = await startMellon({ idpMetadata: await idpMetadata() });
  });
  after(async () => mellon?.stop());

  it('publishes its metadata with the certificate the test gave it', async () => {
    const res = await fetch(mellon.metadataUrl);
    assert.equal(res.status, 200, mellon.log());
    const xml = await res.text();
    assert.match(xml, /AssertionConsumerService/);
    assert.ok(xml.includes(mellon.entityId));
    const body = mellon.signing.certificate.replace(/-----[^-]+-----|\s/g, '');
    assert.ok(xml.replace(/\s/g, '').includes(body), 'its signing certificate is in its metadata');
  });

  it('sends the browser to the IdP with a signed, schema-valid AuthnRequest', async () => {
    const { query, parsed } = await redirectedRequest(await toIdp(mellon.protectedUrl));
    const facts = authnRequestFacts(parsed);
    assert.equal(facts.issuer, mellon.entityId);
    assert.equal(facts.destination, SSO);
    assert.ok(facts.id);
    assert.equal(query.sigAlg, SIGNATURE.rsaSha256);
    assert.equal(verifyRedirectSignature(query, { keys: [mellon.signing.certificate] }), 0);
    console.log(
      'mellon AuthnRequest:',
      JSON.stringify({ ...facts, sigAlg: query.sigAlg, relayState: query.relayState }),
    );
  });
});

describe('pysaml2 as a SAML service provider', { skip: pysaml2Missing() }, () => {
  let plain: Pysaml2Sp;
  let signing: Pysaml2Sp;
  before(async () => {
    const metadata = await idpMetadata();
    [plain, signing] = await Promise.all([
      startPysaml2({ idpMetadata: metadata }),
      startPysaml2({ idpMetadata: metadata, signRequests: true }),
    ]);
  });
  after(async () => {
    await plain?.stop();
    await signing?.stop();
  });

  it('publishes its metadata with its signing and encryption certificates', async () => {
    const xml = await (await fetch(plain.metadataUrl)).text();
    assert.ok(xml.includes(plain.entityId), plain.output());
    assert.match(xml, /use="encryption"/);
    assert.match(xml, /AssertionConsumerService[^>]+Location="[^"]+\/acs"/);
  });

  it('sends an unsigned AuthnRequest over HTTP-Redirect', async () => {
    const { query, parsed } = await redirectedRequest(await toIdp(`${plain.loginUrl}?relay=/here`));
    const facts = authnRequestFacts(parsed);
    assert.equal(facts.issuer, plain.entityId);
    assert.equal(facts.acs, `${plain.url}/acs`);
    assert.equal(facts.destination, SSO);
    assert.equal(query.signature, undefined);
    assert.equal(query.relayState, '/here');
    assert.equal(facts.id, (await plain.next('login')).request_id);
  });

  it('signs the Redirect binding query when it signs its requests', async () => {
    const { query, parsed } = await redirectedRequest(await toIdp(signing.loginUrl));
    assert.equal(authnRequestFacts(parsed).issuer, signing.entityId);
    assert.equal(query.sigAlg, SIGNATURE.rsaSha256);
    assert.equal(verifyRedirectSignature(query, { keys: [signing.signing.certificate] }), 0);
    assert.throws(() => verifyRedirectSignature(query, { keys: [plain.signing.certificate] }));
  });

  it('sends a signed AuthnRequest over HTTP-POST, with ForceAuthn, IsPassive and a requested context', async () => {
    const acr = 'https://refeds.org/profile/mfa';
    const res = await fetch(`${signing.loginUrl}?binding=post&force=1&passive=1&acr=${encodeURIComponent(acr)}`);
    const page = await res.text();
    assert.equal(res.status, 200, signing.output());
    const action = /action="([^"]+)"/.exec(page)?.[1];
    assert.equal(action, SSO);
    const value = /name="SAMLRequest" value="([^"]+)"/.exec(page)?.[1];
    assert.ok(value, page);
    const parsed = decodePostMessage(value);
    await validateSchema(parsed, 'protocol');
    assert.equal(parsed.root.getAttribute('ForceAuthn'), 'true');
    assert.equal(parsed.root.getAttribute('IsPassive'), 'true');
    const verified = verifyEnvelopedSignature(parsed, parsed.root, { keys: [signing.signing.certificate] });
    assert.equal(verified.signatureAlgorithm, SIGNATURE.rsaSha256);
    const context = childElements(verified.element, NS.protocol, 'RequestedAuthnContext')[0]!;
    assert.equal(context.getAttribute('Comparison'), 'exact');
    assert.equal(textOf(childElements(context, NS.assertion, 'AuthnContextClassRef')[0]!), acr);
  });
});
