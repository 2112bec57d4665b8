// The HTTP-Redirect binding's signature: over the raw octets of the query as received.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sign as cryptoSign } from 'node:crypto';
import {
  buildRedirectQuery,
  decodeRedirectMessage,
  deflateForRedirect,
  parseRedirectQuery,
  SIGNATURE,
  verifyRedirectSignature,
  XmlSecurityError,
  type XmlRefusal,
} from '../../src/saml/xml/index.ts';
import { authnRequest, party, type Party } from './saml-fixtures.ts';

let sp: Party;
let attacker: Party;

before(async () => {
  [sp, attacker] = await Promise.all([party('sp.example.org'), party('attacker.example')]);
});

function refused(reason: XmlRefusal, run: () => unknown): void {
  assert.throws(run, (err: unknown) => {
    assert.ok(err instanceof XmlSecurityError, `expected XmlSecurityError, got ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    return true;
  });
}

/** A query signed the way a given SP encodes it: `encode` spells each value. */
function signedBy(
  signer: Party,
  encode: (value: string) => string,
  sigAlg: string = SIGNATURE.rsaSha256,
  hash = 'sha256',
) {
  const octets =
    `SAMLRequest=${encode(deflateForRedirect(authnRequest()))}` +
    `&RelayState=${encode('https://sp.example.org/app?a=1&b=2 3')}&SigAlg=${encode(sigAlg)}`;
  const signature = cryptoSign(hash, Buffer.from(octets), signer.privateKey).toString('base64');
  return `${octets}&Signature=${encode(signature)}`;
}

/** Percent-encoding with lower-case hex digits, as some SP libraries write it. */
const lowerHex = (value: string) => encodeURIComponent(value).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());

describe('HTTP-Redirect binding signatures', () => {
  it('builds a signed query that verifies and decodes', () => {
    const query = buildRedirectQuery({
      parameter: 'SAMLRequest',
      xml: authnRequest(),
      relayState: 'r 1&x',
      signingKey: sp.privateKey,
    });
    const parsed = parseRedirectQuery(query);
    assert.equal(parsed.parameter, 'SAMLRequest');
    assert.equal(parsed.relayState, 'r 1&x');
    assert.equal(parsed.sigAlg, SIGNATURE.rsaSha256);
    assert.equal(verifyRedirectSignature(parsed, { keys: [sp.certificate] }), 0);
    assert.equal(decodeRedirectMessage(parsed.message).root.localName, 'AuthnRequest');
  });

  it('verifies over the raw octets, whatever percent-encoding the signer used', () => {
    // Lower-case hex: a verifier that decoded and encoded again would compute other octets and fail.
    const query = signedBy(sp, lowerHex);
    assert.match(query, /%2f/);
    assert.equal(verifyRedirectSignature(parseRedirectQuery(query), { keys: [sp.certificate] }), 0);
  });

  it('refuses a query whose encoding was changed after signing (re-encoded)', () => {
    const query = signedBy(sp, lowerHex);
    const reencoded = query.replace(/%[0-9a-f]{2}/g, (m) => m.toUpperCase());
    assert.notEqual(reencoded, query);
    refused('signature-invalid', () =>
      verifyRedirectSignature(parseRedirectQuery(reencoded), { keys: [sp.certificate] }),
    );
    const plus = signedBy(sp, encodeURIComponent).replace('%20', '+');
    refused('signature-invalid', () => verifyRedirectSignature(parseRedirectQuery(plus), { keys: [sp.certificate] }));
  });

  it('refuses a changed RelayState, a dropped RelayState and a swapped message', () => {
    const query = signedBy(sp, encodeURIComponent);
    const keys = { keys: [sp.certificate] };
    refused('signature-invalid', () =>
      verifyRedirectSignature(parseRedirectQuery(query.replace('a%3D1', 'a%3D2')), keys),
    );
    refused('signature-invalid', () =>
      verifyRedirectSignature(parseRedirectQuery(query.replace(/&RelayState=[^&]*/, '')), keys),
    );
    const other = encodeURIComponent(deflateForRedirect(authnRequest('_other')));
    refused('signature-invalid', () =>
      verifyRedirectSignature(parseRedirectQuery(query.replace(/SAMLRequest=[^&]*/, `SAMLRequest=${other}`)), keys),
    );
  });

  it('takes the key only from the caller', () => {
    const query = signedBy(attacker, encodeURIComponent);
    refused('signature-invalid', () => verifyRedirectSignature(parseRedirectQuery(query), { keys: [sp.certificate] }));
  });

  it('refuses a SigAlg not on the allow-list, and SHA-1 unless allowed', () => {
    const md5 = signedBy(sp, encodeURIComponent, 'http://www.w3.org/2001/04/xmldsig-more#rsa-md5', 'md5');
    refused('signature-algorithm', () => verifyRedirectSignature(parseRedirectQuery(md5), { keys: [sp.certificate] }));
    const hmac = signedBy(sp, encodeURIComponent, 'http://www.w3.org/2000/09/xmldsig#hmac-sha1', 'sha1');
    refused('signature-algorithm', () => verifyRedirectSignature(parseRedirectQuery(hmac), { keys: [sp.certificate] }));
    const sha1 = signedBy(sp, encodeURIComponent, SIGNATURE.rsaSha1, 'sha1');
    refused('signature-algorithm', () => verifyRedirectSignature(parseRedirectQuery(sha1), { keys: [sp.certificate] }));
    assert.equal(verifyRedirectSignature(parseRedirectQuery(sha1), { keys: [sp.certificate], allowSha1: true }), 0);
  });

  it('refuses unsigned queries at verification, repeated parameters and both or neither message', () => {
    const unsigned = buildRedirectQuery({ parameter: 'SAMLRequest', xml: authnRequest() });
    refused('signature-missing', () =>
      verifyRedirectSignature(parseRedirectQuery(unsigned), { keys: [sp.certificate] }),
    );
    const query = signedBy(sp, encodeURIComponent);
    refused('forbidden-construct', () => parseRedirectQuery(`${query}&RelayState=x`));
    refused('forbidden-construct', () => parseRedirectQuery(`${query}&SAMLResponse=x`));
    refused('forbidden-construct', () => parseRedirectQuery('RelayState=x'));
    refused('signature-shape', () => parseRedirectQuery(query.replace(/&Signature=[^&]*/, '')));
  });

  it('ignores other parameters, which the signature does not cover', () => {
    const query = `foo=bar&${signedBy(sp, encodeURIComponent)}&extra=1`;
    assert.equal(verifyRedirectSignature(parseRedirectQuery(query), { keys: [sp.certificate] }), 0);
  });
});
