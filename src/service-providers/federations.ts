// Trusted SAML federations: an operator adds a federation by the URL of its signed metadata
// aggregate and the federation's metadata-signing certificate (pinned here, never taken from the
// document); its service providers are then known to the identity provider without being added
// one by one. The aggregate is verified before anything in it is used (src/saml/metadata/
// aggregate.ts), its SPs are kept in the database with the aggregate's validUntil, and it is
// fetched again on a schedule by one instance at a time (federation-refresh.ts). Past validUntil
// with no newer aggregate, the federation is stale and its SPs are no longer served.
import type { FastifyBaseLogger } from 'fastify';
import type { Insertable } from 'kysely';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import type { SamlFederationEntitiesTable } from '../store/schema.ts';
import * as repo from '../store/saml-federations.ts';
import { deleteClient } from '../store/clients.ts';
import { deleteClientArtifacts } from '../store/oidc-payloads.ts';
import { publish } from '../store/invalidation.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { AppError, badRequest, conflict, errorText, notFound } from '../errors.ts';
import { iso } from '../time.ts';
import { isLoopbackHost } from '../config.ts';
import { readCertificate, rsaPublicKey } from '../saml/xml/index.ts';
import type { FederatedIdentityProvider, VerifiedAggregate } from '../saml/metadata/index.ts';
import { listFederationUpstreamRows } from '../store/upstream-saml.ts';
import {
  checkFederatedIdentityProviders,
  federatedEntityIds,
  refreshFederatedProviders,
} from '../upstream/saml-federation.ts';
import { ISOLATE_ABOVE_BYTES, verifyAggregateIsolated } from './aggregate-process.ts';
import { countFederationRefresh } from '../http/metrics-federations.ts';
import { ENTITY_CATEGORIES, isReleasePolicy, RELEASE_POLICIES, type ReleasePolicy } from './entity-categories.ts';
import { checkMetadataUrl, fetchMetadata, type FetchPolicy } from './metadata-fetch.ts';
import { serviceProviderClientId } from './client-id.ts';

const HOUR = 3600_000;
const DAY = 24 * HOUR;
export const DEFAULT_MAX_VALIDITY_MS = 14 * DAY;
export const DEFAULT_REFRESH_MS = HOUR;
/** A failed refresh is tried again this soon (or at the federation's interval, if shorter). */
const RETRY_MS = 5 * 60_000;
/** How long a refresh holds its federation: fetching and verifying a large aggregate takes a while. */
const LEASE_MS = 10 * 60_000;
const FETCH_TIMEOUT_MS = 120_000;

export interface FederationSettings {
  fetch: FetchPolicy;
  maxAggregateBytes: number;
  timeoutMs: number;
  /** aggregates larger than this are verified in a child process (aggregate-process.ts) */
  isolateAboveBytes: number;
}

export function federationSettings(config: Config): FederationSettings {
  return {
    fetch: { development: isLoopbackHost(new URL(config.publicUrl).hostname) },
    maxAggregateBytes: config.samlFederationMaxMb * 1024 * 1024,
    timeoutMs: FETCH_TIMEOUT_MS,
    isolateAboveBytes: ISOLATE_ABOVE_BYTES,
  };
}

export interface FederationInput {
  url: string;
  /** the federation's metadata-signing certificate, PEM */
  certificate: string;
  maxValidityMs?: number;
  refreshMs?: number;
  releases?: string[];
  mdqUrl?: string;
  /** every AuthnRequest of the federation's SPs must be signed (`--require-signed-requests`) */
  requireSignedRequests?: boolean;
}

export interface FederationView {
  id: number;
  url: string;
  name: string | null;
  state: string;
  entities: number;
  valid_until: string | null;
  max_validity_seconds: number;
  refresh_seconds: number;
  releases: ReleasePolicy[];
  mdq_url: string | null;
  require_signed_requests: boolean;
  certificate_sha256: string;
  last_fetched_at: string | null;
  last_attempt_at: string | null;
  next_refresh_at: string;
  last_error: string | null;
  created_at: string;
}

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(Number(ms)));

