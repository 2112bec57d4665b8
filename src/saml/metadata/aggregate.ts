// A federation's signed metadata: the aggregate (one md:EntitiesDescriptor holding every member)
// and the per-entity answers of a Metadata Query (MDQ) server. Nothing in either is used before the
// enveloped signature of the document's ROOT element verifies with the federation's certificate,
// pinned by the operator (never a key from the document's KeyInfo), and only the element that
// verification returns (parsed again from the canonical XML the digest covered) is read: whatever
// else the document holds (a wrapper, a second EntitiesDescriptor, a copy beside the signed one) is
// never looked at. The root must carry validUntil, not yet passed and not further from now than the
// federation allows, so a captured aggregate cannot be replayed for longer than that.
import { childElements, NS, parseXml, refuse, serialize, textOf, verifyEnvelopedSignature } from '../xml/index.ts';
import type { Element, VerifiedElement } from '../xml/index.ts';
import { AppError } from '../../errors.ts';
import { refuseMetadata } from './errors.ts';
import { ENTITY_ATTRIBUTE, MD } from './namespaces.ts';
import { spDescriptorOf, type SpDescriptor } from './sp-descriptor.ts';
import { idpDescriptorOf } from './idp-descriptor.ts';
import { xsDateTime } from './idp-metadata.ts';

const MDATTR_NS = MD.mdattr;
const ENTITY_CATEGORY = ENTITY_ATTRIBUTE.category;

/** The size an aggregate may have unless configured otherwise: eduGAIN's is 50-100 MB. */
export const DEFAULT_MAX_AGGREGATE_BYTES = 200 * 1024 * 1024;
/** An MDQ answer is one entity's metadata. */
export const DEFAULT_MAX_ENTITY_BYTES = 1024 * 1024;

export interface TrustOptions {
  /** the federation's signing certificate (PEM), from the operator; several during its rollover */
  certificates: readonly string[];
  /** how far in the future validUntil may be (ms) */
  maxValidityMs: number;
  /** bytes of XML accepted */
  maxBytes?: number;
  now?: number;
}

export interface VerifiedMetadata {
  /** the signed root, parsed again from what the signature covers */
  root: Element;
  /** the root's validUntil (ms) */
  validUntil: number;
  /** the root's cacheDuration (ms), when it has one */
  cacheDurationMs?: number;
  signatureAlgorithm: string;
}

/** One SP EntityDescriptor of a verified document, with what its enclosing EntitiesDescriptors add. */
export interface EntityElement {
  entityId: string;
  element: Element;
  /** the earliest validUntil of the entity and the EntitiesDescriptors around it (ms) */
  validUntil: number;
  /** entity categories given to every member by an enclosing EntitiesDescriptor (mdattr) */
  inheritedCategories: string[];
}

// xs:dateTime with a time zone (metadata producers write UTC); a value without one is refused
// rather than read in the process's zone.
const DATE_TIME = /^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** An xs:dateTime attribute as epoch ms; undefined when absent. */
export function dateTimeAttribute(element: Element, name: string): number | undefined {
  if (!element.hasAttribute(name)) return undefined;
  const value = (element.getAttribute(name) ?? '').trim();
  const ms = DATE_TIME.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) throw refuse('schema-invalid', `the metadata's ${name} is not a date and time`);
  return ms;
}

const DURATION = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$/;

/** An xs:duration (cacheDuration) in ms; years and months counted as 365 and 30 days. */
export function parseDuration(value: string): number | undefined {
  const match = DURATION.exec(value.trim());
  if (!match || value.trim() === 'P' || value.trim().endsWith('T')) return undefined;
  const [, y, mo, d, h, mi, s] = match.map((x) => (x === undefined ? 0 : Number(x)));
  return ((((y! * 365 + mo! * 30 + d!) * 24 + h!) * 60 + mi!) * 60 + s!) * 1000;
}

