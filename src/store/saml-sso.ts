// SAML single sign-on's tables: request IDs accepted once, persistent NameIDs, and the SPs of a session.
import type { Kysely, Transaction } from 'kysely';
import type { DB, SamlSessionSpsTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

/**
 * Records a request ID (already hashed with its issuer); true for the first caller only. One
 * insert that does nothing on a conflict, so of concurrent requests with one ID, on one instance
 * or several sharing the database, exactly one goes on. An expired row is taken over.
 */
export async function recordRequestId(db: Q, id: string, expiresAt: number, now: number): Promise<boolean> {
  const r = await db
    .insertInto('saml_request_ids')
    .values({ id, expires_at: expiresAt })
    .onConflict((oc) =>
      oc.column('id').doUpdateSet({ expires_at: expiresAt }).where('saml_request_ids.expires_at', '<=', now),
    )
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

/**
 * The user's persistent NameID at the SP: the one on record, or a new one (`candidate()`) stored as
 * it on first use. Read first: after the first sign-in it is one read, not a write; two first
 * sign-ins at once both end with the one stored.
 */
export async function persistentNameId(
  db: Q,
  userId: number,
  entityId: string,
  candidate: () => string,
  now: number,
): Promise<string> {
  const stored = () =>
    db
      .selectFrom('saml_persistent_ids')
      .select('name_id')
      .where('user_id', '=', userId)
      .where('entity_id', '=', entityId)
      .executeTakeFirst();
  const known = await stored();
  if (known) return known.name_id;
  await db
    .insertInto('saml_persistent_ids')
    .values({ user_id: userId, entity_id: entityId, name_id: candidate(), created_at: now })
    .onConflict((oc) => oc.columns(['user_id', 'entity_id']).doNothing())
    .execute();
  return (await stored())!.name_id;
}

/** The user a persistent NameID at an SP stands for. */
export async function userOfPersistentNameId(db: Q, entityId: string, nameId: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('saml_persistent_ids')
    .select('user_id')
    .where('entity_id', '=', entityId)
    .where('name_id', '=', nameId)
    .executeTakeFirst();
  return row === undefined ? undefined : Number(row.user_id);
}

export type SessionSp = SamlSessionSpsTable;

/** Notes (or renews) that an SP received an assertion in a session. */
export async function recordSessionSp(db: Q, row: SessionSp): Promise<void> {
  await db
    .insertInto('saml_session_sps')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['session_uid', 'entity_id']).doUpdateSet({
        user_id: row.user_id,
        name_id: row.name_id,
        name_id_format: row.name_id_format,
        session_index: row.session_index,
        created_at: row.created_at,
        expires_at: row.expires_at,
      }),
    )
    .execute();
}

export async function listSessionSps(db: Q, sessionUid: string, now: number): Promise<SessionSp[]> {
  const rows = await db
    .selectFrom('saml_session_sps')
    .selectAll()
    .where('session_uid', '=', sessionUid)
    .where('expires_at', '>', now)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => ({
    ...r,
    user_id: Number(r.user_id),
    created_at: Number(r.created_at),
    expires_at: Number(r.expires_at),
  }));
}

/** The session an SP's NameID and SessionIndex belong to (a LogoutRequest names them, not the session). */
export async function findSessionSp(
  db: Q,
  entityId: string,
  sessionIndex: string,
  now: number,
): Promise<SessionSp | undefined> {
  const row = await db
    .selectFrom('saml_session_sps')
    .selectAll()
    .where('entity_id', '=', entityId)
    .where('session_index', '=', sessionIndex)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return (
    row && {
      ...row,
      user_id: Number(row.user_id),
      created_at: Number(row.created_at),
      expires_at: Number(row.expires_at),
    }
  );
}

export async function deleteSessionSps(db: Q, sessionUid: string): Promise<void> {
  await db.deleteFrom('saml_session_sps').where('session_uid', '=', sessionUid).execute();
}

/** Forgets which sessions an SP received assertions in (the SP disabled or removed); returns how many. */
export async function deleteSessionSpsOfEntity(db: Q, entityId: string): Promise<number> {
  const r = await db.deleteFrom('saml_session_sps').where('entity_id', '=', entityId).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Forgets the SAML sign-ins of every session of a user, by the user's sub (their sessions ended). */
export async function deleteSessionSpsOfAccount(db: Q, sub: string): Promise<number> {
  const r = await db
    .deleteFrom('saml_session_sps')
    .where('user_id', 'in', (eb) => eb.selectFrom('users').select('users.id').where('users.sub', '=', sub))
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Deletes every user's persistent NameID at an SP (the SP removed); returns how many. */
export async function deletePersistentIdsOfEntity(db: Q, entityId: string): Promise<number> {
  const r = await db.deleteFrom('saml_persistent_ids').where('entity_id', '=', entityId).executeTakeFirst();
  return Number(r.numDeletedRows);
}

export async function deleteExpiredSamlRows(db: Q, now: number): Promise<void> {
  await db.deleteFrom('saml_request_ids').where('expires_at', '<=', now).execute();
  await db.deleteFrom('saml_session_sps').where('expires_at', '<=', now).execute();
}