export function federationView(row: repo.FederationRow): FederationView {
  return {
    id: Number(row.id),
    url: row.url,
    name: row.name,
    state: row.state,
    entities: row.entities,
    valid_until: isoOrNull(row.valid_until),
    max_validity_seconds: Number(row.max_validity_ms) / 1000,
    refresh_seconds: Number(row.refresh_ms) / 1000,
    releases: JSON.parse(row.releases) as ReleasePolicy[],
    mdq_url: row.mdq_url,
    require_signed_requests: Number(row.require_signed_requests) === 1,
    certificate_sha256: readCertificate(row.certificate).sha256Fingerprint,
    last_fetched_at: isoOrNull(row.last_fetched_at),
    last_attempt_at: isoOrNull(row.last_attempt_at),
    next_refresh_at: iso(Number(row.next_refresh_at)),
    last_error: row.last_error,
    created_at: iso(Number(row.created_at)),
  };
}

/** The pinned certificate: a readable X.509 certificate with an RSA key of 2048 bits or more. */
export function checkFederationCertificate(pem: string): string {
  const text = pem.trim();
  if (!text.startsWith('-----BEGIN CERTIFICATE-----')) throw badRequest('--cert must be a PEM certificate');
  try {
    readCertificate(text);
    rsaPublicKey(text);
  } catch {
    throw badRequest('--cert must be a readable certificate with an RSA key of 2048 bits or more');
  }
  return `${text}\n`;
}

function checkRange(value: number, min: number, max: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw badRequest(`${what} must be between ${min / 1000} s and ${max / DAY} days`);
  }
  return value;
}

function checkReleases(values: string[]): ReleasePolicy[] {
  const releases = [...new Set(values.map((v) => v.trim()).filter(Boolean))];
  const unknown = releases.find((r) => !isReleasePolicy(r));
  if (unknown !== undefined) {
    throw badRequest(`--release '${unknown.slice(0, 100)}' is not one of ${RELEASE_POLICIES.join(', ')}`);
  }
  return releases as ReleasePolicy[];
}

/** What a verified aggregate's entities become as rows. */
function entityRows(
  federationId: number,
  aggregate: VerifiedAggregate,
  now: number,
): Insertable<SamlFederationEntitiesTable>[] {
  return aggregate.entities.map((e) => ({
    federation_id: federationId,
    entity_id: e.descriptor.entityId,
    client_id: serviceProviderClientId(e.descriptor.entityId),
    source: 'aggregate',
    descriptor: JSON.stringify(e.descriptor),
    categories: JSON.stringify(e.descriptor.entityCategories),
    valid_until: e.validUntil,
    fetched_at: now,
  }));
}

export interface FederationSummary {
  id: number;
  url: string;
  name: string | null;
  /** the SPs it holds */
  entities: number;
  /** SPs of the aggregate left out, with why */
  skipped: { entityId: string; reason: string }[];
  valid_until: string;
}

interface Verified {
  aggregate: VerifiedAggregate;
  etag: string | null;
  lastModified: string | null;
}

async function fetchVerified(
  settings: FederationSettings,
  url: string,
  trust: { certificate: string; maxValidityMs: number },
  now: number,
  conditional: { etag?: string | null; lastModified?: string | null } = {},
  identityProviders: readonly string[] = [],
): Promise<Verified | 'unchanged'> {
  const fetched = await fetchMetadata(url, {
    ...conditional,
    timeoutMs: settings.timeoutMs,
    maxBytes: settings.maxAggregateBytes,
  });
  if (fetched.status === 304) return 'unchanged';
  const options = {
    certificates: [trust.certificate],
    maxValidityMs: trust.maxValidityMs,
    maxBytes: settings.maxAggregateBytes,
    now,
    identityProviders,
  };
  const aggregate = await verifyAggregateIsolated(fetched.body, options, settings.isolateAboveBytes);
  return { aggregate, etag: fetched.etag, lastModified: fetched.lastModified };
}

/**
 * Adds a federation: its aggregate is fetched and verified first, and nothing is stored unless
 * that succeeds. The federation, its SPs and the audit record are written in one transaction.
 */
