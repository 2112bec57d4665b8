// SAML upstream providers taken from a trusted federation (`upstream add --federation <id> --entity
// <entityID>`, docs/upstream.md): the IdP's EntityDescriptor is copied out of the federation's
// verified aggregate (src/saml/metadata/aggregate.ts) and checked by the same document reader as a
// `--metadata` file; each newer aggregate the federation's refresh verifies brings the entity's
// current certificates and endpoints to every provider bound to it, in the refresh's transaction.
// An entity that left the aggregate (or whose entry is no longer usable) keeps its last good
// metadata, whose validUntil is the aggregate's: sign-in through it ends when that passes.
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import * as repo from '../store/upstream.ts';
import { listFederationUpstreamRows } from '../store/upstream-saml.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, errorText } from '../errors.ts';
import { iso } from '../time.ts';
import { parseIdpMetadata, type FederatedIdentityProvider, type IdpDescriptor } from '../saml/metadata/index.ts';
import { readCertificate } from '../saml/xml/index.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** The entityIDs of the providers bound to a federation: what its refresh copies out of the aggregate. */
export async function federatedEntityIds(db: Q, federationId: number): Promise<string[]> {
  const rows = await listFederationUpstreamRows(db, federationId);
  return [...new Set(rows.map((r) => r.saml_entity_id ?? ''))].filter(Boolean);
}

/** An entry of the aggregate, read as a `--metadata` document is; a refusal says why in one line. */
export async function checkFederatedIdentityProvider(
  entry: FederatedIdentityProvider,
  now = Date.now(),
): Promise<{ entityId: string; metadataXml: string; descriptor: IdpDescriptor }> {
  if ('refused' in entry) throw badRequest(entry.refused);
  const descriptor = await parseIdpMetadata(entry.metadataXml, { now });
  if (descriptor.entityId !== entry.entityId)
    throw badRequest(`the federation's entry for ${entry.entityId} is for another entity`);
  return { entityId: entry.entityId, metadataXml: entry.metadataXml, descriptor };
}

/** What a refresh found for one entity: its checked metadata, or why there is none. */
export type FederatedMetadata = { entityId: string } & (
  { metadataXml: string; validUntil: number; signingCertificates: string[] } | { refused: string }
);

/** Every entry of the aggregate checked (before the refresh's transaction: the schema check takes a while). */
export async function checkFederatedIdentityProviders(
  entries: readonly FederatedIdentityProvider[],
  now = Date.now(),
): Promise<FederatedMetadata[]> {
  const checked: FederatedMetadata[] = [];
  for (const entry of entries) {
    try {
      if ('refused' in entry) throw badRequest(entry.refused);
      const { metadataXml, descriptor } = await checkFederatedIdentityProvider(entry, now);
      const signingCertificates = descriptor.signingCertificates.map((pem) => readCertificate(pem).sha256Fingerprint);
      checked.push({ entityId: entry.entityId, metadataXml, validUntil: entry.validUntil, signingCertificates });
    } catch (err) {
      checked.push({ entityId: entry.entityId, refused: errorText(err, 300) });
    }
  }
  return checked;
}

export interface FederatedRefreshOptions extends Change {
  log?: FastifyBaseLogger;
}

/**
 * Brings the providers bound to a federation in step with a newly verified aggregate, inside the
 * refresh's transaction: new metadata is stored (audited `upstream.federation_refresh`, logged);
 * an entity without a usable entry keeps its last good metadata and is marked missing, once
 * (audited and logged at warning level); an entity back in the aggregate is no longer missing. A
 * provider whose entity is not among those found (`found` has an entry for each entity looked for)
 * was bound during the fetch and is left alone. Returns the number of providers changed.
 */
export async function refreshFederatedProviders(
  trx: Q,
  federationId: number,
  found: readonly FederatedMetadata[],
  { actor = SYSTEM, now = Date.now(), log }: FederatedRefreshOptions = {},
): Promise<number> {
  const byEntity = new Map(found.map((f) => [f.entityId, f]));
  let changed = 0;
  for (const row of await listFederationUpstreamRows(trx, federationId)) {
    const entityId = row.saml_entity_id ?? '';
    const entry = byEntity.get(entityId);
    // Bound after this refresh read which entities to look for (while it fetched): not looked for,
    // so nothing is known of it; the next refresh brings it in step.
    if (!entry) continue;
    const subject = `upstream:${row.id}`;
    const orgId = Number(row.org_id);
    if ('refused' in entry) {
      if (row.saml_federation_missing_since !== null) continue;
      await repo.updateUpstreamProvider(trx, row.id, {
        saml_federation_missing_since: now,
        saml_federation_missing_reason: entry.refused,
        updated_at: now,
      });
      const details = {
        id: row.id,
        federation: federationId,
        entity_id: entityId,
        outcome: 'missing',
        reason: entry.refused,
      };
      await recordAudit(trx, { action: 'upstream.federation_refresh', actor, at: now, subject, orgId, details });
      log?.warn(
        { upstream: row.id, federation: federationId, entity_id: entityId, reason: entry.refused },
        "an upstream SAML provider's entity has no usable entry in its federation's new metadata: its last metadata is kept until its validUntil",
      );
      changed++;
      continue;
    }
    if (entry.metadataXml === row.saml_metadata && row.saml_federation_missing_since === null) continue;
    // A newer aggregate moves every entry's validUntil on: stored, but only a change of anything
    // else (keys, endpoints) or the entity's return is a change worth a record.
    const different =
      row.saml_federation_missing_since !== null ||
      withoutValidUntil(entry.metadataXml) !== withoutValidUntil(row.saml_metadata ?? '');
    await repo.updateUpstreamProvider(trx, row.id, {
      saml_metadata: entry.metadataXml,
      saml_federation_missing_since: null,
      saml_federation_missing_reason: null,
      ...(different ? { updated_at: now } : {}),
    });
    if (!different) continue;
    const details = {
      id: row.id,
      federation: federationId,
      entity_id: entityId,
      outcome: 'updated',
      valid_until: iso(entry.validUntil),
      signing_certificates: entry.signingCertificates,
    };
    await recordAudit(trx, { action: 'upstream.federation_refresh', actor, at: now, subject, orgId, details });
    log?.info(
      { upstream: row.id, federation: federationId, entity_id: entityId },
      "an upstream SAML provider's metadata was refreshed from its federation",
    );
    changed++;
  }
  return changed;
}

/** The copy without its root's validUntil (set from the aggregate's, so it differs at every newer aggregate). */
function withoutValidUntil(metadataXml: string): string {
  return metadataXml.replace(/^(<[^>]*?)\svalidUntil="[^"]*"/, '$1');
}
