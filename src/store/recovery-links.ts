// One-time recovery links (src/webauthn/recovery-links.ts): only the hash of the secret is kept.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { DB, RecoveryLinksTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type RecoveryLinkRow = Selectable<RecoveryLinksTable>;

export async function insertRecoveryLink(db: Q, row: Insertable<RecoveryLinksTable>): Promise<number> {
  const inserted = await db.insertInto('recovery_links').values(row).returning('id').executeTakeFirstOrThrow();
  return Number(inserted.id);
}

export function findRecoveryLinkByHash(db: Q, tokenHash: string): Promise<RecoveryLinkRow | undefined> {
  return db.selectFrom('recovery_links').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

export function findRecoveryLink(db: Q, id: number): Promise<RecoveryLinkRow | undefined> {
  return db.selectFrom('recovery_links').selectAll().where('id', '=', id).executeTakeFirst();
}

/** A user's links, newest first; with orgId, every link of the organization. */
export function listRecoveryLinks(db: Q, filter: { userId?: number; orgId?: number }) {
  let query = db
    .selectFrom('recovery_links')
    .innerJoin('users', 'users.id', 'recovery_links.user_id')
    .select([
      'recovery_links.id',
      'users.eppn',
      'recovery_links.org_id',
      'recovery_links.created_at',
      'recovery_links.expires_at',
      'recovery_links.used_at',
      'recovery_links.revoked_at',
      'recovery_links.created_by',
      'recovery_links.delete_others',
    ])
    .orderBy('recovery_links.id', 'desc');
  if (filter.userId !== undefined) query = query.where('recovery_links.user_id', '=', filter.userId);
  if (filter.orgId !== undefined) query = query.where('recovery_links.org_id', '=', filter.orgId);
  return query.execute();
}

/**
 * Uses the link up, only while it is still usable: of concurrent attempts exactly one changes the
 * row and gets true.
 */
export async function claimRecoveryLink(db: Q, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('recovery_links')
    .set({ used_at: now })
    .where('id', '=', id)
    .where('used_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Revokes a link not yet used; false when there is none such. */
export async function revokeRecoveryLink(db: Q, id: number, now: number): Promise<boolean> {
  const r = await db
    .updateTable('recovery_links')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('used_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Revokes every link of the user not yet used or revoked; how many. */
export async function revokeUserRecoveryLinks(db: Q, userId: number, now: number): Promise<number> {
  const r = await db
    .updateTable('recovery_links')
    .set({ revoked_at: now })
    .where('user_id', '=', userId)
    .where('used_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}

/**
 * Revokes the user's links made by `createdBy` (e.g. `system:self-recovery`) that are not yet used
 * or revoked, except `keep`; their ids.
 */
export async function revokeUserLinksMadeBy(
  db: Q,
  userId: number,
  createdBy: string,
  keep: number,
  now: number,
): Promise<number[]> {
  const rows = await db
    .updateTable('recovery_links')
    .set({ revoked_at: now })
    .where('user_id', '=', userId)
    .where('created_by', '=', createdBy)
    .where('id', '<>', keep)
    .where('used_at', 'is', null)
    .where('revoked_at', 'is', null)
    .returning('id')
    .execute();
  return rows.map((r) => Number(r.id)).sort((a, b) => a - b);
}
