// SAML federations and the service providers their verified metadata holds
// (src/service-providers/federations.ts has the rules). A refresh is claimed with one conditional
// update, so of several instances exactly one fetches a federation's aggregate at a time.
import type { Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { DB, SamlFederationEntitiesTable, SamlFederationsTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type FederationRow = Selectable<SamlFederationsTable>;
export type FederationEntityRow = Selectable<SamlFederationEntitiesTable>;

/** Rows per insert: 7 parameters each, well under both dialects' limits. */
const BATCH = 500;

export async function insertFederation(db: Q, row: Insertable<SamlFederationsTable>): Promise<number> {
  const inserted = await db.insertInto('saml_federations').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(inserted.id);
}

export function findFederation(db: Q, id: number): Promise<FederationRow | undefined> {
  return db.selectFrom('saml_federations').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findFederationByUrl(db: Q, url: string): Promise<FederationRow | undefined> {
  return db.selectFrom('saml_federations').selectAll().where('url', '=', url).executeTakeFirst();
}

export function listFederations(db: Q): Promise<FederationRow[]> {
  return db.selectFrom('saml_federations').selectAll().orderBy('id').execute();
}

export async function deleteFederation(db: Q, id: number): Promise<boolean> {
  // Entities first: SQLite enforces the cascade too, but a connection without foreign keys would not.
  await db.deleteFrom('saml_federation_entities').where('federation_id', '=', id).execute();
  const result = await db.deleteFrom('saml_federations').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function updateFederation(db: Q, id: number, patch: Updateable<SamlFederationsTable>): Promise<void> {
  await db.updateTable('saml_federations').set(patch).where('id', '=', id).execute();
}

/**
 * Claims a federation's refresh until `leaseUntil`: unless another refresh holds it, and (with
 * `dueOnly`) only once its next refresh is due. True for the one caller that got it.
 */
export async function claimFederationRefresh(
  db: Q,
  id: number,
  now: number,
  leaseUntil: number,
  dueOnly: boolean,
): Promise<boolean> {
  let query = db
    .updateTable('saml_federations')
    .set({ lease_until: leaseUntil, last_attempt_at: now })
    .where('id', '=', id)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]));
  if (dueOnly) query = query.where('next_refresh_at', '<=', now);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Federations whose refresh is due and not held by another refresh. */
export async function dueFederations(db: Q, now: number): Promise<number[]> {
  const rows = await db
    .selectFrom('saml_federations')
    .select('id')
    .where('next_refresh_at', '<=', now)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', now)]))
    .orderBy('id')
    .execute();
  return rows.map((r) => Number(r.id));
}

/**
 * Marks fresh federations whose aggregate's validUntil has passed as stale; returns those this
 * call changed (each is reported once, by the instance that changed it).
 */
export async function markStaleFederations(db: Q, now: number): Promise<FederationRow[]> {
  const candidates = await db
    .selectFrom('saml_federations')
    .selectAll()
    .where('state', '=', 'fresh')
    .where('valid_until', '<=', now)
    .execute();
  const changed: FederationRow[] = [];
  for (const row of candidates) {
    const result = await db
      .updateTable('saml_federations')
      .set({ state: 'stale' })
      .where('id', '=', row.id)
      .where('state', '=', 'fresh')
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 1) changed.push({ ...row, state: 'stale' });
  }
  return changed;
}

/** Replaces what the federation's previous aggregate held; entities from MDQ it now lists are taken over. */
export async function replaceAggregateEntities(
  db: Q,
  federationId: number,
  rows: Insertable<SamlFederationEntitiesTable>[],
): Promise<void> {
  await db
    .deleteFrom('saml_federation_entities')
    .where('federation_id', '=', federationId)
    .where('source', '=', 'aggregate')
    .execute();
  for (let i = 0; i < rows.length; i += BATCH) await upsertEntities(db, rows.slice(i, i + BATCH));
}

export async function upsertEntities(db: Q, rows: Insertable<SamlFederationEntitiesTable>[]): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('saml_federation_entities')
    .values(rows)
    .onConflict((oc) =>
      oc.columns(['federation_id', 'entity_id']).doUpdateSet((eb) => ({
        client_id: eb.ref('excluded.client_id'),
        source: eb.ref('excluded.source'),
        descriptor: eb.ref('excluded.descriptor'),
        categories: eb.ref('excluded.categories'),
        valid_until: eb.ref('excluded.valid_until'),
        fetched_at: eb.ref('excluded.fetched_at'),
      })),
    )
    .execute();
}

export type FederatedEntityRow = FederationEntityRow & { releases: string; require_signed_requests: number };

/**
 * Entities of federations' metadata in force at `now` with this entityID, first-added federation
 * first: the entity's own validity and its federation's aggregate's, so an entity a metadata query
 * answered is not served once the aggregate of its federation is past its validUntil (stale).
 */
export function findFederatedEntities(db: Q, entityId: string, now: number): Promise<FederatedEntityRow[]> {
  return federatedEntities(db, now).where('e.entity_id', '=', entityId).execute();
}

/** The same, by the client the SP is paired with. */
export function findFederatedEntitiesByClientId(db: Q, clientId: string, now: number): Promise<FederatedEntityRow[]> {
  return federatedEntities(db, now).where('e.client_id', '=', clientId).execute();
}

function federatedEntities(db: Q, now: number) {
  return db
    .selectFrom('saml_federation_entities as e')
    .innerJoin('saml_federations as f', 'f.id', 'e.federation_id')
    .selectAll('e')
    .select(['f.releases', 'f.require_signed_requests'])
    .where('e.valid_until', '>', now)
    .where('f.valid_until', '>', now)
    .orderBy('f.id');
}

/** The client ids of a federation's entities that have a client row and no registered SP of their own. */
export async function federationOnlyClients(db: Q, federationId: number): Promise<string[]> {
  const rows = await db
    .selectFrom('saml_federation_entities as e')
    .innerJoin('clients as c', 'c.client_id', 'e.client_id')
    .select('e.client_id')
    .where('e.federation_id', '=', federationId)
    .where('c.protocol', '=', 'saml')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb.selectFrom('service_providers as s').select('s.entity_id').whereRef('s.entity_id', '=', 'e.entity_id'),
        ),
      ),
    )
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('saml_federation_entities as o')
            .select('o.entity_id')
            .whereRef('o.entity_id', '=', 'e.entity_id')
            .where('o.federation_id', '<>', federationId),
        ),
      ),
    )
    .execute();
  return rows.map((r) => r.client_id);
}

/** The entities of one federation, by entityID (a page of them). */
export function listFederationEntities(
  db: Q,
  federationId: number,
  limit: number,
): Promise<Pick<FederationEntityRow, 'entity_id' | 'source' | 'categories' | 'valid_until'>[]> {
  return db
    .selectFrom('saml_federation_entities')
    .select(['entity_id', 'source', 'categories', 'valid_until'])
    .where('federation_id', '=', federationId)
    .orderBy('entity_id')
    .limit(limit)
    .execute();
}

/**
 * Federations that offer a metadata query service and whose aggregate is in force at `now`,
 * first-added first: a stale federation's metadata service is not asked, as its aggregate's SPs are
 * not served.
 */
export function mdqFederations(db: Q, now: number): Promise<FederationRow[]> {
  return db
    .selectFrom('saml_federations')
    .selectAll()
    .where('mdq_url', 'is not', null)
    .where('valid_until', '>', now)
    .orderBy('id')
    .execute();
}
