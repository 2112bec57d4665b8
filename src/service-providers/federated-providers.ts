// Service providers known through a trusted federation rather than registered one by one: from a
// verified aggregate (kept in saml_federation_entities until its validUntil), or, for an entityID
// no aggregate lists, from the federation's Metadata Query (MDQ) service, asked on demand:
// `GET <base>/entities/{sha1}<hex SHA-1 of the entityID>` (the MDQ SAML profile's transformed
// identifier), the answer verified with the same pinned certificate as the aggregate and kept
// until its validUntil or cacheDuration. The registry (registry.ts) falls back to these after its
// own registered SPs.
import { createHash } from 'node:crypto';
import type { Store } from '../store/index.ts';
import * as repo from '../store/saml-federations.ts';
import { countMdqLookup } from '../http/metrics-federations.ts';
import { AppError } from '../errors.ts';
import { DEFAULT_MAX_ENTITY_BYTES, verifyEntityAnswer, type SpDescriptor } from '../saml/metadata/index.ts';
import type { AttributeGroup } from '../vocabulary.ts';
import { categoryAttributes, categoryGroups, type ReleasePolicy } from './entity-categories.ts';
import { fetchMetadata } from './metadata-fetch.ts';
import { serviceProviderClientId } from './client-id.ts';

export interface FederatedServiceProvider {
  /** the federation's id, as ServiceProvider.federationId */
  federationId: string;
  descriptor: SpDescriptor;
  releases: ReleasePolicy[];
  /** the attribute groups covering what its entity categories release */
  groups: AttributeGroup[];
  /** exactly the SAML attribute names its entity categories release (categoryAttributes) */
  releasedAttributes: string[];
  /** its federation requires every AuthnRequest to be signed (`--require-signed-requests`) */
  requireSignedRequests: boolean;
}

function fromRow(row: repo.FederatedEntityRow): FederatedServiceProvider {
  const descriptor = JSON.parse(row.descriptor) as SpDescriptor;
  const releases = JSON.parse(row.releases) as ReleasePolicy[];
  return {
    federationId: String(row.federation_id),
    descriptor,
    releases,
    groups: categoryGroups(descriptor, releases),
    releasedAttributes: [...categoryAttributes(descriptor, releases)],
    requireSignedRequests: Number(row.require_signed_requests) === 1,
  };
}

/** An SP of a trusted federation whose metadata is in force, by entityID; asks MDQ for one not held. */
export async function findFederatedServiceProvider(
  store: Store,
  entityId: string,
  now = Date.now(),
): Promise<FederatedServiceProvider | undefined> {
  const [row] = await repo.findFederatedEntities(store.db, entityId, now);
  if (row) return fromRow(row);
  return queryMetadataServices(store, entityId, now);
}

/** By the client the SP is paired with (the continuation of a sign-in names the client). */
export async function findFederatedServiceProviderByClientId(
  store: Store,
  clientId: string,
  now = Date.now(),
): Promise<FederatedServiceProvider | undefined> {
  const [row] = await repo.findFederatedEntitiesByClientId(store.db, clientId, now);
  return row && fromRow(row);
}

// ---- MDQ ----

const MDQ_TIMEOUT_MS = 5000;
/** An entityID a metadata service did not know is not asked about again for this long. */
const NOT_FOUND_MS = 10 * 60_000;
/** After a failure (unreachable, refused answer), this long. */
const FAILED_MS = 60_000;
/** Lookups under way at once: an unknown Issuer costs at most one request, and never a flood of them. */
const MAX_IN_FLIGHT = 4;
const MAX_REMEMBERED = 10_000;

/** entityID -> until when it is not asked about again (per process). */
const misses = new Map<string, number>();
const inFlight = new Map<string, Promise<FederatedServiceProvider | undefined>>();

function remember(entityId: string, until: number): void {
  if (misses.size >= MAX_REMEMBERED) misses.clear();
  misses.set(entityId, until);
}

/** The MDQ request URL of an entity: the base, /entities/, and the URL-encoded transformed identifier. */
export function mdqUrl(base: string, entityId: string): string {
  const id = `{sha1}${createHash('sha1').update(entityId, 'utf8').digest('hex')}`;
  return `${base}/entities/${encodeURIComponent(id)}`;
}

function queryMetadataServices(
  store: Store,
  entityId: string,
  now: number,
): Promise<FederatedServiceProvider | undefined> {
  if ((misses.get(entityId) ?? 0) > now) return Promise.resolve(undefined);
  const running = inFlight.get(entityId);
  if (running) return running;
  if (inFlight.size >= MAX_IN_FLIGHT) return Promise.resolve(undefined);
  const lookup = lookUp(store, entityId, now).finally(() => inFlight.delete(entityId));
  inFlight.set(entityId, lookup);
  return lookup;
}

async function lookUp(store: Store, entityId: string, now: number): Promise<FederatedServiceProvider | undefined> {
  const federations = await repo.mdqFederations(store.db, now);
  let missedFor = NOT_FOUND_MS;
  for (const federation of federations) {
    try {
      const found = await askOne(store, federation, entityId, now);
      if (found) {
        countMdqLookup('found');
        return found;
      }
    } catch {
      missedFor = FAILED_MS;
      countMdqLookup('failed');
    }
  }
  if (federations.length > 0) {
    if (missedFor === NOT_FOUND_MS) countMdqLookup('not_found');
    remember(entityId, now + missedFor);
  }
  return undefined;
}

async function askOne(
  store: Store,
  federation: repo.FederationRow,
  entityId: string,
  now: number,
): Promise<FederatedServiceProvider | undefined> {
  let fetched;
  try {
    fetched = await fetchMetadata(mdqUrl(federation.mdq_url!, entityId), {
      timeoutMs: MDQ_TIMEOUT_MS,
      maxBytes: DEFAULT_MAX_ENTITY_BYTES,
    });
  } catch (err) {
    if (err instanceof AppError && / answered HTTP 404$/.test(err.message)) return undefined;
    throw err;
  }
  if (fetched.status !== 200) return undefined;
  const answer = verifyEntityAnswer(fetched.body, entityId, {
    certificates: [federation.certificate],
    maxValidityMs: Number(federation.max_validity_ms),
    now,
  });
  const row = {
    federation_id: Number(federation.id),
    entity_id: entityId,
    client_id: serviceProviderClientId(entityId),
    source: 'mdq',
    descriptor: JSON.stringify(answer.descriptor),
    categories: JSON.stringify(answer.descriptor.entityCategories),
    valid_until: answer.cacheUntil,
    fetched_at: now,
  };
  await repo.upsertEntities(store.db, [row]);
  return fromRow({
    ...row,
    releases: federation.releases,
    require_signed_requests: federation.require_signed_requests,
  });
}

/** Forgets the entityIDs remembered as unknown (tests; a federation added or removed). */
export function forgetMetadataQueryMisses(): void {
  misses.clear();
}
