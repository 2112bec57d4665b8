// The service's own metadata as a SAML service provider (towards upstream identity providers):
// built as a DOM like the IdP's (idp-metadata.ts), signed with the metadata key. It says that
// AuthnRequests are signed and assertions must be, publishes the keys Responses may be encrypted
// to, one AssertionConsumerService (HTTP-POST), and asks for a subject identifier.
import { randomBytes } from 'node:crypto';
import { DOMImplementation } from '@xmldom/xmldom';
import { signEnveloped } from '../xml/index.ts';
import {
  ACCEPTED_ENCRYPTION,
  appendKeyDescriptor,
  appendOrganizationAndContacts,
  metadataBuilder,
  xsDateTime,
  xsDuration,
  type IdpContact,
} from './idp-metadata.ts';
import { ATTRNAME_FORMAT_URI, BINDING, ENTITY_ATTRIBUTE, MD, NAMEID_FORMAT, SAML2_PROTOCOL } from './namespaces.ts';

export interface SpMetadataInput {
  /** `<PUBLIC_URL>/saml2/sp/metadata` */
  entityId: string;
  /** the AssertionConsumerService (HTTP-POST) */
  acsUrl: string;
  /** PEM, every key AuthnRequests may be signed with (the next one before it signs) */
  signingCertificates: string[];
  /** PEM, every key assertions may be encrypted to */
  encryptionCertificates: string[];
  displayName?: string;
  organization?: { name: string; url: string };
  contacts?: IdpContact[];
  /** ms */
  validUntil: number;
  cacheDurationMs: number;
  signingKey: { privateKey: import('node:crypto').KeyObject; certificate: string };
}

/** The service provider's metadata document, signed with the metadata key. */
export function buildSpMetadata(input: SpMetadataInput): string {
  const doc = new DOMImplementation().createDocument(MD.md, 'md:EntityDescriptor', null);
  const root = doc.documentElement!;
  for (const [prefix, ns] of [
    ['ds', MD.ds],
    ['saml', MD.saml],
    ['mdui', MD.mdui],
    ['mdattr', MD.mdattr],
  ] as const)
    root.setAttributeNS(MD.xmlns, `xmlns:${prefix}`, ns);
  const id = `_${randomBytes(16).toString('hex')}`;
  root.setAttribute('ID', id);
  root.setAttribute('entityID', input.entityId);
  root.setAttribute('validUntil', xsDateTime(input.validUntil));
  root.setAttribute('cacheDuration', xsDuration(input.cacheDurationMs));
  const b = metadataBuilder(doc);
  // SAML V2.0 Subject Identifier Attributes Profile: either subject-id or pairwise-id will do.
  const attributes = b.el(b.el(root, MD.md, 'md:Extensions'), MD.mdattr, 'mdattr:EntityAttributes');
  const requirement = b.el(attributes, MD.saml, 'saml:Attribute', {
    Name: ENTITY_ATTRIBUTE.subjectIdReq,
    NameFormat: ATTRNAME_FORMAT_URI,
  });
  b.el(requirement, MD.saml, 'saml:AttributeValue', {}, 'any');
  const sp = b.el(root, MD.md, 'md:SPSSODescriptor', {
    AuthnRequestsSigned: 'true',
    WantAssertionsSigned: 'true',
    protocolSupportEnumeration: SAML2_PROTOCOL,
  });
  if (input.displayName) {
    const ui = b.el(b.el(sp, MD.md, 'md:Extensions'), MD.mdui, 'mdui:UIInfo');
    b.el(ui, MD.mdui, 'mdui:DisplayName', { 'xml:lang': 'en' }, input.displayName);
  }
  for (const pem of input.signingCertificates) appendKeyDescriptor(b, sp, 'signing', pem);
  for (const pem of input.encryptionCertificates) {
    const descriptor = appendKeyDescriptor(b, sp, 'encryption', pem);
    for (const algorithm of ACCEPTED_ENCRYPTION)
      b.el(descriptor, MD.md, 'md:EncryptionMethod', { Algorithm: algorithm });
  }
  b.el(sp, MD.md, 'md:NameIDFormat', {}, NAMEID_FORMAT.persistent);
  b.el(sp, MD.md, 'md:AssertionConsumerService', {
    Binding: BINDING.post,
    Location: input.acsUrl,
    index: '0',
    isDefault: 'true',
  });
  appendOrganizationAndContacts(b, root, input);
  return signEnveloped(doc, id, { privateKey: input.signingKey.privateKey, certificate: input.signingKey.certificate });
}