/** validUntil present, not passed, and no further away than the federation allows. */
function checkValidity(root: Element, options: TrustOptions, now: number): number {
  const validUntil = dateTimeAttribute(root, 'validUntil');
  if (validUntil === undefined) throw refuse('schema-invalid', 'the metadata has no validUntil');
  if (validUntil <= now) throw refuse('schema-invalid', 'the metadata has expired (its validUntil has passed)');
  if (validUntil - now > options.maxValidityMs) {
    throw refuse('schema-invalid', "the metadata's validUntil is further away than the federation's maximum validity");
  }
  return validUntil;
}

/**
 * Parses strictly, checks the root is the expected metadata element, verifies its enveloped
 * signature with the pinned certificates and its validity window. Throws XmlSecurityError.
 */
export function verifySignedMetadata(
  xml: string | Uint8Array,
  rootName: 'EntitiesDescriptor' | 'EntityDescriptor' | 'either',
  options: TrustOptions,
): VerifiedMetadata {
  const now = options.now ?? Date.now();
  const parsed = parseXml(xml, { maxXmlBytes: options.maxBytes ?? DEFAULT_MAX_AGGREGATE_BYTES });
  const root = parsed.root;
  const nameOk =
    rootName === 'either' ? /^Entit(ies|y)Descriptor$/.test(root.localName ?? '') : root.localName === rootName;
  if (root.namespaceURI !== NS.metadata || !nameOk) {
    throw refuse(
      'schema-invalid',
      `the document is not SAML metadata (an md:${rootName === 'either' ? 'EntityDescriptor' : rootName})`,
    );
  }
  const verified: VerifiedElement = verifyEnvelopedSignature(parsed, root, { keys: options.certificates });
  const signed = verified.element;
  const validUntil = checkValidity(signed, options, now);
  const cacheDuration = signed.getAttribute('cacheDuration');
  const cacheDurationMs = cacheDuration ? parseDuration(cacheDuration) : undefined;
  return {
    root: signed,
    validUntil,
    ...(cacheDurationMs !== undefined ? { cacheDurationMs } : {}),
    signatureAlgorithm: verified.signatureAlgorithm,
  };
}

/** The entity-category values of an element's md:Extensions/mdattr:EntityAttributes. */
export function entityAttributeValues(element: Element, attributeName = ENTITY_CATEGORY): string[] {
  const values: string[] = [];
  for (const extensions of childElements(element, NS.metadata, 'Extensions')) {
    for (const attributes of childElements(extensions, MDATTR_NS, 'EntityAttributes')) {
      for (const attribute of childElements(attributes, NS.assertion, 'Attribute')) {
        if (attribute.getAttribute('Name') !== attributeName) continue;
        for (const value of childElements(attribute, NS.assertion, 'AttributeValue')) values.push(textOf(value).trim());
      }
    }
  }
  return values;
}

interface Frame {
  element: Element;
  validUntil: number;
  categories: string[];
}

/**
 * Every EntityDescriptor under a verified root (itself, or nested EntitiesDescriptors at any
 * depth), in document order, with the earliest validUntil of it and what encloses it and the
 * categories its EntitiesDescriptors give.
 */
function* entityDescriptors(verified: VerifiedMetadata): Generator<Frame> {
  const stack: Frame[] = [{ element: verified.root, validUntil: verified.validUntil, categories: [] }];
  while (stack.length > 0) {
    const frame = stack.pop()!;
    const own = dateTimeAttribute(frame.element, 'validUntil');
    const validUntil = Math.min(frame.validUntil, own ?? Infinity);
    if (frame.element.localName === 'EntitiesDescriptor') {
      const categories = [...frame.categories, ...entityAttributeValues(frame.element)];
      const children = childElements(frame.element, NS.metadata).filter((c) =>
        ['EntitiesDescriptor', 'EntityDescriptor'].includes(c.localName ?? ''),
      );
      for (const child of children.reverse()) stack.push({ element: child, validUntil, categories });
      continue;
    }
    yield { element: frame.element, validUntil, categories: frame.categories };
  }
}

