// Enveloped XML signatures of SAML messages, checked with xml-crypto 6, and made over
// xml-crypto's exclusive canonicalization on the document the service built (signElement).
//
// Checking is strict about shape before any cryptography, then goes through xml-crypto's checked
// references only (getSignedReferences, the canonical XML that the verified digest covered), and the
// caller gets that XML parsed again, never a node looked up in the document it sent. The shape: one
// ds:Signature, a direct child of the element it signs; exactly one Reference, to "#" + that
// element's ID; IDs unique in the whole document; transforms enveloped-signature and exclusive
// canonicalization only; algorithms from an allow-list; the key only from the caller.
import { createHash, sign as cryptoSign, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { ExclusiveCanonicalization, SignedXml, type HashAlgorithm, type SignatureAlgorithm } from 'xml-crypto';
import {
  acceptedDigestAlgorithms,
  acceptedSignatureAlgorithms,
  DIGEST,
  DIGEST_HASH,
  NS,
  SIGNATURE,
  SIGNATURE_HASH,
  TRANSFORM,
} from './algorithms.ts';
import { refuse } from './errors.ts';
import { rsaPrivateKey, rsaPublicKey, type PrivateKeyInput, type PublicKeyInput } from './keys.ts';
import {
  childElements,
  descendantElements,
  parseXml,
  serialize,
  DEFAULT_MAX_XML,
  type Document,
  type Element,
  type ParsedXml,
} from './parse.ts';

export interface VerifyOptions {
  /** the signer's certificates or keys from its metadata (several during a key rollover) */
  keys: readonly PublicKeyInput[];
  /** accept RSA-SHA1 and SHA-1 digests, for a peer that still sends nothing better */
  allowSha1?: boolean;
}

export interface VerifiedElement {
  /** the element the signature covers, parsed from the canonical XML that was verified */
  element: Element;
  document: Document;
  /** the canonical XML the digest was computed over */
  signedXml: string;
  signatureAlgorithm: string;
  digestAlgorithm: string;
  /** which of the caller's keys verified it */
  keyIndex: number;
}

// A SAML ID is an xs:ID, an NCName; anything else (quotes above all) never reaches an XPath.
const NCNAME = /^[A-Za-z_][A-Za-z0-9._-]*$/;
const ID_ATTRIBUTES = new Set(['ID', 'Id', 'id']);

/** True when the element carries an enveloped signature of its own (a ds:Signature child). */
export function hasSignature(element: Element): boolean {
  return childElements(element, NS.dsig, 'Signature').length > 0;
}

/** Every ID-like attribute value in the document occurs once: a duplicate is how a wrapped copy hides. */
export function checkUniqueIds(document: Document): void {
  const seen = new Set<string>();
  for (const element of descendantElements(document)) {
    for (let i = 0; i < element.attributes.length; i++) {
      const attribute = element.attributes.item(i)!;
      if (!ID_ATTRIBUTES.has(attribute.localName ?? attribute.name)) continue;
      if (seen.has(attribute.value)) throw refuse('signature-shape', 'the document holds two elements with one ID');
      seen.add(attribute.value);
    }
  }
}

function only(parent: Element, localName: string): Element {
  const found = childElements(parent, NS.dsig, localName);
  if (found.length !== 1) throw refuse('signature-shape', `the signature must hold exactly one ${localName}`);
  return found[0]!;
}

function algorithmOf(element: Element): string {
  return element.getAttribute('Algorithm') ?? '';
}

interface Shape {
  signature: Element;
  signatureAlgorithm: string;
  digestAlgorithm: string;
}

/** The structural checks, on the strictly parsed document, before any cryptography. */
function checkShape(parsed: ParsedXml, element: Element, allowSha1: boolean): Shape {
  const id = element.getAttribute('ID') ?? '';
  if (!NCNAME.test(id)) throw refuse('signature-shape', 'the signed element has no valid ID');
  const signatures = childElements(element, NS.dsig, 'Signature');
  if (signatures.length === 0) throw refuse('signature-missing', 'the message is not signed');
  if (signatures.length > 1) throw refuse('signature-shape', 'the element holds more than one signature');
  checkUniqueIds(parsed.document);
  const signature = signatures[0]!;
  for (const child of childElements(signature)) {
    const allowed =
      child.namespaceURI === NS.dsig && ['SignedInfo', 'SignatureValue', 'KeyInfo'].includes(child.localName!);
    if (!allowed) throw refuse('signature-shape', 'the signature holds an unexpected element');
  }
  only(signature, 'SignatureValue');
  const signedInfo = only(signature, 'SignedInfo');
  for (const child of childElements(signedInfo)) {
    const allowed =
      child.namespaceURI === NS.dsig &&
      ['CanonicalizationMethod', 'SignatureMethod', 'Reference'].includes(child.localName!);
    if (!allowed) throw refuse('signature-shape', 'SignedInfo holds an unexpected element');
  }
  const c14n = algorithmOf(only(signedInfo, 'CanonicalizationMethod'));
  if (c14n !== TRANSFORM.excC14n && c14n !== TRANSFORM.excC14nWithComments) {
    throw refuse('signature-algorithm', 'the canonicalization method is not exclusive canonicalization');
  }
  const signatureAlgorithm = algorithmOf(only(signedInfo, 'SignatureMethod'));
  if (!acceptedSignatureAlgorithms(allowSha1).includes(signatureAlgorithm)) {
    throw refuse('signature-algorithm', 'the signature algorithm is not accepted');
  }
  const reference = only(signedInfo, 'Reference');
  if (reference.getAttribute('URI') !== `#${id}`) {
    throw refuse('signature-shape', 'the signature does not reference the element that holds it');
  }
  checkTransforms(reference);
  const digestAlgorithm = algorithmOf(only(reference, 'DigestMethod'));
  if (!acceptedDigestAlgorithms(allowSha1).includes(digestAlgorithm)) {
    throw refuse('signature-algorithm', 'the digest algorithm is not accepted');
  }
  only(reference, 'DigestValue');
  return { signature, signatureAlgorithm, digestAlgorithm };
}

/** enveloped-signature, then optionally exclusive canonicalization (with or without comments): nothing else. */
function checkTransforms(reference: Element): void {
  const transforms = childElements(only(reference, 'Transforms'), NS.dsig, 'Transform').map(algorithmOf);
  const [first, second, ...rest] = transforms;
  const secondOk = second === undefined || second === TRANSFORM.excC14n || second === TRANSFORM.excC14nWithComments;
  if (first !== TRANSFORM.enveloped || !secondOk || rest.length > 0) {
    throw refuse(
      'signature-algorithm',
      'the reference transforms are not enveloped-signature and exclusive canonicalization',
    );
  }
}

/** xml-crypto's algorithm classes for a hash node:crypto knows (it has no SHA-384 of its own). */
function signatureAlgorithmClass(uri: string): new () => SignatureAlgorithm {
  const hash = SIGNATURE_HASH[uri]!;
  return class implements SignatureAlgorithm {
    getSignature(
      signedInfo: Parameters<SignatureAlgorithm['getSignature']>[0],
      privateKey: KeyObject | string,
    ): string {
      return cryptoSign(hash, Buffer.from(signedInfo as string), privateKey).toString('base64');
    }
    verifySignature(material: string, key: KeyObject | string, signatureValue: string): boolean {
      return cryptoVerify(hash, Buffer.from(material), key, Buffer.from(signatureValue, 'base64'));
    }
    getAlgorithmName(): string {
      return uri;
    }
  };
}

function hashAlgorithmClass(uri: string): new () => HashAlgorithm {
  const hash = DIGEST_HASH[uri]!;
  return class implements HashAlgorithm {
    getHash(xml: string): string {
      return createHash(hash).update(xml, 'utf8').digest('base64');
    }
    getAlgorithmName(): string {
      return uri;
    }
  };
}

/** A SignedXml that knows only the accepted algorithms and never takes a key from KeyInfo. */
function verifier(key: KeyObject, allowSha1: boolean): SignedXml {
  const signed = new SignedXml({ publicCert: key, getCertFromKeyInfo: () => null });
  signed.SignatureAlgorithms = Object.fromEntries(
    acceptedSignatureAlgorithms(allowSha1).map((uri) => [uri, signatureAlgorithmClass(uri)]),
  );
  signed.HashAlgorithms = Object.fromEntries(
    acceptedDigestAlgorithms(allowSha1).map((uri) => [uri, hashAlgorithmClass(uri)]),
  );
  return signed;
}

/**
 * Verify the enveloped signature of `element` (the message root, or an Assertion inside it) and
 * return what it covers, parsed from the verified canonical XML. Throws XmlSecurityError otherwise.
 */
export function verifyEnvelopedSignature(parsed: ParsedXml, element: Element, options: VerifyOptions): VerifiedElement {
  const allowSha1 = options.allowSha1 === true;
  const shape = checkShape(parsed, element, allowSha1);
  const keys = options.keys.map(rsaPublicKey);
  if (keys.length === 0) throw refuse('signature-invalid', 'no key to verify the signature with');
  for (const [keyIndex, key] of keys.entries()) {
    const signed = verifier(key, allowSha1);
    let valid: boolean;
    try {
      signed.loadSignature(shape.signature as unknown as globalThis.Node);
      valid = signed.checkSignature(parsed.xml);
    } catch {
      // A throw is a failure; what the instance holds afterwards is never read (xml-crypto #575).
      valid = false;
    }
    if (!valid) continue;
    return signedElement(signed.getSignedReferences(), element, parsed.xml.length, { ...shape, keyIndex });
  }
  throw refuse('signature-invalid', 'the signature does not verify with the expected key');
}

function signedElement(
  references: string[],
  expected: Element,
  inputLength: number,
  facts: Shape & { keyIndex: number },
): VerifiedElement {
  if (references.length !== 1) throw refuse('signature-shape', 'the signature must cover exactly one element');
  const signedXml = references[0]!;
  const reparsed = parseXml(signedXml, { maxXmlBytes: Math.max(DEFAULT_MAX_XML, inputLength * 4) });
  const root = reparsed.root;
  const same =
    root.namespaceURI === expected.namespaceURI &&
    root.localName === expected.localName &&
    root.getAttribute('ID') === expected.getAttribute('ID');
  if (!same) throw refuse('signature-shape', 'the signature covers another element');
  return {
    element: root,
    document: reparsed.document,
    signedXml,
    signatureAlgorithm: facts.signatureAlgorithm,
    digestAlgorithm: facts.digestAlgorithm,
    keyIndex: facts.keyIndex,
  };
}

export interface SignOptions {
  privateKey: PrivateKeyInput;
  /** the signing certificate (PEM), published in KeyInfo/X509Data */
  certificate: string;
  /** RSA-SHA256 unless given (SHA-1 is never emitted) */
  signatureAlgorithm?: typeof SIGNATURE.rsaSha256 | typeof SIGNATURE.rsaSha384 | typeof SIGNATURE.rsaSha512;
  digestAlgorithm?: typeof DIGEST.sha256 | typeof DIGEST.sha384 | typeof DIGEST.sha512;
}

/**
 * Sign the element with the given ID (a Response, Assertion, request or metadata) with an
 * enveloped signature placed where SAML wants it: right after the element's saml:Issuer, or as its
 * first child when it has none. Returns the whole document, serialized, with the signature in it.
 */
export function signEnveloped(document: Document, id: string, options: SignOptions): string {
  signElement(document, id, options);
  return serialize(document);
}

const EXC_C14N = new ExclusiveCanonicalization();
const XMLNS = 'http://www.w3.org/2000/xmlns/';

/** The element's exclusive canonical form (no comments, no inclusive prefixes), as xml-crypto makes it. */
function canonical(element: Element): string {
  return EXC_C14N.process(element as never, { defaultNsForPrefix: { ds: NS.dsig } });
}

/**
 * signEnveloped on the document itself, which it changes: a signature made on the document the
 * service built, without serializing and parsing it again. Only a document the service made comes
 * here, never one it received (those are only verified), so the signer is a few steps over
 * xml-crypto's exclusive canonicalization: the signed element has no signature yet, so the
 * enveloped-signature transform leaves it as it is and the digest is over its canonical form; then
 * the SignedInfo, canonicalized the same way, is signed with node:crypto.
 */
export function signElement(document: Document, id: string, options: SignOptions): void {
  const pending = unsignedSignature(document, id, options);
  pending.finish(cryptoSign(pending.hash, pending.signedInfo, pending.privateKey));
}

/**
 * signElement with the RSA signature made on libuv's thread pool: the event loop goes on with other
 * requests meanwhile (an RSA-3072 signature is about a millisecond of CPU). For the documents made
 * per request (Responses); the document is not to be touched until the promise settles.
 */
export async function signElementInPool(document: Document, id: string, options: SignOptions): Promise<void> {
  const pending = unsignedSignature(document, id, options);
  pending.finish(await signInPool(pending.hash, pending.signedInfo, pending.privateKey));
}

const signInPool = promisify(
  (algorithm: string, data: Buffer, key: KeyObject, done: (err: Error | null, value: Buffer) => void) =>
    cryptoSign(algorithm, data, key, done),
);

/** The Signature element in place with its SignedInfo, and what its SignatureValue is made from. */
function unsignedSignature(document: Document, id: string, options: SignOptions) {
  if (!NCNAME.test(id)) throw new Error('the element to sign needs an NCName ID');
  const targets = descendantElements(document).filter((e) => e.getAttribute('ID') === id);
  if (targets.length !== 1) throw new Error(`exactly one element with ID ${id} is required`);
  const target = targets[0]!;
  if (hasSignature(target)) throw new Error(`the element with ID ${id} is signed already`);
  checkUniqueIds(document);
  const signatureAlgorithm = options.signatureAlgorithm ?? SIGNATURE.rsaSha256;
  const digestAlgorithm = options.digestAlgorithm ?? DIGEST.sha256;
  const privateKey = rsaPrivateKey(options.privateKey);
  const certificates = pemBodies(options.certificate);
  if (!certificates.length) throw new Error('a signing certificate (PEM) is required');

  const digest = createHash(DIGEST_HASH[digestAlgorithm]!).update(canonical(target)).digest('base64');
  const ds = (parent: Element, name: string, attributes: Record<string, string> = {}, text?: string) => {
    const element = document.createElementNS(NS.dsig, `ds:${name}`);
    for (const [attribute, value] of Object.entries(attributes)) element.setAttribute(attribute, value);
    if (text !== undefined) element.appendChild(document.createTextNode(text));
    parent.appendChild(element);
    return element;
  };
  const signature = document.createElementNS(NS.dsig, 'ds:Signature');
  signature.setAttributeNS(XMLNS, 'xmlns:ds', NS.dsig);
  const signedInfo = ds(signature, 'SignedInfo');
  ds(signedInfo, 'CanonicalizationMethod', { Algorithm: TRANSFORM.excC14n });
  ds(signedInfo, 'SignatureMethod', { Algorithm: signatureAlgorithm });
  const reference = ds(signedInfo, 'Reference', { URI: `#${id}` });
  const transforms = ds(reference, 'Transforms');
  ds(transforms, 'Transform', { Algorithm: TRANSFORM.enveloped });
  ds(transforms, 'Transform', { Algorithm: TRANSFORM.excC14n });
  ds(reference, 'DigestMethod', { Algorithm: digestAlgorithm });
  ds(reference, 'DigestValue', {}, digest);
  const issuer = childElements(target, NS.assertion, 'Issuer')[0];
  target.insertBefore(signature, issuer ? issuer.nextSibling : target.firstChild);
  return {
    hash: SIGNATURE_HASH[signatureAlgorithm]!,
    signedInfo: Buffer.from(canonical(signedInfo)),
    privateKey,
    finish(value: Buffer) {
      ds(signature, 'SignatureValue', {}, value.toString('base64'));
      const x509 = ds(ds(signature, 'KeyInfo'), 'X509Data');
      for (const certificate of certificates) ds(x509, 'X509Certificate', {}, certificate);
    },
  };
}

/** The base64 of each certificate in a PEM text, as KeyInfo publishes it. */
function pemBodies(pem: string): string[] {
  return [...pem.matchAll(/-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+?)-----END CERTIFICATE-----/g)].map((m) =>
    m[1]!.replace(/\s+/g, ''),
  );
}
