// A SAML 2.0 upstream provider as the service provider side sees it: its IdP metadata read from a
// file or an https URL and checked before it is stored (`upstream add --type saml --metadata`), read
// again (cached) for each sign-in, and the single-use checks a Response goes through, backed by the
// database: the in-flight request (consumed once, for this provider only) and the assertion ID.
import type { Store } from '../store/index.ts';
import { recordRequestId } from '../store/saml-sso.ts';
import { listSamlUpstreamRows } from '../store/upstream-saml.ts';
import { idpDescriptorOf, parseIdpMetadata, refuseMetadata, type IdpDescriptor } from '../saml/metadata/index.ts';
import { parseXml } from '../saml/xml/index.ts';
import { readMetadataSource } from '../service-providers/metadata-source.ts';
import { federationIdentityProvider, type FederationSettings } from '../service-providers/federations.ts';
import { checkFederatedIdentityProvider } from './saml-federation.ts';
import { providerOf } from './providers.ts';
import type { SamlInput } from './providers.ts';
import { consumeUpstreamRequest } from './requests.ts';
import type { ResponseOnce, SamlUpstream } from './saml-response.ts';
import type { UpstreamProvider, UpstreamRequest } from './types.ts';

/** The service's SAML service-provider endpoints (docs/upstream.md). */
export const SP_METADATA_PATH = '/saml2/sp/metadata';
export const SP_ACS_PATH = '/saml2/sp/acs';
export const spEntityId = (publicUrl: string) => new URL(SP_METADATA_PATH, publicUrl).href;
export const spAcsUrl = (publicUrl: string) => new URL(SP_ACS_PATH, publicUrl).href;

export interface SamlSourceOptions {
  /** default 10 s */
  timeoutMs?: number;
  now?: number;
}

/**
 * The IdP metadata at `source` (a file, or an https URL fetched with a time limit and a size cap),
 * checked: strictly parsed, valid against the metadata schema, one IdP with a signing certificate
 * and a single sign-on endpoint. What `upstream add|update --metadata` stores.
 */
export async function readSamlProviderMetadata(
  source: string,
  options: SamlSourceOptions = {},
): Promise<SamlInput & { descriptor: IdpDescriptor }> {
  const bytes = await readMetadataSource(source, { timeoutMs: options.timeoutMs ?? 10_000 });
  const descriptor = await parseIdpMetadata(bytes, { now: options.now ?? Date.now() });
  return { entityId: descriptor.entityId, metadataXml: bytes.toString('utf8'), source, descriptor };
}

/**
 * An identity provider of a trusted federation, by entityID: copied out of the federation's
 * aggregate, fetched and verified now with the federation's pinned certificate, and checked as a
 * `--metadata` document is. What `upstream add --federation <id> --entity <entityID>` stores; the
 * provider stays bound to the federation, whose refresh keeps its metadata current.
 */
export async function readFederatedProviderMetadata(
  store: Store,
  settings: FederationSettings,
  federationId: number,
  entityId: string,
  now = Date.now(),
): Promise<SamlInput & { descriptor: IdpDescriptor }> {
  const entry = await federationIdentityProvider(store, settings, federationId, entityId, now);
  const checked = await checkFederatedIdentityProvider(entry, now);
  return {
    entityId: checked.entityId,
    metadataXml: checked.metadataXml,
    source: entry.federationUrl,
    federationId,
    descriptor: checked.descriptor,
  };
}

interface Cached {
  metadataXml: string;
  descriptor: IdpDescriptor;
}

/** Read metadata by provider id: parsing and the schema check run once per metadata document. */
const descriptors = new Map<string, Cached>();
const MAX_CACHED = 500;

/** The descriptor of a provider's stored metadata (checked against `now` for validUntil each time). */
export async function samlDescriptorOf(provider: UpstreamProvider, now: number): Promise<IdpDescriptor> {
  if (!provider.saml) throw refuseMetadata(`${provider.id} is not a SAML provider`);
  const cached = descriptors.get(provider.id);
  let descriptor = cached?.metadataXml === provider.saml.metadataXml ? cached.descriptor : undefined;
  if (!descriptor) {
    descriptor = await parseIdpMetadata(provider.saml.metadataXml, { now });
    if (descriptors.size >= MAX_CACHED) descriptors.clear();
    descriptors.set(provider.id, { metadataXml: provider.saml.metadataXml, descriptor });
  } else if (descriptor.validUntil !== undefined && descriptor.validUntil <= now) {
    // expired since it was cached: read again for the refusal's message
    idpDescriptorOf(parseXml(provider.saml.metadataXml).root, { now });
  }
  if (descriptor.entityId !== provider.saml.entityId)
    throw refuseMetadata(`the stored metadata of ${provider.id} is for another entity`);
  return descriptor;
}

/** The provider as the Response checks see it. */
export async function samlUpstreamOf(provider: UpstreamProvider, now: number): Promise<SamlUpstream> {
  return {
    providerId: provider.id,
    idp: await samlDescriptorOf(provider, now),
    mappings: provider.mappings,
    emailVerified: provider.saml?.emailVerified === true,
    requireEncryption: provider.saml?.requireEncryption === true,
  };
}

/** The SAML providers (of every organization, enabled or not) with this IdP entityID. */
export async function samlProvidersByEntityId(store: Store, entityId: string): Promise<UpstreamProvider[]> {
  return (await listSamlUpstreamRows(store.db, entityId)).map(providerOf);
}

/** The database-backed single-use checks of one Response for one provider; `consumed` is the request it answered. */
export function responseOnce(
  store: Store,
  providerId: string,
  binding: string | undefined,
  now: number,
): ResponseOnce & { consumed: () => UpstreamRequest | undefined } {
  let consumed: UpstreamRequest | undefined;
  return {
    async consumeRequest(id) {
      consumed = await consumeUpstreamRequest(store, id, providerId, binding, now);
      return consumed !== undefined;
    },
    firstUse: (key, expiresAt) => recordRequestId(store.db, key, expiresAt, now),
    consumed: () => consumed,
  };
}
