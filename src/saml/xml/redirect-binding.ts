// The HTTP-Redirect binding's signature (SAML bindings 3.4.4.1): over the octets
// `SAMLRequest=value[&RelayState=value]&SigAlg=value` (or SAMLResponse), each value exactly as it
// appears in the query string received, never decoded and encoded again (two encoders can spell the
// same value differently, and the signer's spelling is what was signed).
import { sign as cryptoSign, verify as cryptoVerify } from 'node:crypto';
import { acceptedSignatureAlgorithms, SIGNATURE, SIGNATURE_HASH } from './algorithms.ts';
import { refuse } from './errors.ts';
import { rsaPrivateKey, rsaPublicKey, type PrivateKeyInput, type PublicKeyInput } from './keys.ts';
import { DEFAULT_MAX_ENCODED, deflateForRedirect } from './parse.ts';

export type RedirectParameter = 'SAMLRequest' | 'SAMLResponse';

export interface RedirectQuery {
  parameter: RedirectParameter;
  /** the message value, URL-decoded: base64 of the DEFLATEd XML (decodeRedirectMessage takes it) */
  message: string;
  relayState: string | undefined;
  /** the signature algorithm and value, URL-decoded, when the query is signed */
  sigAlg: string | undefined;
  signature: string | undefined;
  /** the octets the signature covers, from the raw query */
  signedOctets: string | undefined;
}

const NAMES = ['SAMLRequest', 'SAMLResponse', 'RelayState', 'SigAlg', 'Signature'] as const;
type Name = (typeof NAMES)[number];

function decodeComponent(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    throw refuse('bad-encoding', 'the query string is not correctly encoded');
  }
}

/**
 * Split the raw query string (what follows `?`, as received) into the binding's parameters, each
 * at most once, keeping the raw spelling of the signed ones. Other parameters are ignored.
 */
export function parseRedirectQuery(rawQuery: string, maxLength = DEFAULT_MAX_ENCODED * 2): RedirectQuery {
  if (rawQuery.length > maxLength) throw refuse('too-large', 'the query string is too long');
  const raw = new Map<Name, string>();
  for (const pair of rawQuery.split('&')) {
    const eq = pair.indexOf('=');
    const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    if (!(NAMES as readonly string[]).includes(name)) continue;
    if (raw.has(name as Name)) throw refuse('forbidden-construct', `the query string repeats ${name}`);
    raw.set(name as Name, eq === -1 ? '' : pair.slice(eq + 1));
  }
  const request = raw.get('SAMLRequest');
  const response = raw.get('SAMLResponse');
  if ((request === undefined) === (response === undefined)) {
    throw refuse('forbidden-construct', 'the query string must carry exactly one of SAMLRequest and SAMLResponse');
  }
  const parameter: RedirectParameter = request !== undefined ? 'SAMLRequest' : 'SAMLResponse';
  const relay = raw.get('RelayState');
  const sigAlg = raw.get('SigAlg');
  const signature = raw.get('Signature');
  if ((sigAlg === undefined) !== (signature === undefined)) {
    throw refuse('signature-shape', 'SigAlg and Signature come together');
  }
  const signedOctets =
    sigAlg === undefined
      ? undefined
      : `${parameter}=${request ?? response}` +
        (relay === undefined ? '' : `&RelayState=${relay}`) +
        `&SigAlg=${sigAlg}`;
  return {
    parameter,
    message: decodeComponent(request ?? response!),
    relayState: relay === undefined ? undefined : decodeComponent(relay),
    sigAlg: sigAlg === undefined ? undefined : decodeComponent(sigAlg),
    signature: signature === undefined ? undefined : decodeComponent(signature),
    signedOctets,
  };
}

export interface RedirectVerifyOptions {
  keys: readonly PublicKeyInput[];
  allowSha1?: boolean;
}

/**
 * Verify the binding's signature of a parsed query with the peer's keys (never a key the message
 * names). Returns the index of the key that verified it; throws when unsigned or not verifying.
 */
export function verifyRedirectSignature(query: RedirectQuery, options: RedirectVerifyOptions): number {
  if (query.signedOctets === undefined || query.sigAlg === undefined || query.signature === undefined) {
    throw refuse('signature-missing', 'the message is not signed');
  }
  if (!acceptedSignatureAlgorithms(options.allowSha1 === true).includes(query.sigAlg)) {
    throw refuse('signature-algorithm', 'the signature algorithm is not accepted');
  }
  const signature = query.signature.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(signature)) throw refuse('bad-encoding', 'the signature is not valid base64');
  const hash = SIGNATURE_HASH[query.sigAlg]!;
  const octets = Buffer.from(query.signedOctets, 'utf8');
  const value = Buffer.from(signature, 'base64');
  for (const [index, key] of options.keys.map(rsaPublicKey).entries()) {
    if (cryptoVerify(hash, octets, key, value)) return index;
  }
  throw refuse('signature-invalid', 'the signature does not verify with the expected key');
}

export interface RedirectBuildOptions {
  parameter: RedirectParameter;
  /** the message XML; it is DEFLATEd and base64-encoded here */
  xml: string;
  relayState?: string;
  /** sign the query (RSA-SHA256 unless sigAlg says otherwise) */
  signingKey?: PrivateKeyInput;
  sigAlg?: typeof SIGNATURE.rsaSha256 | typeof SIGNATURE.rsaSha384 | typeof SIGNATURE.rsaSha512;
}

/** The query string of an outgoing Redirect-binding message, signed over exactly the octets it holds. */
export function buildRedirectQuery(options: RedirectBuildOptions): string {
  let query = `${options.parameter}=${encodeURIComponent(deflateForRedirect(options.xml))}`;
  if (options.relayState !== undefined) query += `&RelayState=${encodeURIComponent(options.relayState)}`;
  if (options.signingKey === undefined) return query;
  const sigAlg = options.sigAlg ?? SIGNATURE.rsaSha256;
  query += `&SigAlg=${encodeURIComponent(sigAlg)}`;
  const signature = cryptoSign(SIGNATURE_HASH[sigAlg], Buffer.from(query, 'utf8'), rsaPrivateKey(options.signingKey));
  return `${query}&Signature=${encodeURIComponent(signature.toString('base64'))}`;
}
