// The imported FIDO Metadata Service (MDS3): one row per authenticator model (AAGUID) and one per
// imported blob. Written only by the import (src/webauthn/mds.ts), in one transaction.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { DB, MdsAuthenticatorsTable, MdsImportsTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type MdsAuthenticator = Selectable<MdsAuthenticatorsTable>;
export type MdsImport = Selectable<MdsImportsTable>;

/** Rows per statement: a statement carries 7 parameters, well under both dialects' limits. */
const BATCH = 200;

/** The serial (`no`) of the newest imported blob, or undefined before the first import. */
export async function lastMdsSerial(db: Q): Promise<number | undefined> {
  const row = await db
    .selectFrom('mds_imports')
    .select((eb) => eb.fn.max('serial').as('serial'))
    .executeTakeFirst();
  return row?.serial === null || row?.serial === undefined ? undefined : Number(row.serial);
}

/** The newest import, or undefined before the first. */
export function latestMdsImport(db: Q): Promise<MdsImport | undefined> {
  return db.selectFrom('mds_imports').selectAll().orderBy('serial', 'desc').limit(1).executeTakeFirst();
}

export async function insertMdsImport(db: Q, row: Insertable<MdsImportsTable>): Promise<void> {
  await db.insertInto('mds_imports').values(row).execute();
}

/** Inserts the authenticators, replacing what an earlier blob said about the same AAGUIDs. */
export async function upsertMdsAuthenticators(db: Q, rows: Insertable<MdsAuthenticatorsTable>[]): Promise<void> {
  for (let i = 0; i < rows.length; i += BATCH) {
    await db
      .insertInto('mds_authenticators')
      .values(rows.slice(i, i + BATCH))
      .onConflict((oc) =>
        oc.column('aaguid').doUpdateSet((eb) => ({
          description: eb.ref('excluded.description'),
          status: eb.ref('excluded.status'),
          status_date: eb.ref('excluded.status_date'),
          icon: eb.ref('excluded.icon'),
          statement: eb.ref('excluded.statement'),
          updated_at: eb.ref('excluded.updated_at'),
        })),
      )
      .execute();
  }
}

export function findMdsAuthenticator(db: Q, aaguid: string): Promise<MdsAuthenticator | undefined> {
  return db.selectFrom('mds_authenticators').selectAll().where('aaguid', '=', aaguid).executeTakeFirst();
}

/** Every imported metadata statement (JSON text), by AAGUID. */
export function listMdsStatements(db: Q): Promise<Pick<MdsAuthenticator, 'aaguid' | 'statement'>[]> {
  return db.selectFrom('mds_authenticators').select(['aaguid', 'statement']).orderBy('aaguid').execute();
}

export interface PasskeyWithStatus {
  id: number;
  org_id: number;
  eppn: string;
  aaguid: string;
  description: string;
  status: string;
}

/** Passkeys whose authenticator model has one of the statuses, ascending by id; one organization's or all. */
export function listPasskeysWithMdsStatus(
  db: Q,
  statuses: readonly string[],
  orgId?: number,
): Promise<PasskeyWithStatus[]> {
  let q = db
    .selectFrom('passkeys')
    .innerJoin('users', 'users.id', 'passkeys.user_id')
    .innerJoin('mds_authenticators', 'mds_authenticators.aaguid', 'passkeys.aaguid')
    .select([
      'passkeys.id',
      'passkeys.org_id',
      'users.eppn',
      'passkeys.aaguid',
      'mds_authenticators.description',
      'mds_authenticators.status',
    ])
    .where('mds_authenticators.status', 'in', [...statuses]);
  if (orgId !== undefined) q = q.where('passkeys.org_id', '=', orgId);
  return q.orderBy('passkeys.id').execute();
}
