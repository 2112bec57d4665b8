// A service provider's SAML metadata, read into what the identity provider acts on. Endpoints and
// certificates come only from here (never from a message), so every rule that keeps a Response
// away from an address the SP did not publish starts with what this accepts.
import {
  certificateToPem,
  childElements,
  parseXml,
  readCertificate,
  rsaPublicKey,
  textOf,
  validateSchema,
  XmlSecurityError,
  type Element,
} from '../xml/index.ts';
import { refuseMetadata } from './errors.ts';
import { BINDING, ENTITY_ATTRIBUTE, MD, SAML2_PROTOCOL } from './namespaces.ts';

export interface MetadataEndpoint {
  binding: string;
  location: string;
  responseLocation?: string;
  index?: number;
  isDefault?: boolean;
}

export interface SpDescriptor {
  entityId: string;
  assertionConsumerServices: MetadataEndpoint[];
  singleLogoutServices: MetadataEndpoint[];
  /** PEM, from KeyDescriptor use="signing" or no use */
  signingCertificates: string[];
  /** PEM, from KeyDescriptor use="encryption" or no use */
  encryptionCertificates: string[];
  /** md:EncryptionMethod Algorithm URIs of the encryption keys */
  encryptionMethods: string[];
  authnRequestsSigned: boolean;
  wantAssertionsSigned: boolean;
  nameIdFormats: string[];
  /** mdattr EntityAttributes http://macedir.org/entity-category */
  entityCategories: string[];
  /** http://macedir.org/entity-category-support */
  entityCategorySupport: string[];
  /** urn:oasis:names:tc:SAML:profiles:subject-id:req */
  subjectIdRequirement?: 'subject-id' | 'pairwise-id' | 'any' | 'none';
  requestedAttributes: { name: string; isRequired: boolean }[];
  /** mdui:DisplayName (en preferred) or Organization */
  displayName?: string;
  /** mdrpi */
  registrationAuthority?: string;
  /** ms */
  validUntil?: number;
}

export interface ReadOptions {
  /** the time expiry is judged against (ms; default now) */
  now?: number;
}

/** SP metadata documents are small (tens of kilobytes); an aggregate is read by other means. */
export const MAX_SP_METADATA_BYTES = 1024 * 1024;
/** SAML 2.0 core 8.3.6: an entity identifier is at most 1024 characters. */
const MAX_ENTITY_ID = 1024;

/**
 * One service provider's metadata document (an md:EntityDescriptor), parsed strictly, validated
 * against the metadata schemas, and read. Every refusal is a {@link MetadataError} or the XML
 * layer's XmlSecurityError, both 400s with a message that says what is wrong.
 */
export async function parseSpMetadata(xml: string | Buffer, options: ReadOptions = {}): Promise<SpDescriptor> {
  return readEntityDescriptorDocument(xml, MAX_SP_METADATA_BYTES, (root) => spDescriptorOf(root, options));
}

/**
 * One entity's metadata document, of either role: parsed strictly, its root checked to be one
 * md:EntityDescriptor, read by `read`, then validated against the metadata schemas. Reading comes
 * first, so a document that breaks one of the reader's rules is refused with that rule's message.
 */
export async function readEntityDescriptorDocument<T>(
  xml: string | Buffer,
  maxXmlBytes: number,
  read: (entityDescriptor: Element) => T,
): Promise<T> {
  const parsed = parseXml(xml, { maxXmlBytes });
  if (parsed.root.namespaceURI === MD.md && parsed.root.localName === 'EntitiesDescriptor') {
    throw refuseMetadata('the document is an aggregate (EntitiesDescriptor); give one EntityDescriptor');
  }
  if (parsed.root.namespaceURI !== MD.md || parsed.root.localName !== 'EntityDescriptor') {
    throw refuseMetadata('the document is not SAML metadata: its root is not an md:EntityDescriptor');
  }
  const descriptor = read(parsed.root);
  try {
    await validateSchema(parsed, 'metadata');
  } catch (err) {
    if (!(err instanceof XmlSecurityError)) throw err;
    const first = (err.detail ?? '').split('; ')[0]?.slice(0, 300);
    throw refuseMetadata(`the metadata is not valid against the SAML metadata schema${first ? `: ${first}` : ''}`);
  }
  return descriptor;
}

