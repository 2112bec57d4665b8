// SAML service providers and the identity provider's SAML keys.
import { sql, type Insertable, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { DB, SamlKeysTable, ServiceProvidersTable } from './schema.ts';
import type { Store } from './index.ts';
import { prepare } from './prepared.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type ServiceProviderRow = Selectable<ServiceProvidersTable>;
export type SamlKeyRow = Selectable<SamlKeysTable>;

export async function insertServiceProvider(db: Q, row: Insertable<ServiceProvidersTable>): Promise<void> {
  await db.insertInto('service_providers').values(row).execute();
}

const byEntityId = prepare<{ entityId: string }, ServiceProviderRow>((db, p) =>
  db.selectFrom('service_providers').selectAll().where('entity_id', '=', p.entityId),
);

const byClientId = prepare<{ clientId: string }, ServiceProviderRow>((db, p) =>
  db.selectFrom('service_providers').selectAll().where('client_id', '=', p.clientId),
);

export async function findServiceProviderRow(db: Q, entityId: string): Promise<ServiceProviderRow | undefined> {
  const [row] = await byEntityId(db, { entityId });
  return row;
}

export async function findServiceProviderRowByClientId(
  db: Q,
  clientId: string,
): Promise<ServiceProviderRow | undefined> {
  const [row] = await byClientId(db, { clientId });
  return row;
}

export function listServiceProviderRows(db: Q): Promise<ServiceProviderRow[]> {
  return db.selectFrom('service_providers').selectAll().orderBy('created_at').orderBy('entity_id').execute();
}

export async function updateServiceProviderRow(
  db: Q,
  entityId: string,
  changes: Partial<Omit<ServiceProviderRow, 'entity_id' | 'client_id'>>,
): Promise<boolean> {
  const r = await db.updateTable('service_providers').set(changes).where('entity_id', '=', entityId).executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function deleteServiceProviderRow(db: Q, entityId: string): Promise<boolean> {
  const r = await db.deleteFrom('service_providers').where('entity_id', '=', entityId).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

/** Every key, newest activation first (kid breaking ties, so every instance reads one order). */
export function listSamlKeys(db: Q): Promise<SamlKeyRow[]> {
  return db.selectFrom('saml_keys').selectAll().orderBy('activates_at', 'desc').orderBy('kid').execute();
}

export async function insertSamlKeys(db: Q, rows: SamlKeyRow[]): Promise<void> {
  if (rows.length === 0) return;
  await db.insertInto('saml_keys').values(rows).execute();
}

/** Marks the other keys of one use retired from `at` (when the new one activates). */
export async function retireSamlKeys(db: Q, use: string, exceptKid: string, at: number): Promise<void> {
  await db
    .updateTable('saml_keys')
    .set({ retired_at: at })
    .where('key_use', '=', use)
    .where('kid', '!=', exceptKid)
    .where('retired_at', 'is', null)
    .execute();
}

export async function deleteSamlKeysRetiredBefore(db: Q, before: number): Promise<number> {
  const r = await db.deleteFrom('saml_keys').where('retired_at', '<', before).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * Runs fn holding the SAML key lock, so instances creating the first keys at once (or a rotation
 * racing them) never make two: a PostgreSQL advisory lock; SQLite serializes writers by itself.
 */
export function inSamlKeyTransaction<T>(store: Store, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return store.db.transaction().execute(async (trx) => {
    if (store.dialect === 'postgres') await sql`select pg_advisory_xact_lock(7301017)`.execute(trx);
    return fn(trx);
  });
}

/** Blocks a federation SP (one that is not registered); false when it already was. */
export async function insertServiceProviderBlock(db: Q, entityId: string, now: number): Promise<boolean> {
  const r = await db
    .insertInto('saml_sp_blocks')
    .values({ entity_id: entityId, blocked_at: now })
    .onConflict((oc) => oc.column('entity_id').doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

/** Lifts a block; false when there was none. */
export async function deleteServiceProviderBlock(db: Q, entityId: string): Promise<boolean> {
  const r = await db.deleteFrom('saml_sp_blocks').where('entity_id', '=', entityId).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

const blockOf = prepare<{ entityId: string }, { blocked_at: number }>((db, p) =>
  db.selectFrom('saml_sp_blocks').select('blocked_at').where('entity_id', '=', p.entityId),
);

/** When the SP was blocked, or undefined when it is not. */
export async function serviceProviderBlockedAt(db: Q, entityId: string): Promise<number | undefined> {
  const [row] = await blockOf(db, { entityId });
  return row === undefined ? undefined : Number(row.blocked_at);
}
