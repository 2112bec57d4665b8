// An identity provider's SAML metadata, read into what the service provider acts on: where its
// single sign-on endpoints are per binding, which certificates sign its Responses (the only keys a
// Response is ever checked with), which encrypt to it, and the scopes its scoped attributes may
// carry. Read as strictly as a service provider's (sp-descriptor.ts shares its rules).
import { childElements, textOf, type Element } from '../xml/index.ts';
import { refuseMetadata } from './errors.ts';
import { BINDING, MD, SAML2_PROTOCOL } from './namespaces.ts';
import {
  displayNameOf,
  isXmlTrue,
  readEndpoints,
  readEntityDescriptorDocument,
  readKeyDescriptors,
  registrationAuthorityOf,
  validUntilOf,
  type MetadataEndpoint,
  type ReadOptions,
} from './sp-descriptor.ts';

export interface IdpDescriptor {
  entityId: string;
  /** SingleSignOnService endpoints with the HTTP-Redirect or HTTP-POST binding (others are left out) */
  singleSignOnServices: MetadataEndpoint[];
  singleLogoutServices: MetadataEndpoint[];
  /** PEM, from KeyDescriptor use="signing" or no use: the only keys a Response is checked with */
  signingCertificates: string[];
  /** PEM, from KeyDescriptor use="encryption" or no use */
  encryptionCertificates: string[];
  wantAuthnRequestsSigned: boolean;
  nameIdFormats: string[];
  /** shibmd:Scope values (regexp="false" ones only): the realms eduPersonPrincipalName may be in */
  scopes: string[];
  /** mdui:DisplayName (en preferred) or Organization */
  displayName?: string;
  /** mdui:Logo (an https URL), the largest one */
  logoUrl?: string;
  registrationAuthority?: string;
  /** ms */
  validUntil?: number;
}

/** IdP metadata documents are small; an aggregate is read by other means. */
export const MAX_IDP_METADATA_BYTES = 1024 * 1024;
const MAX_ENTITY_ID = 1024;

/**
 * One identity provider's metadata document (an md:EntityDescriptor), parsed strictly, validated
 * against the metadata schemas, and read. Every refusal is a MetadataError or the XML layer's
 * XmlSecurityError, both 400s whose message says what is wrong.
 */
export async function parseIdpMetadata(xml: string | Buffer, options: ReadOptions = {}): Promise<IdpDescriptor> {
  return readEntityDescriptorDocument(xml, MAX_IDP_METADATA_BYTES, (root) => idpDescriptorOf(root, options));
}

/** One md:EntityDescriptor's IDPSSODescriptor (of a document already parsed and schema-validated), read. */
export function idpDescriptorOf(entityDescriptor: Element, options: ReadOptions = {}): IdpDescriptor {
  const entityId = entityDescriptor.getAttribute('entityID') ?? '';
  if (!entityId || entityId.length > MAX_ENTITY_ID || /\s/.test(entityId)) {
    throw refuseMetadata('the entityID must be a URI of 1 to 1024 characters without spaces');
  }
  const idp = childElements(entityDescriptor, MD.md, 'IDPSSODescriptor').find((d) =>
    (d.getAttribute('protocolSupportEnumeration') ?? '').split(/\s+/).includes(SAML2_PROTOCOL),
  );
  if (!idp)
    throw refuseMetadata(`${entityId} has no IDPSSODescriptor for SAML 2.0: it is not a SAML 2.0 identity provider`);
  const validUntil = validUntilOf(entityDescriptor, idp);
  const now = options.now ?? Date.now();
  if (validUntil !== undefined && validUntil <= now) {
    throw refuseMetadata(`the metadata of ${entityId} expired at ${new Date(validUntil).toISOString()} (validUntil)`);
  }
  const keys = readKeyDescriptors(idp, entityId);
  if (keys.signing.length === 0) {
    throw refuseMetadata(`${entityId} publishes no signing certificate: its Responses could not be checked`);
  }
  const sso = readEndpoints(idp, 'SingleSignOnService', entityId).filter(
    (e) => e.binding === BINDING.redirect || e.binding === BINDING.post,
  );
  if (sso.length === 0) {
    throw refuseMetadata(`${entityId} publishes no SingleSignOnService with the HTTP-Redirect or HTTP-POST binding`);
  }
  const displayName = displayNameOf(entityDescriptor, idp);
  const logoUrl = logoOf(idp);
  const registrationAuthority = registrationAuthorityOf(entityDescriptor);
  return {
    entityId,
    singleSignOnServices: sso,
    singleLogoutServices: readEndpoints(idp, 'SingleLogoutService', entityId),
    signingCertificates: keys.signing,
    encryptionCertificates: keys.encryption,
    wantAuthnRequestsSigned: isXmlTrue(idp.getAttribute('WantAuthnRequestsSigned')),
    nameIdFormats: childElements(idp, MD.md, 'NameIDFormat').map((e) => textOf(e).trim()),
    scopes: scopesOf(idp),
    ...(displayName ? { displayName } : {}),
    ...(logoUrl ? { logoUrl } : {}),
    ...(registrationAuthority ? { registrationAuthority } : {}),
    ...(validUntil !== undefined ? { validUntil } : {}),
  };
}

function extensionsOf(role: Element): Element[] {
  return childElements(role, MD.md, 'Extensions');
}

/** shibmd:Scope of the role; a regular-expression scope is left out (never matched as a pattern). */
function scopesOf(idp: Element): string[] {
  return extensionsOf(idp)
    .flatMap((ext) => childElements(ext, MD.shibmd, 'Scope'))
    .filter((scope) => !isXmlTrue(scope.getAttribute('regexp')))
    .map((scope) => textOf(scope).trim().toLowerCase())
    .filter((scope) => scope.length > 0);
}

/** The largest https mdui:Logo. */
function logoOf(idp: Element): string | undefined {
  const logos = extensionsOf(idp)
    .flatMap((ext) => childElements(ext, MD.mdui, 'UIInfo'))
    .flatMap((ui) => childElements(ui, MD.mdui, 'Logo'))
    .map((logo) => ({
      url: textOf(logo).trim(),
      area: Number(logo.getAttribute('width') ?? 0) * Number(logo.getAttribute('height') ?? 0),
    }))
    .filter((logo) => logo.url.startsWith('https://'))
    .sort((a, b) => b.area - a.area);
  return logos[0]?.url;
}

/** The endpoint to send an AuthnRequest to: the binding asked for, else the other one. */
export function singleSignOnService(
  descriptor: IdpDescriptor,
  preferred: 'redirect' | 'post' = 'redirect',
): { binding: 'redirect' | 'post'; location: string } {
  const order = preferred === 'redirect' ? [BINDING.redirect, BINDING.post] : [BINDING.post, BINDING.redirect];
  for (const binding of order) {
    const found = descriptor.singleSignOnServices.find((e) => e.binding === binding);
    if (found) return { binding: binding === BINDING.redirect ? 'redirect' : 'post', location: found.location };
  }
  throw refuseMetadata(`${descriptor.entityId} publishes no usable SingleSignOnService`);
}
