// Profile photos: resized image bytes addressed by a public handle.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, PhotosTable } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;
export type PhotoRow = Selectable<PhotosTable>;

export function findPhoto(db: Q, handle: string): Promise<PhotoRow | undefined> {
  return db.selectFrom('photos').selectAll().where('handle', '=', handle).executeTakeFirst();
}

export async function insertPhoto(db: Q, photo: PhotoRow): Promise<void> {
  await db.insertInto('photos').values(photo).execute();
}

/** Deletes the user's photos other than `keep` (null deletes all); returns how many went. */
export async function deletePhotosOfUser(db: Q, userId: number, keep: string | null): Promise<number> {
  let q = db.deleteFrom('photos').where('user_id', '=', userId);
  if (keep !== null) q = q.where('handle', '!=', keep);
  const r = await q.executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** Points the user at a photo handle (or none); false when the user does not exist. */
export async function setUserPhotoHandle(db: Q, userId: number, handle: string | null, now: number): Promise<boolean> {
  const r = await db
    .updateTable('users')
    .set({ photo_handle: handle, updated_at: now })
    .where('id', '=', userId)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}