export async function addFederation(
  store: Store,
  settings: FederationSettings,
  input: FederationInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<FederationSummary> {
  const url = checkMetadataUrl(input.url, settings.fetch);
  const mdqUrl =
    input.mdqUrl === undefined ? null : checkMetadataUrl(input.mdqUrl, settings.fetch, '--mdq').replace(/\/+$/, '');
  const certificate = checkFederationCertificate(input.certificate);
  const maxValidityMs = checkRange(input.maxValidityMs ?? DEFAULT_MAX_VALIDITY_MS, HOUR, 365 * DAY, '--max-validity');
  const refreshMs = checkRange(input.refreshMs ?? DEFAULT_REFRESH_MS, 60_000, 7 * DAY, '--refresh');
  const releases = checkReleases(input.releases ?? []);
  if (await repo.findFederationByUrl(store.db, url))
    throw conflict(`a federation with the URL ${url} is already trusted`);
  let verified: Verified;
  try {
    verified = (await fetchVerified(settings, url, { certificate, maxValidityMs }, now)) as Verified;
  } catch (err) {
    throw new AppError(err instanceof AppError ? err.status : 502, `${errorText(err, 300)}; nothing was added`);
  }
  const { aggregate } = verified;
  return store.db.transaction().execute(async (trx) => {
    const id = await repo.insertFederation(trx, {
      url,
      certificate,
      max_validity_ms: maxValidityMs,
      refresh_ms: refreshMs,
      releases: JSON.stringify(releases),
      mdq_url: mdqUrl,
      require_signed_requests: input.requireSignedRequests === true ? 1 : 0,
      state: 'fresh',
      last_error: null,
      name: aggregate.name ?? null,
      entities: aggregate.entities.length,
      valid_until: aggregate.validUntil,
      etag: verified.etag,
      last_modified: verified.lastModified,
      last_fetched_at: now,
      last_attempt_at: now,
      next_refresh_at: now + refreshMs,
      lease_until: null,
      created_at: now,
    });
    await repo.replaceAggregateEntities(trx, id, entityRows(id, aggregate, now));
    const summary: FederationSummary = {
      id,
      url,
      name: aggregate.name ?? null,
      entities: aggregate.entities.length,
      skipped: aggregate.skipped,
      valid_until: iso(aggregate.validUntil),
    };
    const details = {
      url,
      name: summary.name,
      entities: summary.entities,
      releases,
      mdq_url: mdqUrl,
      require_signed_requests: input.requireSignedRequests === true,
      valid_until: summary.valid_until,
    };
    await recordAudit(trx, {
      action: 'saml_federation.add',
      actor,
      at: now,
      subject: `saml-federation:${id}`,
      details,
    });
    return summary;
  });
}

/**
 * The REFEDS entity categories the identity provider supports, as its metadata advertises them
 * (http://macedir.org/entity-category-support): those released (`--release`) for at least one
 * trusted federation, in the table's order. A category no federation releases is not claimed: an SP
 * carrying it would receive none of its attributes.
 */
export async function supportedEntityCategories(store: Store): Promise<string[]> {
  const released = new Set(
    (await repo.listFederations(store.db)).flatMap((row) => JSON.parse(row.releases) as string[]),
  );
  return ENTITY_CATEGORIES.filter((c) => released.has(c.policy)).map((c) => c.uri);
}

export interface FederationUpdate {
  requireSignedRequests?: boolean;
}

/**
 * Changes a federation's policy for its SPs, in force on every instance at their next request (the
 * SPs are read with their federation's row each time); audited in the same transaction.
 */
export async function updateFederation(
  store: Store,
  id: number,
  update: FederationUpdate,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<FederationView> {
  if (update.requireSignedRequests === undefined) throw badRequest('nothing to change');
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findFederation(trx, id);
    if (!row) throw notFound(`no federation ${id}`);
    const requireSignedRequests = update.requireSignedRequests === true;
    await repo.updateFederation(trx, id, { require_signed_requests: requireSignedRequests ? 1 : 0 });
    await recordAudit(trx, {
      action: 'saml_federation.update',
      actor,
      at: now,
      subject: `saml-federation:${id}`,
      details: { url: row.url, require_signed_requests: requireSignedRequests },
    });
    return federationView({ ...row, require_signed_requests: requireSignedRequests ? 1 : 0 });
  });
}

