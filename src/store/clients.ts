// The client registry and the organizations each client is granted.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { ClientsTable, DB } from './schema.ts';
import { prepare } from './prepared.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type ClientRow = Selectable<ClientsTable>;
export type GrantKind = 'admin' | 'checkuser';

export async function insertClient(db: Q, client: Insertable<ClientsTable>): Promise<void> {
  await db.insertInto('clients').values(client).execute();
}

/** Inserts the client unless one with its id exists (two instances may race to create it); true when inserted. */
export async function insertClientIfAbsent(db: Q, client: Insertable<ClientsTable>): Promise<boolean> {
  const r = await db
    .insertInto('clients')
    .values(client)
    .onConflict((oc) => oc.column('client_id').doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

const clientById = prepare<{ clientId: string }, ClientRow>((db, p) =>
  db.selectFrom('clients').selectAll().where('client_id', '=', p.clientId),
);

export async function findClient(db: Q, clientId: string): Promise<ClientRow | undefined> {
  const [row] = await clientById(db, { clientId });
  return row;
}

export function listClients(db: Q): Promise<ClientRow[]> {
  return db.selectFrom('clients').selectAll().orderBy('created_at').orderBy('client_id').execute();
}

export async function updateClient(
  db: Q,
  clientId: string,
  changes: Partial<Omit<ClientRow, 'client_id'>>,
): Promise<boolean> {
  const r = await db.updateTable('clients').set(changes).where('client_id', '=', clientId).executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function grantOrganizations(db: Q, clientId: string, orgIds: number[], kind: GrantKind): Promise<void> {
  for (const chunk of chunks(orgIds))
    await db
      .insertInto('client_orgs')
      .values(chunk.map((org_id) => ({ client_id: clientId, org_id, kind })))
      .onConflict((oc) => oc.doNothing())
      .execute();
}

export async function revokeOrganizations(db: Q, clientId: string, orgIds: number[], kind: GrantKind): Promise<number> {
  let revoked = 0;
  for (const chunk of chunks(orgIds)) {
    const r = await db
      .deleteFrom('client_orgs')
      .where('client_id', '=', clientId)
      .where('kind', '=', kind)
      .where('org_id', 'in', chunk)
      .executeTakeFirst();
    revoked += Number(r.numDeletedRows);
  }
  return revoked;
}

export async function listGrantedOrganizations(db: Q, clientId: string, kind: GrantKind): Promise<number[]> {
  const rows = await db
    .selectFrom('client_orgs')
    .select('org_id')
    .where('client_id', '=', clientId)
    .where('kind', '=', kind)
    .orderBy('org_id')
    .execute();
  return rows.map((r) => r.org_id);
}

/**
 * The organization (`org_id`, `realm`) with whether the client exists and is enabled
 * (`client_active`) and holds a grant of this kind for it (`granted`): one query, which a caller
 * may extend (the passkey API joins one user's passkeys to it).
 */
export function organizationAccess(db: Q, p: { orgId: number; clientId: string; kind: GrantKind }) {
  return db
    .selectFrom('organizations')
    .select(['organizations.id as org_id', 'organizations.realm'])
    .select((eb) => [
      eb
        .exists(
          eb
            .selectFrom('clients')
            .select('clients.client_id')
            .where('clients.client_id', '=', p.clientId)
            .where('clients.disabled_at', 'is', null),
        )
        .as('client_active'),
      eb
        .exists(
          eb
            .selectFrom('client_orgs')
            .select('client_orgs.org_id')
            .where('client_orgs.client_id', '=', p.clientId)
            .where('client_orgs.org_id', '=', p.orgId)
            .where('client_orgs.kind', '=', p.kind),
        )
        .as('granted'),
    ])
    .where('organizations.id', '=', p.orgId);
}

const organizationWithGrant = prepare<
  { orgId: number; clientId: string; kind: GrantKind },
  { org_id: number; realm: string; client_active: unknown; granted: unknown }
>(organizationAccess);

export async function findOrganizationWithGrant(
  db: Q,
  orgId: number,
  clientId: string,
  kind: GrantKind,
): Promise<{ id: number; realm: string; granted: boolean; clientActive: boolean } | undefined> {
  const [row] = await organizationWithGrant(db, { orgId, clientId, kind });
  // exists() is a boolean on PostgreSQL and 0/1 on SQLite
  return (
    row && { id: row.org_id, realm: row.realm, granted: Boolean(row.granted), clientActive: Boolean(row.client_active) }
  );
}

/** Deletes the client; its organization grants and users' consents cascade. */
export async function deleteClient(db: Q, clientId: string): Promise<boolean> {
  const r = await db.deleteFrom('clients').where('client_id', '=', clientId).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

const userOfGrantedOrganization = prepare<{ clientId: string; sub: string }, { sub: string }>((db, p) =>
  db
    .selectFrom('users')
    .innerJoin('client_orgs', 'client_orgs.org_id', 'users.org_id')
    .select('users.sub')
    .where('users.sub', '=', p.sub)
    .where('client_orgs.client_id', '=', p.clientId)
    .where('client_orgs.kind', '=', 'admin'),
);

/** Whether the user `sub` belongs to one of the organizations the client is granted (`--orgs`). */
export async function isUserOfGrantedOrganization(db: Q, clientId: string, sub: string): Promise<boolean> {
  return (await userOfGrantedOrganization(db, { clientId, sub })).length > 0;
}
