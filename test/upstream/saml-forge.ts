// Responses made to order, for the refusals: an upstream IdP of the tests' own (a key pair and its
// metadata, built by the service's IdP metadata builder) whose Responses are built with the IdP
// side's Response builder and then signed, left unsigned, altered or wrapped as a case needs.
import { buildIdpMetadata, parseIdpMetadata, type IdpDescriptor } from '../../src/saml/metadata/index.ts';
import { NS, parseXml, serialize, signEnveloped, type Document } from '../../src/saml/xml/index.ts';
import { STATUS, statusResponse, successResponse } from '../../src/saml-idp/response.ts';
import { party, type Party } from '../saml/saml-fixtures.ts';

export interface ForgedIdp {
  entityId: string;
  key: Party;
  metadata: string;
  descriptor: IdpDescriptor;
}

/** An IdP of the tests' own: a signing key and metadata listing it (and `scopes`). */
export async function forgedIdp(
  entityId = 'https://idp.forged.example/idp',
  scopes = ['uni.example'],
  displayName?: string,
): Promise<ForgedIdp> {
  const key = await party(entityId);
  const metadata = buildIdpMetadata({
    entityId,
    ssoUrl: `${entityId.replace(/\/idp$/, '')}/sso`,
    sloUrl: `${entityId.replace(/\/idp$/, '')}/slo`,
    signingCertificates: [key.certificate],
    encryptionCertificates: [],
    scopes,
    ...(displayName ? { displayName } : {}),
    validUntil: Date.now() + 86400_000,
    cacheDurationMs: 3600_000,
    signingKey: { privateKey: key.privateKey, certificate: key.certificate },
  });
  return { entityId, key, metadata, descriptor: await parseIdpMetadata(metadata) };
}

export interface ForgeOptions {
  /** the ACS */
  destination: string;
  audience: string;
  inResponseTo?: string;
  /** what signs: the Response, the assertion, both or nothing (default response) */
  sign?: 'response' | 'assertion' | 'both' | 'none';
  /** signs with this key instead of the IdP's */
  signer?: Party;
  /** the Issuer written (default the IdP's entityID) */
  issuer?: string;
  nameId?: string;
  eppn?: string;
  now?: number;
  /** the AuthnStatement's AuthnInstant (default now) */
  authnInstant?: number;
  /** a status other than Success (no assertion then) */
  status?: string;
  /** changes the document before signing */
  edit?: (document: Document) => void;
}

const EPPN = 'urn:oid:1.3.6.1.4.1.5923.1.1.1.6';

/** The Response XML (not yet base64). */
export function forgeResponseXml(idp: ForgedIdp, options: ForgeOptions): string {
  const now = options.now ?? Date.now();
  const envelope = {
    idpEntityId: options.issuer ?? idp.entityId,
    destination: options.destination,
    inResponseTo: options.inResponseTo,
    now,
  };
  const signer = options.signer ?? idp.key;
  const key = { privateKey: signer.privateKey, certificate: signer.certificate };
  if (options.status) {
    const { document, responseId } = statusResponse(envelope, [STATUS.responder, options.status]);
    options.edit?.(document);
    return options.sign === 'none' ? serialize(document) : signEnveloped(document, responseId, key);
  }
  const { document, responseId, assertionId } = successResponse(envelope, {
    audience: options.audience,
    nameId: {
      value: options.nameId ?? 'opaque-subject-1',
      format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
    },
    authnInstant: options.authnInstant ?? now,
    sessionIndex: '_session1',
    classRef: 'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport',
    attributes: [{ name: EPPN, friendlyName: 'eduPersonPrincipalName', values: [options.eppn ?? 'ada@uni.example'] }],
  });
  options.edit?.(document);
  const sign = options.sign ?? 'response';
  let xml = serialize(document);
  if (sign === 'assertion' || sign === 'both') xml = signEnveloped(document, assertionId, key);
  if (sign === 'response' || sign === 'both') xml = signEnveloped(parseXml(xml).document, responseId, key);
  return xml;
}

export const b64 = (xml: string) => Buffer.from(xml, 'utf8').toString('base64');

/** The Response, base64 as the HTTP-POST binding carries it. */
export function forgeResponse(idp: ForgedIdp, options: ForgeOptions): string {
  return b64(forgeResponseXml(idp, options));
}

/**
 * XML Signature Wrapping: a genuinely signed assertion moved into an evil Response beside an evil
 * assertion of the attacker's (another subject), in one of the published shapes.
 */
export function wrapped(signedAssertionResponse: string, shape: 'sibling' | 'inside-evil' | 'extensions'): string {
  const parsed = parseXml(signedAssertionResponse);
  const document = parsed.document;
  const response = parsed.root;
  const original = [...childElementsOf(response)].find((e) => e.localName === 'Assertion')!;
  const evil = original.cloneNode(true) as unknown as import('@xmldom/xmldom').Element;
  evil.setAttribute('ID', '_evil');
  for (const sig of [...childElementsOf(evil)].filter((e) => e.localName === 'Signature')) evil.removeChild(sig);
  const nameId = evil.getElementsByTagNameNS(NS.assertion, 'NameID')[0]!;
  nameId.textContent = 'victim-subject';
  if (shape === 'sibling') {
    response.insertBefore(evil, original);
  } else if (shape === 'inside-evil') {
    response.replaceChild(evil, original);
    evil.appendChild(original);
  } else {
    const extensions = document.createElementNS(NS.protocol, 'samlp:Extensions');
    response.replaceChild(evil, original);
    extensions.appendChild(original);
    response.insertBefore(extensions, childElementsOf(response)[1] ?? null);
  }
  return serialize(document);
}

function childElementsOf(element: import('@xmldom/xmldom').Element) {
  const found: import('@xmldom/xmldom').Element[] = [];
  for (let c = element.firstChild; c; c = c.nextSibling) if (c.nodeType === 1) found.push(c as never);
  return found;
}
