// The identity provider's own metadata: built as a DOM (never from string templates, so no name or
// URL can inject markup), signed with the metadata key (enveloped, RSA-SHA256, exclusive c14n).
import { randomBytes } from 'node:crypto';
import { DOMImplementation, type Document, type Element } from '@xmldom/xmldom';
import { readCertificate, signEnveloped, ENCRYPTION, KEY_TRANSPORT } from '../xml/index.ts';
import { ATTRNAME_FORMAT_URI, BINDING, ENTITY_ATTRIBUTE, MD, NAMEID_FORMAT, SAML2_PROTOCOL } from './namespaces.ts';

export interface IdpLogo {
  /** absolute https URL */
  url: string;
  width: number;
  height: number;
}

export interface IdpContact {
  type: 'technical' | 'support' | 'administrative' | 'other';
  email: string;
  givenName?: string;
}

export interface IdpMetadataInput {
  /** `<PUBLIC_URL>/saml2/idp/metadata` */
  entityId: string;
  ssoUrl: string;
  sloUrl: string;
  /** PEM, every published signing key */
  signingCertificates: string[];
  /** PEM, every published encryption key */
  encryptionCertificates: string[];
  /** realms the IdP asserts scoped attributes in (shibmd:Scope) */
  scopes: string[];
  displayName?: string;
  logo?: IdpLogo;
  privacyStatementUrl?: string;
  informationUrl?: string;
  organization?: { name: string; url: string };
  contacts?: IdpContact[];
  /** http://macedir.org/entity-category-support values */
  entityCategorySupport?: string[];
  /** ms */
  validUntil: number;
  cacheDurationMs: number;
  /** the metadata signing key */
  signingKey: { privateKey: import('node:crypto').KeyObject; certificate: string };
}

/** Subject identifiers the IdP can release (SAML V2.0 Subject Identifier Attributes Profile). */
const SUBJECT_IDS = [
  { name: 'urn:oasis:names:tc:SAML:attribute:subject-id', friendlyName: 'subject-id' },
  { name: 'urn:oasis:names:tc:SAML:attribute:pairwise-id', friendlyName: 'pairwise-id' },
];

/** xs:duration of whole seconds. */
export function xsDuration(ms: number): string {
  return `PT${Math.max(1, Math.round(ms / 1000))}S`;
}

/** xs:dateTime in UTC, to the second. */
export const xsDateTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export interface MetadataBuilder {
  el(
    parent: Element | Document,
    ns: string,
    qualified: string,
    attributes?: Record<string, string>,
    text?: string,
  ): Element;
}

/** Appends elements to a document: attributes set one by one, text as a text node (escaped when serialized). */
export function metadataBuilder(doc: Document): MetadataBuilder {
  return {
    el(parent, ns, qualified, attributes = {}, text) {
      const element = doc.createElementNS(ns, qualified);
      for (const [name, value] of Object.entries(attributes)) {
        if (name === 'xml:lang') element.setAttributeNS(MD.xml, name, value);
        else element.setAttribute(name, value);
      }
      if (text !== undefined) element.appendChild(doc.createTextNode(text));
      parent.appendChild(element);
      return element;
    },
  };
}

export function appendKeyDescriptor(
  b: MetadataBuilder,
  parent: Element,
  use: 'signing' | 'encryption',
  pem: string,
): Element {
  const descriptor = b.el(parent, MD.md, 'md:KeyDescriptor', { use });
  const info = b.el(descriptor, MD.ds, 'ds:KeyInfo');
  b.el(b.el(info, MD.ds, 'ds:X509Data'), MD.ds, 'ds:X509Certificate', {}, readCertificate(pem).base64);
  return descriptor;
}

/** What the encryption keys accept: AES-GCM content, RSA-OAEP (MGF1, SHA-1 digest) key transport. */
export const ACCEPTED_ENCRYPTION = [ENCRYPTION.aes256Gcm, ENCRYPTION.aes128Gcm, KEY_TRANSPORT.rsaOaepMgf1p];

function roleExtensions(b: MetadataBuilder, idp: Element, input: IdpMetadataInput): void {
  const hasUi = input.displayName || input.logo || input.privacyStatementUrl || input.informationUrl;
  if (input.scopes.length === 0 && !hasUi) return;
  const extensions = b.el(idp, MD.md, 'md:Extensions');
  for (const scope of input.scopes) b.el(extensions, MD.shibmd, 'shibmd:Scope', { regexp: 'false' }, scope);
  if (!hasUi) return;
  const ui = b.el(extensions, MD.mdui, 'mdui:UIInfo');
  if (input.displayName) b.el(ui, MD.mdui, 'mdui:DisplayName', { 'xml:lang': 'en' }, input.displayName);
  if (input.informationUrl) b.el(ui, MD.mdui, 'mdui:InformationURL', { 'xml:lang': 'en' }, input.informationUrl);
  if (input.privacyStatementUrl)
    b.el(ui, MD.mdui, 'mdui:PrivacyStatementURL', { 'xml:lang': 'en' }, input.privacyStatementUrl);
  if (input.logo) {
    const { url, width, height } = input.logo;
    b.el(ui, MD.mdui, 'mdui:Logo', { height: String(height), width: String(width) }, url);
  }
}

