// Passkeys (WebAuthn credentials). Lists are keyset-paginated on id.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { DB, PasskeysTable } from './schema.ts';
import { prepare } from './prepared.ts';
import { organizationAccess } from './clients.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type PasskeyRow = Selectable<PasskeysTable>;
export type PasskeyListRow = Pick<
  PasskeyRow,
  'id' | 'label' | 'created_at' | 'last_used_at' | 'mfa_verified' | 'aaguid'
> & { eppn: string };

export async function insertPasskeys(db: Q, rows: Insertable<PasskeysTable>[]): Promise<number[]> {
  if (rows.length === 0) return [];
  const inserted = await db.insertInto('passkeys').values(rows).returning('id').execute();
  return inserted.map((r) => r.id);
}

function listQuery(db: Q) {
  return db
    .selectFrom('passkeys')
    .innerJoin('users', 'users.id', 'passkeys.user_id')
    .select([
      'passkeys.id',
      'users.eppn',
      'passkeys.label',
      'passkeys.created_at',
      'passkeys.last_used_at',
      'passkeys.mfa_verified',
      'passkeys.aaguid',
    ]);
}

/** Passkeys of an organization with id > afterId, ascending, at most limit. */
export function listOrganizationPasskeys(
  db: Q,
  orgId: number,
  afterId: number,
  limit: number,
): Promise<PasskeyListRow[]> {
  return listQuery(db)
    .where('passkeys.org_id', '=', orgId)
    .where('passkeys.id', '>', afterId)
    .orderBy('passkeys.id')
    .limit(limit)
    .execute();
}

/** Passkeys of one user with id > afterId, ascending, at most limit. */
export function listUserPasskeys(db: Q, userId: number, afterId: number, limit: number): Promise<PasskeyListRow[]> {
  return listQuery(db)
    .where('passkeys.user_id', '=', userId)
    .where('passkeys.id', '>', afterId)
    .orderBy('passkeys.id')
    .limit(limit)
    .execute();
}

/** An organization as a client sees it: whether the client is active and holds the grant. */
export interface OrganizationAccess {
  id: number;
  realm: string;
  clientActive: boolean;
  granted: boolean;
}

/** The columns of a passkey in a list (the eppn is the caller's), all in the passkeys_user index (migration 012). */
const LIST_COLUMNS = [
  'passkeys.id',
  'passkeys.label',
  'passkeys.created_at',
  'passkeys.last_used_at',
  'passkeys.mfa_verified',
  'passkeys.aaguid',
] as const;

/**
 * The id of the user with this eppn in the organization (null when the user is in another one), as a
 * subquery. Only the eppn is a condition, so the user is found by the unique eppn index whatever
 * the statistics say: with `eppn = ? and org_id = ?` and no statistics yet (a new database, a bulk
 * import before autovacuum), PostgreSQL chose an index on org_id and read every user of the
 * organization to filter them by eppn.
 */
const userIdOf = (db: Q, p: { eppn: string; orgId: number }) =>
  db
    .selectFrom('users')
    .select((eb) => eb.case().when('users.org_id', '=', p.orgId).then(eb.ref('users.id')).end().as('id'))
    .where('users.eppn', '=', p.eppn);

/** A list row from the columns above, copied field by field (one shape for every row). */
function listRow(row: Omit<PasskeyListRow, 'eppn' | 'id'>, id: number, eppn: string): PasskeyListRow {
  return {
    id,
    eppn,
    label: row.label,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    mfa_verified: row.mfa_verified,
    aaguid: row.aaguid,
  };
}

const byEppn = prepare<
  { orgId: number; clientId: string; kind: 'admin'; eppn: string; afterId: number; limit: number },
  Omit<PasskeyListRow, 'id'> & {
    id: number | null;
    org_id: number;
    realm: string;
    client_active: unknown;
    granted: unknown;
  }
>((db, p) =>
  organizationAccess(db, p)
    // the user first, by the unique eppn (a subquery run once, before the join), then that user's
    // passkeys by (user_id, id): the plan does not depend on the statistics about the organization
    .leftJoin('passkeys', (join) =>
      join.on((eb) => eb.and([eb('passkeys.user_id', '=', userIdOf(db, p)), eb('passkeys.id', '>', p.afterId)])),
    )
    .select(LIST_COLUMNS)
    .orderBy('passkeys.id')
    .limit(p.limit),
);

const ofEppn = prepare<{ orgId: number; eppn: string; afterId: number; limit: number }, Omit<PasskeyListRow, 'eppn'>>(
  (db, p) =>
    db
      .selectFrom('passkeys')
      .select(LIST_COLUMNS)
      // as in byEppn: the user by the unique eppn first, then that user's passkeys by (user_id, id)
      .where((eb) => eb('passkeys.user_id', '=', userIdOf(db, p)))
      .where('passkeys.id', '>', p.afterId)
      .orderBy('passkeys.id')
      .limit(p.limit),
);

/**
 * The passkeys in an organization of the user with this (normalized) eppn, id > afterId, ascending,
 * at most limit: listPasskeysByEppn without the organization, for a caller that already checked it.
 */
export async function listPasskeysOfEppn(
  db: Q,
  orgId: number,
  eppn: string,
  afterId: number,
  limit: number,
): Promise<PasskeyListRow[]> {
  const rows = await ofEppn(db, { orgId, eppn, afterId, limit });
  const passkeys = new Array<PasskeyListRow>(rows.length);
  for (let i = 0; i < rows.length; i++) passkeys[i] = listRow(rows[i]!, rows[i]!.id, eppn);
  return passkeys;
}