/** One md:EntityDescriptor (of a document already parsed and schema-validated, or of an aggregate), read. */
export function spDescriptorOf(entityDescriptor: Element, options: ReadOptions = {}): SpDescriptor {
  const entityId = entityDescriptor.getAttribute('entityID') ?? '';
  if (!entityId || entityId.length > MAX_ENTITY_ID || /\s/.test(entityId)) {
    throw refuseMetadata('the entityID must be a URI of 1 to 1024 characters without spaces');
  }
  const sp = childElements(entityDescriptor, MD.md, 'SPSSODescriptor').find((d) =>
    (d.getAttribute('protocolSupportEnumeration') ?? '').split(/\s+/).includes(SAML2_PROTOCOL),
  );
  if (!sp)
    throw refuseMetadata(`${entityId} has no SPSSODescriptor for SAML 2.0: it is not a SAML 2.0 service provider`);
  const validUntil = validUntilOf(entityDescriptor, sp);
  const now = options.now ?? Date.now();
  if (validUntil !== undefined && validUntil <= now) {
    throw refuseMetadata(`the metadata of ${entityId} expired at ${new Date(validUntil).toISOString()} (validUntil)`);
  }
  const keys = readKeyDescriptors(sp, entityId);
  // An SP that says it signs its requests must publish the key they are checked with.
  if (isXmlTrue(sp.getAttribute('AuthnRequestsSigned')) && keys.signing.length === 0) {
    throw refuseMetadata(`${entityId} says AuthnRequestsSigned but publishes no signing certificate`);
  }
  const entityAttributes = entityAttributesOf(entityDescriptor);
  const subjectIdRequirement = subjectIdRequirementOf(entityAttributes.get(ENTITY_ATTRIBUTE.subjectIdReq));
  const displayName = displayNameOf(entityDescriptor, sp);
  const registrationAuthority = registrationAuthorityOf(entityDescriptor);
  return {
    entityId,
    assertionConsumerServices: assertionConsumerServices(sp, entityId),
    singleLogoutServices: readEndpoints(sp, 'SingleLogoutService', entityId),
    signingCertificates: keys.signing,
    encryptionCertificates: keys.encryption,
    encryptionMethods: keys.encryptionMethods,
    authnRequestsSigned: isXmlTrue(sp.getAttribute('AuthnRequestsSigned')),
    wantAssertionsSigned: isXmlTrue(sp.getAttribute('WantAssertionsSigned')),
    nameIdFormats: childElements(sp, MD.md, 'NameIDFormat').map((e) => textOf(e).trim()),
    entityCategories: entityAttributes.get(ENTITY_ATTRIBUTE.category) ?? [],
    entityCategorySupport: entityAttributes.get(ENTITY_ATTRIBUTE.categorySupport) ?? [],
    ...(subjectIdRequirement ? { subjectIdRequirement } : {}),
    requestedAttributes: requestedAttributes(sp),
    ...(displayName ? { displayName } : {}),
    ...(registrationAuthority ? { registrationAuthority } : {}),
    ...(validUntil !== undefined ? { validUntil } : {}),
  };
}

export const isXmlTrue = (value: string | null): boolean => value === 'true' || value === '1';

/** The earliest validUntil of the descriptor, its entity and every enclosing EntitiesDescriptor. */
export function validUntilOf(entityDescriptor: Element, sp: Element): number | undefined {
  let earliest: number | undefined;
  const consider = (element: Element) => {
    const value = element.getAttribute('validUntil');
    if (!value) return;
    const at = Date.parse(value);
    if (Number.isNaN(at)) throw refuseMetadata('a validUntil is not a date and time');
    earliest = earliest === undefined ? at : Math.min(earliest, at);
  };
  consider(sp);
  for (let node: Element | null = entityDescriptor; node; node = parentElement(node)) consider(node);
  return earliest;
}

function parentElement(element: Element): Element | null {
  const parent = element.parentNode;
  return parent && parent.nodeType === 1 ? (parent as Element) : null;
}

const LOOPBACK = /^(localhost|127(?:\.\d{1,3}){3}|\[::1\])$/;