function idpDescriptor(b: MetadataBuilder, root: Element, input: IdpMetadataInput): void {
  const idp = b.el(root, MD.md, 'md:IDPSSODescriptor', { protocolSupportEnumeration: SAML2_PROTOCOL });
  roleExtensions(b, idp, input);
  for (const pem of input.signingCertificates) appendKeyDescriptor(b, idp, 'signing', pem);
  for (const pem of input.encryptionCertificates) {
    const descriptor = appendKeyDescriptor(b, idp, 'encryption', pem);
    for (const algorithm of ACCEPTED_ENCRYPTION)
      b.el(descriptor, MD.md, 'md:EncryptionMethod', { Algorithm: algorithm });
  }
  for (const binding of [BINDING.redirect, BINDING.post])
    b.el(idp, MD.md, 'md:SingleLogoutService', { Binding: binding, Location: input.sloUrl });
  for (const format of [
    NAMEID_FORMAT.persistent,
    NAMEID_FORMAT.transient,
    NAMEID_FORMAT.email,
    NAMEID_FORMAT.unspecified,
  ])
    b.el(idp, MD.md, 'md:NameIDFormat', {}, format);
  for (const binding of [BINDING.redirect, BINDING.post])
    b.el(idp, MD.md, 'md:SingleSignOnService', { Binding: binding, Location: input.ssoUrl });
  for (const id of SUBJECT_IDS)
    b.el(idp, MD.saml, 'saml:Attribute', {
      Name: id.name,
      NameFormat: ATTRNAME_FORMAT_URI,
      FriendlyName: id.friendlyName,
    });
}

function entityExtensions(b: MetadataBuilder, root: Element, input: IdpMetadataInput): void {
  const support = input.entityCategorySupport ?? [];
  if (support.length === 0) return;
  const attributes = b.el(b.el(root, MD.md, 'md:Extensions'), MD.mdattr, 'mdattr:EntityAttributes');
  const attribute = b.el(attributes, MD.saml, 'saml:Attribute', {
    Name: ENTITY_ATTRIBUTE.categorySupport,
    NameFormat: ATTRNAME_FORMAT_URI,
  });
  for (const value of support) b.el(attribute, MD.saml, 'saml:AttributeValue', {}, value);
}

export function appendOrganizationAndContacts(
  b: MetadataBuilder,
  root: Element,
  input: Pick<IdpMetadataInput, 'organization' | 'contacts'>,
): void {
  if (input.organization) {
    const org = b.el(root, MD.md, 'md:Organization');
    b.el(org, MD.md, 'md:OrganizationName', { 'xml:lang': 'en' }, input.organization.name);
    b.el(org, MD.md, 'md:OrganizationDisplayName', { 'xml:lang': 'en' }, input.organization.name);
    b.el(org, MD.md, 'md:OrganizationURL', { 'xml:lang': 'en' }, input.organization.url);
  }
  for (const contact of input.contacts ?? []) {
    const person = b.el(root, MD.md, 'md:ContactPerson', { contactType: contact.type });
    if (contact.givenName) b.el(person, MD.md, 'md:GivenName', {}, contact.givenName);
    b.el(person, MD.md, 'md:EmailAddress', {}, `mailto:${contact.email}`);
  }
}

/** The IdP's metadata document, signed with the metadata key. */
export function buildIdpMetadata(input: IdpMetadataInput): string {
  const doc = new DOMImplementation().createDocument(MD.md, 'md:EntityDescriptor', null);
  const root = doc.documentElement!;
  for (const [prefix, ns] of [
    ['ds', MD.ds],
    ['saml', MD.saml],
    ['mdui', MD.mdui],
    ['mdattr', MD.mdattr],
    ['shibmd', MD.shibmd],
  ] as const)
    root.setAttributeNS(MD.xmlns, `xmlns:${prefix}`, ns);
  const id = `_${randomBytes(16).toString('hex')}`;
  root.setAttribute('ID', id);
  root.setAttribute('entityID', input.entityId);
  root.setAttribute('validUntil', xsDateTime(input.validUntil));
  root.setAttribute('cacheDuration', xsDuration(input.cacheDurationMs));
  const b = metadataBuilder(doc);
  entityExtensions(b, root, input);
  idpDescriptor(b, root, input);
  appendOrganizationAndContacts(b, root, input);
  return signEnveloped(doc, id, { privateKey: input.signingKey.privateKey, certificate: input.signingKey.certificate });
}