/**
 * One round trip for one user's list: the organization with the client's access to it (undefined
 * when it does not exist), and the passkeys in it of the user with this (normalized) eppn, id >
 * afterId, ascending, at most limit. The caller checks the access before it uses the passkeys.
 */
export async function listPasskeysByEppn(
  db: Q,
  access: { orgId: number; clientId: string },
  eppn: string,
  afterId: number,
  limit: number,
): Promise<{ organization: OrganizationAccess | undefined; passkeys: PasskeyListRow[] }> {
  const rows = await byEppn(db, { ...access, kind: 'admin', eppn, afterId, limit });
  const first = rows[0];
  if (!first) return { organization: undefined, passkeys: [] };
  const organization = {
    id: first.org_id,
    realm: first.realm,
    // exists() is a boolean on PostgreSQL and 0/1 on SQLite
    clientActive: Boolean(first.client_active),
    granted: Boolean(first.granted),
  };
  const passkeys: PasskeyListRow[] = [];
  for (const row of rows) if (row.id !== null) passkeys.push(listRow(row, row.id, eppn));
  return { organization, passkeys };
}

export function listUserCredentials(db: Q, userId: number): Promise<PasskeyRow[]> {
  return db.selectFrom('passkeys').selectAll().where('user_id', '=', userId).orderBy('id').execute();
}

export function findPasskeyByCredentialId(db: Q, credentialId: Uint8Array): Promise<PasskeyRow | undefined> {
  return db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId).executeTakeFirst();
}

/** Deletes every passkey of a user; returns the deleted ids. */
export async function deleteUserPasskeys(db: Q, userId: number): Promise<number[]> {
  const rows = await db.deleteFrom('passkeys').where('user_id', '=', userId).returning('id').execute();
  return rows.map((r) => r.id).sort((a, b) => a - b);
}

/** Deletes one passkey if it belongs to the organization; returns its owner's eppn, or undefined. */
export async function deleteOrganizationPasskey(
  db: Q,
  orgId: number,
  id: number,
): Promise<{ userId: number; eppn: string; sub: string } | undefined> {
  const row = await db
    .selectFrom('passkeys')
    .innerJoin('users', 'users.id', 'passkeys.user_id')
    .select(['passkeys.id', 'passkeys.user_id', 'users.eppn', 'users.sub'])
    .where('passkeys.id', '=', id)
    .where('passkeys.org_id', '=', orgId)
    .executeTakeFirst();
  if (!row) return undefined;
  const r = await db.deleteFrom('passkeys').where('id', '=', id).where('org_id', '=', orgId).executeTakeFirst();
  return Number(r.numDeletedRows) === 1 ? { userId: row.user_id, eppn: row.eppn, sub: row.sub } : undefined;
}

export async function deleteUserPasskey(db: Q, userId: number, id: number): Promise<boolean> {
  const r = await db.deleteFrom('passkeys').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return Number(r.numDeletedRows) === 1;
}

export async function renameUserPasskey(db: Q, userId: number, id: number, label: string): Promise<boolean> {
  const r = await db
    .updateTable('passkeys')
    .set({ label })
    .where('id', '=', id)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/**
 * Records a successful assertion: new counter, backup state and last use. With a counter in use
 * the row changes only while its stored counter is still below the new one, so of two assertions
 * racing with the same counter one wins, and the counter never goes backwards. Returns false when
 * nothing was written (the caller treats that as a counter regression).
 */
export async function recordPasskeyUse(
  db: Q,
  id: number,
  signCount: number,
  backupState: boolean,
  now: number,
  backupEligible?: boolean,
): Promise<boolean> {
  let update = db
    .updateTable('passkeys')
    .set({
      sign_count: signCount,
      backup_state: backupState ? 1 : 0,
      ...(backupEligible === undefined ? {} : { backup_eligible: backupEligible ? 1 : 0 }),
      last_used_at: now,
    })
    .where('id', '=', id);
  // Authenticators without a counter always present 0; a stored 0 with a presented 0 is fine.
  update = signCount > 0 ? update.where('sign_count', '<', signCount) : update.where('sign_count', '=', 0);
  const r = await update.executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function countOrganizationPasskeys(db: Q, orgId: number): Promise<number> {
  const row = await db
    .selectFrom('passkeys')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** What is stored about each passkey's authenticator, with the imported metadata's status (passkey list --details). */
export async function listPasskeyAuthenticators(db: Q, ids: number[]) {
  const rows = [];
  for (let i = 0; i < ids.length; i += 500) {
    const chunk = ids.slice(i, i + 500);
    rows.push(
      ...(await db
        .selectFrom('passkeys')
        .leftJoin('mds_authenticators', 'mds_authenticators.aaguid', 'passkeys.aaguid')
        .select([
          'passkeys.id',
          'passkeys.aaguid',
          'passkeys.backup_eligible',
          'passkeys.backup_state',
          'passkeys.mfa_verified',
          'passkeys.transports',
          'passkeys.attested',
          'mds_authenticators.description',
          'mds_authenticators.status',
        ])
        .where('passkeys.id', 'in', chunk)
        .execute()),
    );
  }
  return rows;
}