/** https, or http on a loopback host (tests, development); nothing else is an address a browser is sent to. */
export function checkLocation(location: string, what: string, entityId: string): string {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    throw refuseMetadata(`${entityId}: the ${what} location '${location.slice(0, 200)}' is not an absolute URL`);
  }
  const loopbackHttp = url.protocol === 'http:' && LOOPBACK.test(url.hostname);
  if (url.protocol !== 'https:' && !loopbackHttp) {
    throw refuseMetadata(
      `${entityId}: the ${what} location '${location.slice(0, 200)}' must use https (http only for localhost)`,
    );
  }
  if (url.username || url.password) {
    throw refuseMetadata(`${entityId}: the ${what} location must not carry a user name or password`);
  }
  return location;
}

export function readEndpoints(sp: Element, name: string, entityId: string): MetadataEndpoint[] {
  return childElements(sp, MD.md, name).map((e) => {
    const endpoint: MetadataEndpoint = {
      binding: e.getAttribute('Binding') ?? '',
      location: checkLocation(e.getAttribute('Location') ?? '', name, entityId),
    };
    const responseLocation = e.getAttribute('ResponseLocation');
    if (responseLocation) endpoint.responseLocation = checkLocation(responseLocation, name, entityId);
    const index = e.getAttribute('index');
    if (index !== null && index !== '') endpoint.index = Number(index);
    const isDefault = e.getAttribute('isDefault');
    if (isDefault !== null && isDefault !== '') endpoint.isDefault = isXmlTrue(isDefault);
    return endpoint;
  });
}

function assertionConsumerServices(sp: Element, entityId: string): MetadataEndpoint[] {
  const acs = readEndpoints(sp, 'AssertionConsumerService', entityId);
  if (acs.length === 0) throw refuseMetadata(`${entityId} publishes no AssertionConsumerService`);
  const seen = new Set<number>();
  for (const endpoint of acs) {
    if (endpoint.index === undefined || !Number.isSafeInteger(endpoint.index) || endpoint.index < 0) {
      throw refuseMetadata(`${entityId}: every AssertionConsumerService needs an index from 0 to 65535`);
    }
    if (seen.has(endpoint.index)) {
      throw refuseMetadata(`${entityId}: two AssertionConsumerServices have index ${endpoint.index}`);
    }
    seen.add(endpoint.index);
  }
  // Responses travel by HTTP-POST only (the identity provider offers no artifact resolution).
  if (!acs.some((endpoint) => endpoint.binding === BINDING.post)) {
    throw refuseMetadata(`${entityId} publishes no AssertionConsumerService with the HTTP-POST binding`);
  }
  return acs;
}

export interface DescriptorKeys {
  signing: string[];
  encryption: string[];
  encryptionMethods: string[];
}

/** Certificates of the descriptor's KeyDescriptors, each read (RSA, 2048 bits or more) before it is kept. */
export function readKeyDescriptors(sp: Element, entityId: string): DescriptorKeys {
  const keys: DescriptorKeys = { signing: [], encryption: [], encryptionMethods: [] };
  for (const descriptor of childElements(sp, MD.md, 'KeyDescriptor')) {
    const use = descriptor.getAttribute('use') || '';
    const certificates = childElements(descriptor, MD.ds, 'KeyInfo')
      .flatMap((info) => childElements(info, MD.ds, 'X509Data'))
      .flatMap((data) => childElements(data, MD.ds, 'X509Certificate'))
      .map((e) => checkCertificate(textOf(e), entityId));
    if (certificates.length === 0) {
      throw refuseMetadata(
        `${entityId}: a KeyDescriptor holds no X509Certificate (keys are taken only from certificates)`,
      );
    }
    if (use !== 'encryption') keys.signing.push(...certificates);
    if (use !== 'signing') {
      keys.encryption.push(...certificates);
      for (const method of childElements(descriptor, MD.md, 'EncryptionMethod')) {
        const algorithm = method.getAttribute('Algorithm');
        if (algorithm && !keys.encryptionMethods.includes(algorithm)) keys.encryptionMethods.push(algorithm);
      }
    }
  }
  return keys;
}

function checkCertificate(base64: string, entityId: string): string {
  const pem = certificateToPem(base64.replace(/\s+/g, ''));
  try {
    readCertificate(pem);
  } catch {
    throw refuseMetadata(`${entityId}: a KeyDescriptor's X509Certificate is not a readable certificate`);
  }
  try {
    rsaPublicKey(pem);
  } catch {
    throw refuseMetadata(`${entityId}: a KeyDescriptor's certificate must carry an RSA key of 2048 bits or more`);
  }
  return pem;
}

