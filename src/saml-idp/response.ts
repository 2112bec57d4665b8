// The Response the SP receives, built as a DOM document (never by string templates, so no value
// can change the markup), signed as the SP chose (RSA-SHA256, exclusive canonicalization) with the
// IdP's signing key, and its assertion encrypted for the SP when it publishes an encryption key.
import { randomBytes } from 'node:crypto';
import { DOMImplementation } from '@xmldom/xmldom';
import {
  childElements,
  encryptAssertion,
  ENCRYPTION,
  KEY_TRANSPORT,
  NS,
  serialize,
  signElementInPool,
  type ContentEncryption,
  type Document,
  type Element,
  type KeyTransport,
} from '../saml/xml/index.ts';
import { ATTRNAME_FORMAT_URI } from '../saml/metadata/index.ts';
import type { SamlAttributeValue } from '../directory/attribute-release.ts';
import type { SamlKey, ServiceProvider } from '../service-providers/index.ts';
import type { NameId } from './subject.ts';

export const STATUS = {
  success: 'urn:oasis:names:tc:SAML:2.0:status:Success',
  requester: 'urn:oasis:names:tc:SAML:2.0:status:Requester',
  responder: 'urn:oasis:names:tc:SAML:2.0:status:Responder',
  noPassive: 'urn:oasis:names:tc:SAML:2.0:status:NoPassive',
  noAuthnContext: 'urn:oasis:names:tc:SAML:2.0:status:NoAuthnContext',
  requestDenied: 'urn:oasis:names:tc:SAML:2.0:status:RequestDenied',
  invalidNameIdPolicy: 'urn:oasis:names:tc:SAML:2.0:status:InvalidNameIDPolicy',
  authnFailed: 'urn:oasis:names:tc:SAML:2.0:status:AuthnFailed',
  partialLogout: 'urn:oasis:names:tc:SAML:2.0:status:PartialLogout',
  unknownPrincipal: 'urn:oasis:names:tc:SAML:2.0:status:UnknownPrincipal',
} as const;

const XMLNS = 'http://www.w3.org/2000/xmlns/';
const XS = 'http://www.w3.org/2001/XMLSchema';
const XSI = 'http://www.w3.org/2001/XMLSchema-instance';
const BEARER = 'urn:oasis:names:tc:SAML:2.0:cm:bearer';
/** How long the assertion may be presented: a browser's round trip, with room for a slow one. */
export const ASSERTION_LIFETIME_MS = 5 * 60_000;

export const newId = () => `_${randomBytes(20).toString('hex')}`;
export const samlTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Where a message goes and what it answers. */
export interface Envelope {
  idpEntityId: string;
  destination: string;
  inResponseTo: string | undefined;
  now: number;
}

export interface AssertionContent {
  audience: string;
  nameId: NameId | undefined;
  authnInstant: number;
  sessionIndex: string;
  classRef: string;
  attributes: SamlAttributeValue[];
}

export function child(document: Document, parent: Element, namespace: string, name: string, text?: string): Element {
  const element = document.createElementNS(namespace, name);
  if (text !== undefined) element.appendChild(document.createTextNode(text));
  parent.appendChild(element);
  return element;
}

/** A protocol message's root with ID, Version, IssueInstant, Destination, InResponseTo and Issuer. */
export function messageDocument(kind: string, envelope: Envelope): { document: Document; root: Element; id: string } {
  const document = new DOMImplementation().createDocument(NS.protocol, `samlp:${kind}`, null);
  const root = document.documentElement!;
  root.setAttributeNS(XMLNS, 'xmlns:saml', NS.assertion);
  const id = newId();
  root.setAttribute('ID', id);
  root.setAttribute('Version', '2.0');
  root.setAttribute('IssueInstant', samlTime(envelope.now));
  root.setAttribute('Destination', envelope.destination);
  if (envelope.inResponseTo) root.setAttribute('InResponseTo', envelope.inResponseTo);
  child(document, root, NS.assertion, 'saml:Issuer', envelope.idpEntityId);
  return { document, root, id };
}

/** A samlp:Status with a top-level code and, optionally, a second-level one. */
export function appendStatus(document: Document, root: Element, codes: readonly string[], message?: string): void {
  const status = child(document, root, NS.protocol, 'samlp:Status');
  let parent = status;
  for (const code of codes) {
    const element = child(document, parent, NS.protocol, 'samlp:StatusCode');
    element.setAttribute('Value', code);
    parent = element;
  }
  if (message) child(document, status, NS.protocol, 'samlp:StatusMessage', message);
}