/**
 * The SP EntityDescriptors under a verified root, in document order. An entity whose own or
 * enclosing validUntil has passed is left out, and so is a second EntityDescriptor with an
 * entityID already seen (the first one counts).
 */
export function serviceProviderElements(
  verified: VerifiedMetadata,
  now = Date.now(),
): { entities: EntityElement[]; expired: number; duplicates: number } {
  const entities: EntityElement[] = [];
  const seen = new Set<string>();
  let expired = 0;
  let duplicates = 0;
  for (const frame of entityDescriptors(verified)) {
    if (childElements(frame.element, NS.metadata, 'SPSSODescriptor').length === 0) continue;
    const entityId = frame.element.getAttribute('entityID') ?? '';
    if (frame.validUntil <= now) {
      expired++;
      continue;
    }
    if (seen.has(entityId)) {
      duplicates++;
      continue;
    }
    seen.add(entityId);
    entities.push({
      entityId,
      element: frame.element,
      validUntil: frame.validUntil,
      inheritedCategories: frame.categories,
    });
  }
  return { entities, expired, duplicates };
}

/**
 * An identity provider asked for by entityID, as the verified aggregate describes it: either its
 * EntityDescriptor as a document of its own (what `upstream add --metadata` would have been given),
 * or why it cannot be used.
 */
export type FederatedIdentityProvider =
  | {
      entityId: string;
      /** one md:EntityDescriptor, with the namespaces it inherited declared on it and validUntil the earliest of it and its enclosing EntitiesDescriptors */
      metadataXml: string;
      /** ms */
      validUntil: number;
    }
  | { entityId: string; refused: string };

/**
 * The EntityDescriptor with this entityID under a verified root (the first one, as for SPs), read
 * with the IdP metadata reader (idpDescriptorOf, the one `--metadata` documents are read with), and
 * copied out as a document of its own: the namespace declarations of the EntitiesDescriptors around
 * it are declared on it, and its validUntil is the earliest around it, so the copy is no longer
 * used than the aggregate it came from vouches for it.
 */
export function identityProviderElement(
  verified: VerifiedMetadata,
  entityId: string,
  now = Date.now(),
): FederatedIdentityProvider {
  let found: Frame | undefined;
  for (const frame of entityDescriptors(verified)) {
    if (frame.element.getAttribute('entityID') === entityId) {
      found = frame;
      break;
    }
  }
  if (!found) return { entityId, refused: `${entityId} is not in the federation's metadata` };
  if (found.validUntil <= now) return { entityId, refused: `the federation's metadata of ${entityId} has expired` };
  try {
    idpDescriptorOf(found.element, { now });
  } catch (err) {
    return { entityId, refused: reasonOf(err) };
  }
  const validUntil = Math.floor(found.validUntil / 1000) * 1000; // as the copy states it, to the second
  return { entityId, metadataXml: standaloneEntity(found.element, validUntil), validUntil };
}

/** An EntityDescriptor of an aggregate as a document of its own (see identityProviderElement). */
function standaloneEntity(element: Element, validUntil: number): string {
  const copy = element.cloneNode(true) as Element;
  for (let node = element.parentNode; node && node.nodeType === 1; node = node.parentNode) {
    const attributes = (node as Element).attributes;
    for (let i = 0; i < attributes.length; i++) {
      const attribute = attributes.item(i)!;
      if (attribute.namespaceURI !== MD.xmlns || copy.hasAttribute(attribute.name)) continue;
      copy.setAttributeNS(MD.xmlns, attribute.name, attribute.value);
    }
  }
  copy.setAttribute('validUntil', xsDateTime(validUntil));
  return serialize(copy);
}

