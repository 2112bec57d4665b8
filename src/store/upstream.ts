// Upstream identity providers, their links to accounts, and upstream sign-ins under way
// (docs/upstream.md). A request is consumed by one conditional update, so of two returns with the
// same state only one gets it; its assertion is taken by the interaction the same way.
import { sql, type Insertable, type Kysely, type Selectable, type Transaction, type Updateable } from 'kysely';
import type { DB, UpstreamLinksTable, UpstreamProvidersTable, UpstreamRequestsTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
/** A provider as read for everything but serving its logo: the logo's bytes stay in the database. */
export type UpstreamProviderRow = Omit<Selectable<UpstreamProvidersTable>, 'logo_data' | 'logo_url'> & {
  /** the logo's size in bytes, when there is one */
  logo_bytes: number | string | null;
};

/** Every column of upstream_providers but the logo's bytes (and the unused logo_url). */
const PROVIDER_COLUMNS = [
  'id',
  'org_id',
  'type',
  'name',
  'enabled',
  'link_by',
  'create_users',
  'namespace',
  'mappings',
  'oidc_issuer',
  'oidc_client_id',
  'oidc_client_secret',
  'oidc_scopes',
  'oidc_auth_method',
  'oidc_private_jwk',
  'oidc_public_jwk',
  'saml_entity_id',
  'saml_metadata',
  'saml_metadata_source',
  'saml_email_verified',
  'saml_require_encryption',
  'trust_amr',
  'saml_federation_id',
  'saml_federation_missing_since',
  'saml_federation_missing_reason',
  'logo_type',
  'logo_etag',
  'created_at',
  'updated_at',
] as const satisfies readonly Exclude<keyof UpstreamProvidersTable, 'logo_data' | 'logo_url'>[];

/** The select list of a provider row (upstream.ts, upstream-saml.ts). */
export function selectProvider(db: Q) {
  return db
    .selectFrom('upstream_providers')
    .select(PROVIDER_COLUMNS)
    .select(sql<number | string | null>`length(logo_data)`.as('logo_bytes'));
}
export type UpstreamLinkRow = Selectable<UpstreamLinksTable>;
export type UpstreamRequestRow = Selectable<UpstreamRequestsTable>;

export async function insertUpstreamProvider(db: Q, row: Insertable<UpstreamProvidersTable>): Promise<void> {
  await db.insertInto('upstream_providers').values(row).execute();
}

export async function updateUpstreamProvider(
  db: Q,
  id: string,
  changes: Updateable<UpstreamProvidersTable>,
): Promise<boolean> {
  const result = await db.updateTable('upstream_providers').set(changes).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export function findUpstreamProvider(db: Q, id: string): Promise<UpstreamProviderRow | undefined> {
  return selectProvider(db).where('id', '=', id).executeTakeFirst();
}

/** The logo of an enabled provider, to serve it; undefined for no such provider, a disabled one, or no logo. */
export async function findEnabledProviderLogo(
  db: Q,
  id: string,
): Promise<{ type: string; data: Buffer; etag: string } | undefined> {
  const row = await db
    .selectFrom('upstream_providers')
    .select(['logo_type', 'logo_data', 'logo_etag'])
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .executeTakeFirst();
  if (!row?.logo_type || !row.logo_data || !row.logo_etag) return undefined;
  const data = row.logo_data;
  return { type: row.logo_type, data: Buffer.from(data.buffer, data.byteOffset, data.byteLength), etag: row.logo_etag };
}

export function listUpstreamProviders(db: Q, orgId?: number): Promise<UpstreamProviderRow[]> {
  let query = selectProvider(db).orderBy('org_id').orderBy('created_at').orderBy('id');
  if (orgId !== undefined) query = query.where('org_id', '=', orgId);
  return query.execute();
}

/** Removes the provider; its links and requests go with it (foreign keys). Returns the links removed. */
export async function deleteUpstreamProvider(db: Q, id: string): Promise<number> {
  const links = await countProviderLinks(db, id);
  await db.deleteFrom('upstream_links').where('provider_id', '=', id).execute();
  await db.deleteFrom('upstream_requests').where('provider_id', '=', id).execute();
  await db.deleteFrom('upstream_providers').where('id', '=', id).execute();
  return links;
}

export async function countProviderLinks(db: Q, providerId: string): Promise<number> {
  const row = await db
    .selectFrom('upstream_links')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('provider_id', '=', providerId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

// Links.

export function findLinkBySubject(db: Q, providerId: string, subject: string): Promise<UpstreamLinkRow | undefined> {
  return db
    .selectFrom('upstream_links')
    .selectAll()
    .where('provider_id', '=', providerId)
    .where('subject', '=', subject)
    .executeTakeFirst();
}

export function findLinkOfUser(db: Q, providerId: string, userId: number): Promise<UpstreamLinkRow | undefined> {
  return db
    .selectFrom('upstream_links')
    .selectAll()
    .where('provider_id', '=', providerId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
}

export async function insertLink(db: Q, row: Insertable<UpstreamLinksTable>): Promise<void> {
  await db.insertInto('upstream_links').values(row).execute();
}

export async function touchLink(db: Q, providerId: string, subject: string, at: number): Promise<void> {
  await db
    .updateTable('upstream_links')
    .set({ last_used_at: at })
    .where('provider_id', '=', providerId)
    .where('subject', '=', subject)
    .execute();
}

export async function deleteLink(db: Q, providerId: string, userId: number): Promise<boolean> {
  const result = await db
    .deleteFrom('upstream_links')
    .where('provider_id', '=', providerId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export interface UserLinkRow extends UpstreamLinkRow {
  provider_name: string;
  provider_type: string;
  namespace: string | null;
}

/** A user's links with their providers' names and namespaces, oldest first. */
export function listLinksOfUser(db: Q, userId: number): Promise<UserLinkRow[]> {
  return db
    .selectFrom('upstream_links as l')
    .innerJoin('upstream_providers as p', 'p.id', 'l.provider_id')
    .select([
      'l.provider_id',
      'l.user_id',
      'l.subject',
      'l.created_at',
      'l.last_used_at',
      'p.name as provider_name',
      'p.type as provider_type',
      'p.namespace',
    ])
    .where('l.user_id', '=', userId)
    .orderBy('l.created_at')
    .orderBy('l.provider_id')
    .execute();
}

// Requests under way.

export async function insertUpstreamRequest(db: Q, row: Insertable<UpstreamRequestsTable>): Promise<void> {
  await db.insertInto('upstream_requests').values(row).execute();
}

/**
 * Marks the request consumed and returns it, when it exists for this provider, has not expired and
 * was not consumed before: one conditional update, so a replayed state finds nothing.
 */
export async function consumeUpstreamRequestRow(
  db: Q,
  id: string,
  providerId: string,
  now: number,
): Promise<UpstreamRequestRow | undefined> {
  const result = await db
    .updateTable('upstream_requests')
    .set({ consumed_at: now })
    .where('id', '=', id)
    .where('provider_id', '=', providerId)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return undefined;
  return db.selectFrom('upstream_requests').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The request with this id, as it is. */
export function findUpstreamRequestRow(db: Q, id: string): Promise<UpstreamRequestRow | undefined> {
  return db.selectFrom('upstream_requests').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The assertion the protocol checks established, waiting for the interaction to take it. */
export async function storeUpstreamAssertion(db: Q, id: string, assertion: string): Promise<void> {
  await db
    .updateTable('upstream_requests')
    .set({ assertion })
    .where('id', '=', id)
    .where('finished_at', 'is', null)
    .execute();
}

/** Which answered request a take may finish: its purpose, and for whom it was started. */
interface TakeOnly {
  purpose: 'sign-in' | 'link';
  interactionUid?: string;
  userId?: number;
  sessionUid?: string;
}

/** Finishes an answered, unexpired request once, when it matches `only`; returns it when this call finished it. */
async function takeAnswered(db: Q, id: string, only: TakeOnly, now: number): Promise<UpstreamRequestRow | undefined> {
  const result = await db
    .updateTable('upstream_requests')
    .set({ finished_at: now })
    .where('id', '=', id)
    .where('purpose', '=', only.purpose)
    .$if(only.interactionUid !== undefined, (q) => q.where('interaction_uid', '=', only.interactionUid!))
    .$if(only.userId !== undefined, (q) => q.where('user_id', '=', only.userId!))
    .$if(only.sessionUid !== undefined, (q) => q.where('session_uid', '=', only.sessionUid!))
    .where('assertion', 'is not', null)
    .where('finished_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return undefined;
  return db.selectFrom('upstream_requests').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Takes the request's assertion once, for the interaction it was started from. */
export function takeUpstreamAssertion(
  db: Q,
  id: string,
  interactionUid: string,
  now: number,
): Promise<UpstreamRequestRow | undefined> {
  return takeAnswered(db, id, { purpose: 'sign-in', interactionUid }, now);
}

/**
 * Takes a link request's assertion once, for the account and the session that started it: nothing
 * when the request is not a link, was started by another account or session, expired or was taken.
 */
export function takeLinkAssertion(
  db: Q,
  id: string,
  owner: { userId: number; sessionUid: string },
  now: number,
): Promise<UpstreamRequestRow | undefined> {
  return takeAnswered(db, id, { purpose: 'link', userId: owner.userId, sessionUid: owner.sessionUid }, now);
}

/** Ends a link request that came back to a browser no longer in the session that started it; returns it when it did. */
export function abandonLinkRequest(db: Q, id: string, now: number): Promise<UpstreamRequestRow | undefined> {
  return takeAnswered(db, id, { purpose: 'link' }, now);
}

export async function deleteExpiredUpstreamRequests(db: Q, now: number): Promise<number> {
  const result = await db.deleteFrom('upstream_requests').where('expires_at', '<=', now).executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The organization's user with this directory id (SCIM externalId, an LDAP entry's id). */
export function findUserByExternalId(db: Q, orgId: number, externalId: string) {
  return db
    .selectFrom('users')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('external_id', '=', externalId)
    .executeTakeFirst();
}

/** Whether a secondary id is held by any user already. */
/** The user holding the secondary id, if any. */
export async function secondaryIdOwner(db: Q, namespace: string, identifier: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('user_ids')
    .select('user_id')
    .where('namespace', '=', namespace)
    .where('identifier', '=', identifier)
    .executeTakeFirst();
  return row === undefined ? undefined : Number(row.user_id);
}

/** The organization of a realm (the part of an eppn after the @). */
export function findOrganizationByRealm(db: Q, realm: string) {
  return db.selectFrom('organizations').selectAll().where('realm', '=', realm).executeTakeFirst();
}