/** The NameID an SP is given (in its assertion, and again in a LogoutRequest to it). */
export function appendNameId(
  document: Document,
  parent: Element,
  nameId: NameId,
  idpEntityId: string,
  spEntityId: string,
): void {
  const element = child(document, parent, NS.assertion, 'saml:NameID', nameId.value);
  element.setAttribute('Format', nameId.format);
  if (nameId.format.endsWith(':persistent') || nameId.format.endsWith(':transient')) {
    element.setAttribute('NameQualifier', idpEntityId);
    element.setAttribute('SPNameQualifier', spEntityId);
  }
}

function appendSubject(document: Document, assertion: Element, envelope: Envelope, content: AssertionContent): void {
  const subject = child(document, assertion, NS.assertion, 'saml:Subject');
  if (content.nameId) appendNameId(document, subject, content.nameId, envelope.idpEntityId, content.audience);
  const confirmation = child(document, subject, NS.assertion, 'saml:SubjectConfirmation');
  confirmation.setAttribute('Method', BEARER);
  const data = child(document, confirmation, NS.assertion, 'saml:SubjectConfirmationData');
  if (envelope.inResponseTo) data.setAttribute('InResponseTo', envelope.inResponseTo);
  data.setAttribute('NotOnOrAfter', samlTime(envelope.now + ASSERTION_LIFETIME_MS));
  data.setAttribute('Recipient', envelope.destination);
}

function appendAttributes(document: Document, assertion: Element, attributes: SamlAttributeValue[]): void {
  if (attributes.length === 0) return;
  const statement = child(document, assertion, NS.assertion, 'saml:AttributeStatement');
  for (const attribute of attributes) {
    const element = child(document, statement, NS.assertion, 'saml:Attribute');
    element.setAttribute('Name', attribute.name);
    element.setAttribute('NameFormat', ATTRNAME_FORMAT_URI);
    element.setAttribute('FriendlyName', attribute.friendlyName);
    for (const value of attribute.values) {
      if (attribute.nameId) {
        // a NameID as the value (eduPersonTargetedID), as the eduPerson specification has it
        const valueElement = child(document, element, NS.assertion, 'saml:AttributeValue');
        const nameId = child(document, valueElement, NS.assertion, 'saml:NameID', value);
        nameId.setAttribute('Format', attribute.nameId.format);
        nameId.setAttribute('NameQualifier', attribute.nameId.nameQualifier);
        nameId.setAttribute('SPNameQualifier', attribute.nameId.spNameQualifier);
        continue;
      }
      // typed as xs:string, as Shibboleth IdP and most others send them
      const valueElement = child(document, element, NS.assertion, 'saml:AttributeValue', value);
      valueElement.setAttributeNS(XMLNS, 'xmlns:xs', XS);
      valueElement.setAttributeNS(XMLNS, 'xmlns:xsi', XSI);
      valueElement.setAttributeNS(XSI, 'xsi:type', 'xs:string');
    }
  }
}

/** A successful Response with one assertion, unsigned and unencrypted yet. */
export function successResponse(
  envelope: Envelope,
  content: AssertionContent,
): { document: Document; responseId: string; assertionId: string } {
  const { document, root, id: responseId } = messageDocument('Response', envelope);
  appendStatus(document, root, [STATUS.success]);
  const assertion = child(document, root, NS.assertion, 'saml:Assertion');
  const assertionId = newId();
  assertion.setAttribute('ID', assertionId);
  assertion.setAttribute('Version', '2.0');
  assertion.setAttribute('IssueInstant', samlTime(envelope.now));
  child(document, assertion, NS.assertion, 'saml:Issuer', envelope.idpEntityId);
  appendSubject(document, assertion, envelope, content);
  const conditions = child(document, assertion, NS.assertion, 'saml:Conditions');
  conditions.setAttribute('NotBefore', samlTime(envelope.now - 60_000));
  conditions.setAttribute('NotOnOrAfter', samlTime(envelope.now + ASSERTION_LIFETIME_MS));
  const restriction = child(document, conditions, NS.assertion, 'saml:AudienceRestriction');
  child(document, restriction, NS.assertion, 'saml:Audience', content.audience);
  const authn = child(document, assertion, NS.assertion, 'saml:AuthnStatement');
  authn.setAttribute('AuthnInstant', samlTime(content.authnInstant));
  authn.setAttribute('SessionIndex', content.sessionIndex);
  const context = child(document, authn, NS.assertion, 'saml:AuthnContext');
  child(document, context, NS.assertion, 'saml:AuthnContextClassRef', content.classRef);
  appendAttributes(document, assertion, content.attributes);
  return { document, responseId, assertionId };
}