export async function findFederationView(store: Store, id: number): Promise<FederationView> {
  const row = await repo.findFederation(store.db, id);
  if (!row) throw notFound(`no federation ${id}`);
  return federationView(row);
}

export async function listFederationViews(store: Store): Promise<FederationView[]> {
  return (await repo.listFederations(store.db)).map(federationView);
}

/**
 * Removes a federation and every SP it brought, with the clients its SPs were paired with on their
 * first sign-in (their grants, tokens and consents go too) unless another federation or the
 * registry still has the SP; audited in the same transaction.
 */
export async function removeFederation(
  store: Store,
  id: number,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<void> {
  await store.db.transaction().execute(async (trx) => {
    const row = await repo.findFederation(trx, id);
    if (!row) throw notFound(`no federation ${id}`);
    // An upstream provider bound to it would lose the source of its keys; it is the organization's
    // sign-in, not the federation's to take away.
    const bound = await listFederationUpstreamRows(trx, id);
    if (bound.length > 0) {
      const names = bound.map((p) => `${p.id} (organization ${Number(p.org_id)})`).join(', ');
      throw conflict(
        `federation ${id} is the metadata source of upstream provider(s) ${names}; remove them first (upstream remove)`,
      );
    }
    const clientIds = await repo.federationOnlyClients(trx, id);
    for (const clientId of clientIds) {
      await deleteClientArtifacts(trx, clientId, store.dialect);
      await deleteClient(trx, clientId);
      await publish(trx, 'client', clientId);
    }
    await repo.deleteFederation(trx, id);
    const details = { url: row.url, entities: row.entities, clients: clientIds.length };
    await recordAudit(trx, {
      action: 'saml_federation.remove',
      actor,
      at: now,
      subject: `saml-federation:${id}`,
      details,
    });
  });
}

/**
 * An identity provider of a federation's aggregate, for `upstream add --federation --entity`: the
 * aggregate is fetched (unconditionally; the federation's own refresh state is left as it is) and
 * verified as a refresh verifies it, and the entity's EntityDescriptor copied out, or why not.
 */
export async function federationIdentityProvider(
  store: Store,
  settings: FederationSettings,
  id: number,
  entityId: string,
  now = Date.now(),
): Promise<FederatedIdentityProvider & { federationUrl: string }> {
  const row = await repo.findFederation(store.db, id);
  if (!row) throw notFound(`no federation ${id} (saml federation list)`);
  let verified: Verified;
  try {
    const trust = { certificate: row.certificate, maxValidityMs: Number(row.max_validity_ms) };
    verified = (await fetchVerified(settings, row.url, trust, now, {}, [entityId])) as Verified;
  } catch (err) {
    throw new AppError(
      err instanceof AppError ? err.status : 502,
      `the metadata of federation ${id}: ${errorText(err, 300)}; nothing was added`,
    );
  }
  const entry = verified.aggregate.identityProviders.find((e) => e.entityId === entityId);
  return {
    ...(entry ?? { entityId, refused: `${entityId} is not in the federation's metadata` }),
    federationUrl: row.url,
  };
}

export type RefreshOutcome =
  | { outcome: 'updated'; entities: number; valid_until: string; skipped: number; upstream_providers: number }
  | { outcome: 'unchanged'; valid_until: string | null }
  | { outcome: 'failed'; error: string; state: string; valid_until: string | null }
  | { outcome: 'busy' };

export interface RefreshOptions extends Change {
  /** refresh now even if not due (the operator's `refresh`); still one refresh at a time */
  force?: boolean;
  log?: FastifyBaseLogger;
}

/** The state a federation is in once a refresh did not bring a newer aggregate. */
function stateAt(row: repo.FederationRow, now: number): string {
  return row.valid_until !== null && Number(row.valid_until) > now ? 'fresh' : 'stale';
}

/** A refresh that brought no verified aggregate: recorded, tried again soon, logged. */
async function refreshFailed(
  store: Store,
  row: repo.FederationRow,
  err: unknown,
  now: number,
  log: FastifyBaseLogger | undefined,
): Promise<RefreshOutcome> {
  const id = Number(row.id);
  const error = errorText(err, 500);
  const state = stateAt(row, now);
  await repo.updateFederation(store.db, id, {
    last_error: error,
    state,
    next_refresh_at: now + Math.min(Number(row.refresh_ms), RETRY_MS),
    lease_until: null,
  });
  countFederationRefresh('failed');
  log?.warn({ federation: id, url: row.url, err: error, state }, 'SAML federation metadata refresh failed');
  return { outcome: 'failed', error, state, valid_until: isoOrNull(row.valid_until) };
}

/**
 * Fetches a federation's aggregate again (conditionally) and, when it verifies, replaces its SPs.
 * Claims the refresh first: of several instances (or the CLI and a running service) one fetches.
 * A failure keeps what the last verified aggregate said, until its validUntil passes. The upstream
 * SAML providers bound to the federation get their entity's entry of a newer aggregate in the same
 * transaction (src/upstream/saml-federation.ts).
 */
export async function refreshFederation(
  store: Store,
  settings: FederationSettings,
  id: number,
  { actor = SYSTEM, now = Date.now(), force = false, log }: RefreshOptions = {},
): Promise<RefreshOutcome> {
  const row = await repo.findFederation(store.db, id);
  if (!row) throw notFound(`no federation ${id}`);
  if (!(await repo.claimFederationRefresh(store.db, id, now, now + LEASE_MS, !force))) return { outcome: 'busy' };
  const refreshMs = Number(row.refresh_ms);
  let result: Verified | 'unchanged';
  let upstreams: Awaited<ReturnType<typeof checkFederatedIdentityProviders>> = [];
  try {
    result = await fetchVerified(
      settings,
      row.url,
      { certificate: row.certificate, maxValidityMs: Number(row.max_validity_ms) },
      now,
      row.state === 'pending' ? {} : { etag: row.etag, lastModified: row.last_modified },
      await federatedEntityIds(store.db, id),
    );
    if (result !== 'unchanged')
      upstreams = await checkFederatedIdentityProviders(result.aggregate.identityProviders, now);
  } catch (err) {
    return refreshFailed(store, row, err, now, log);
  }
  if (result === 'unchanged') {
    await repo.updateFederation(store.db, id, {
      last_error: null,
      last_fetched_at: now,
      next_refresh_at: now + refreshMs,
      lease_until: null,
    });
    countFederationRefresh('unchanged');
    return { outcome: 'unchanged', valid_until: isoOrNull(row.valid_until) };
  }
  const { aggregate } = result;
  const upstreamProviders = await store.db.transaction().execute(async (trx) => {
    await repo.replaceAggregateEntities(trx, id, entityRows(id, aggregate, now));
    await repo.updateFederation(trx, id, {
      state: 'fresh',
      last_error: null,
      name: aggregate.name ?? null,
      entities: aggregate.entities.length,
      valid_until: aggregate.validUntil,
      etag: result.etag,
      last_modified: result.lastModified,
      last_fetched_at: now,
      next_refresh_at: now + refreshMs,
      lease_until: null,
    });
    const details = { entities: aggregate.entities.length, valid_until: iso(aggregate.validUntil) };
    await recordAudit(trx, {
      action: 'saml_federation.refresh',
      actor,
      at: now,
      subject: `saml-federation:${id}`,
      details,
    });
    return refreshFederatedProviders(trx, id, upstreams, { actor, now, ...(log ? { log } : {}) });
  });
  countFederationRefresh('updated');
  log?.info(
    { federation: id, entities: aggregate.entities.length, upstream_providers: upstreamProviders },
    'SAML federation metadata refreshed',
  );
  return {
    outcome: 'updated',
    entities: aggregate.entities.length,
    valid_until: iso(aggregate.validUntil),
    skipped: aggregate.skipped.length,
    upstream_providers: upstreamProviders,
  };
}