/** An SP of a federation, read from verified metadata. */
export interface FederatedEntity {
  /** entityCategories include those an enclosing EntitiesDescriptor gives */
  descriptor: SpDescriptor;
  /** the earliest validUntil of the entity and everything around it (ms) */
  validUntil: number;
}

export interface VerifiedAggregate {
  name?: string;
  validUntil: number;
  cacheDurationMs?: number;
  entities: FederatedEntity[];
  /** SP entities left out: past their own validUntil, listed twice, or metadata the IdP cannot serve */
  skipped: { entityId: string; reason: string }[];
  /** the identity providers asked for (AggregateOptions.identityProviders), in that order */
  identityProviders: FederatedIdentityProvider[];
}

export interface AggregateOptions extends TrustOptions {
  /** entityIDs of identity providers to copy out of the aggregate (upstream providers bound to the federation) */
  identityProviders?: readonly string[];
}

function describe(entity: EntityElement, now: number): FederatedEntity {
  const descriptor = spDescriptorOf(entity.element, { now });
  const categories = [...new Set([...entity.inheritedCategories, ...descriptor.entityCategories])];
  return { descriptor: { ...descriptor, entityCategories: categories }, validUntil: entity.validUntil };
}

const reasonOf = (err: unknown): string => (err instanceof AppError ? err.message : 'its metadata cannot be read');

/**
 * A federation's aggregate, verified (see the top of this file), and its SP entities read with
 * spDescriptorOf. One member with metadata the identity provider cannot serve (no HTTP-POST ACS,
 * a weak key) is left out and reported; it does not cost the others their trust. The identity
 * providers asked for are copied out (identityProviderElement).
 */
export function verifyAggregate(xml: string | Uint8Array, options: AggregateOptions): VerifiedAggregate {
  const now = options.now ?? Date.now();
  const verified = verifySignedMetadata(xml, 'EntitiesDescriptor', options);
  const found = serviceProviderElements(verified, now);
  const entities: FederatedEntity[] = [];
  const skipped: VerifiedAggregate['skipped'] = [];
  if (found.expired > 0) skipped.push({ entityId: '*', reason: `${found.expired} past their validUntil` });
  if (found.duplicates > 0) skipped.push({ entityId: '*', reason: `${found.duplicates} listed twice` });
  for (const entity of found.entities) {
    try {
      entities.push(describe(entity, now));
    } catch (err) {
      skipped.push({ entityId: entity.entityId.slice(0, 1024), reason: reasonOf(err) });
    }
  }
  const name = verified.root.getAttribute('Name') || undefined;
  return {
    ...(name ? { name } : {}),
    validUntil: verified.validUntil,
    ...(verified.cacheDurationMs !== undefined ? { cacheDurationMs: verified.cacheDurationMs } : {}),
    entities,
    skipped,
    identityProviders: [...new Set(options.identityProviders ?? [])].map((entityId) =>
      identityProviderElement(verified, entityId, now),
    ),
  };
}

/**
 * An MDQ server's answer for one entity: a signed md:EntityDescriptor (or an EntitiesDescriptor
 * holding it) as the root, verified like an aggregate, which must describe the entity asked for.
 * The answer is kept until its validUntil, or sooner when its cacheDuration says so.
 */
export function verifyEntityAnswer(
  xml: string | Uint8Array,
  entityId: string,
  options: TrustOptions,
): FederatedEntity & { cacheUntil: number } {
  const now = options.now ?? Date.now();
  const verified = verifySignedMetadata(xml, 'either', { maxBytes: DEFAULT_MAX_ENTITY_BYTES, ...options });
  const entity = serviceProviderElements(verified, now).entities.find((e) => e.entityId === entityId);
  if (!entity) throw refuseMetadata(`the metadata query answer does not describe ${entityId} as a service provider`);
  const described = describe(entity, now);
  const cacheUntil = Math.min(described.validUntil, now + (verified.cacheDurationMs ?? Infinity));
  return { ...described, cacheUntil };
}