/** md:Extensions/mdattr:EntityAttributes: each attribute name with its values. */
export function entityAttributesOf(entityDescriptor: Element): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const attributes = childElements(entityDescriptor, MD.md, 'Extensions')
    .flatMap((ext) => childElements(ext, MD.mdattr, 'EntityAttributes'))
    .flatMap((ea) => childElements(ea, MD.saml, 'Attribute'));
  for (const attribute of attributes) {
    const name = attribute.getAttribute('Name') ?? '';
    const values = childElements(attribute, MD.saml, 'AttributeValue').map((v) => textOf(v).trim());
    found.set(name, [...(found.get(name) ?? []), ...values]);
  }
  return found;
}

const SUBJECT_ID_REQUIREMENTS = ['subject-id', 'pairwise-id', 'any', 'none'] as const;

function subjectIdRequirementOf(values: string[] | undefined): SpDescriptor['subjectIdRequirement'] {
  if (!values || values.length === 0) return undefined;
  // The profile allows one value; several, or an unknown one, are read as the strictest useful: any.
  const value = values.length === 1 ? values[0] : 'any';
  return (SUBJECT_ID_REQUIREMENTS as readonly string[]).includes(value!)
    ? (value as SpDescriptor['subjectIdRequirement'])
    : 'any';
}

function requestedAttributes(sp: Element): SpDescriptor['requestedAttributes'] {
  return childElements(sp, MD.md, 'AttributeConsumingService')
    .flatMap((service) => childElements(service, MD.md, 'RequestedAttribute'))
    .map((e) => ({ name: e.getAttribute('Name') ?? '', isRequired: isXmlTrue(e.getAttribute('isRequired')) }));
}

/** An element in English, or else without a language, or else the first one. */
function preferEnglish(elements: Element[]): string | undefined {
  const lang = (e: Element) => (e.getAttributeNS(MD.xml, 'lang') ?? '').toLowerCase();
  const chosen =
    elements.find((e) => lang(e) === 'en') ??
    elements.find((e) => lang(e).startsWith('en-')) ??
    elements.find((e) => lang(e) === '') ??
    elements[0];
  const text = chosen ? textOf(chosen).trim().replace(/\s+/g, ' ') : '';
  return text || undefined;
}

export function displayNameOf(entityDescriptor: Element, sp: Element): string | undefined {
  const uiNames = childElements(sp, MD.md, 'Extensions')
    .flatMap((ext) => childElements(ext, MD.mdui, 'UIInfo'))
    .flatMap((ui) => childElements(ui, MD.mdui, 'DisplayName'));
  const organizations = [
    ...childElements(sp, MD.md, 'Organization'),
    ...childElements(entityDescriptor, MD.md, 'Organization'),
  ];
  return (
    preferEnglish(uiNames) ??
    preferEnglish(organizations.flatMap((o) => childElements(o, MD.md, 'OrganizationDisplayName'))) ??
    preferEnglish(organizations.flatMap((o) => childElements(o, MD.md, 'OrganizationName')))
  );
}

/**
 * The md:Extensions of a metadata element: by the schema it comes first (after ds:Signature), so
 * only the leading children are read. An aggregate's EntitiesDescriptor has thousands of children,
 * and each of its entities asks for the aggregate's Extensions.
 */
export function leadingExtensions(node: Element): Element[] {
  const found: Element[] = [];
  for (let child = node.firstChild; child; child = child.nextSibling) {
    if (child.nodeType !== 1) continue;
    const element = child as Element;
    if (element.namespaceURI === MD.md && element.localName === 'Extensions') found.push(element);
    else if (!(element.namespaceURI === MD.ds && element.localName === 'Signature')) break;
  }
  return found;
}

/** mdrpi:RegistrationInfo of the entity, or of the nearest enclosing aggregate. */
export function registrationAuthorityOf(entityDescriptor: Element): string | undefined {
  for (let node: Element | null = entityDescriptor; node; node = parentElement(node)) {
    const info = leadingExtensions(node).flatMap((ext) => childElements(ext, MD.mdrpi, 'RegistrationInfo'))[0];
    const authority = info?.getAttribute('registrationAuthority');
    if (authority) return authority;
  }
  return undefined;
}