/** A Response with a status and no assertion (NoPassive, RequestDenied, ...). */
export function statusResponse(
  envelope: Envelope,
  codes: readonly string[],
  message?: string,
): { document: Document; responseId: string } {
  const { document, root, id } = messageDocument('Response', envelope);
  appendStatus(document, root, codes, message);
  return { document, responseId: id };
}

export interface EncryptionChoice {
  certificate: string;
  encryptionAlgorithm: ContentEncryption;
  keyTransport: KeyTransport;
}

const GCM_PREFERENCE: ContentEncryption[] = [ENCRYPTION.aes256Gcm, ENCRYPTION.aes128Gcm];
const CBC_PREFERENCE: ContentEncryption[] = [ENCRYPTION.aes256Cbc, ENCRYPTION.aes128Cbc];

/**
 * How the SP's assertion is encrypted, or undefined for none: AES-256-GCM with rsa-oaep-mgf1p by
 * default; what the SP's metadata lists when it lists something we support (GCM first); AES-CBC
 * only when it lists CBC and no GCM. `encrypt` never: none; always: an SP without a key is refused.
 */
export function encryptionFor(sp: ServiceProvider): EncryptionChoice | undefined {
  if (sp.encrypt === 'never') return undefined;
  const certificate = sp.descriptor.encryptionCertificates[0];
  if (!certificate) {
    if (sp.encrypt === 'always') throw new Error('the service provider publishes no encryption key');
    return undefined;
  }
  const listed = sp.descriptor.encryptionMethods;
  const content =
    GCM_PREFERENCE.find((a) => listed.includes(a)) ??
    (listed.some((a) => (CBC_PREFERENCE as string[]).includes(a))
      ? CBC_PREFERENCE.find((a) => listed.includes(a))
      : undefined) ??
    ENCRYPTION.aes256Gcm;
  const transports = listed.filter((a) => (Object.values(KEY_TRANSPORT) as string[]).includes(a)) as KeyTransport[];
  const keyTransport =
    transports.includes(KEY_TRANSPORT.rsaOaepMgf1p) || transports.length === 0
      ? KEY_TRANSPORT.rsaOaepMgf1p
      : transports[0]!;
  return { certificate, encryptionAlgorithm: content, keyTransport };
}

/** What to sign: the SP's choice, and the assertion too when its metadata wants signed assertions. */
export function signaturesFor(sp: ServiceProvider): { response: boolean; assertion: boolean } {
  return {
    response: sp.sign === 'response' || sp.sign === 'both',
    assertion: sp.sign === 'assertion' || sp.sign === 'both' || sp.descriptor.wantAssertionsSigned,
  };
}

/**
 * The finished Response XML: the assertion signed (when chosen), then encrypted (when the SP has
 * a key), then the Response signed (when chosen). Each signature is made over the document as it
 * stands then, so the Response's covers the encrypted assertion.
 */
export async function finishResponse(
  built: { document: Document; responseId: string; assertionId?: string },
  sp: ServiceProvider,
  key: SamlKey,
): Promise<string> {
  const signing = { privateKey: key.privateKey, certificate: key.certificate };
  const signatures = signaturesFor(sp);
  const document = built.document;
  if (built.assertionId && signatures.assertion) await signElementInPool(document, built.assertionId, signing);
  const encryption = built.assertionId ? encryptionFor(sp) : undefined;
  if (encryption) {
    const assertion = childElements(document.documentElement!, NS.assertion, 'Assertion')[0]!;
    encryptAssertion(document, assertion, encryption);
  }
  // A Response without an assertion (a status) is always signed: nothing else in it is.
  if (signatures.response || !built.assertionId) await signElementInPool(document, built.responseId, signing);
  return serialize(document);
}
