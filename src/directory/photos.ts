// Profile photos: validation, resizing and storage under an opaque handle. Used by the account
// page's upload, the CLI, and the legacy photo fetch (which reads them by handle).
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { createHash, randomUUID } from 'node:crypto';
import type { Metadata } from 'sharp';
import type { Store } from '../store/index.ts';
import { findUserByEppn, type User } from '../store/directory.ts';
import * as photos from '../store/photos.ts';
import { publish } from '../store/invalidation.ts';
import { normalizeEppn } from './index.ts';
import { badRequest, notFound } from '../errors.ts';

/** Every stored photo has this many pixels on its longest edge (contract 4.9). */
export const PHOTO_EDGE = 128;

export const PHOTO_LIMITS = {
  /** largest accepted upload */
  maxBytes: 10 * 1024 * 1024,
  /** largest accepted width x height; larger images are refused before they are decoded */
  maxPixels: 40_000_000,
} as const;

const ACCEPTED_FORMATS = new Map([
  ['jpeg', 'JPEG'],
  ['png', 'PNG'],
  ['webp', 'WebP'],
  ['gif', 'GIF'],
  ['heif', 'AVIF'],
]);
const FORMAT_LIST = [...ACCEPTED_FORMATS.values()].join(', ');

// sharp brings libvips (tens of megabytes of resident memory): loaded on the first photo, not at start.
type Sharp = (typeof import('sharp'))['default'];
let loadingSharp: Promise<Sharp> | undefined;
function sharpLibrary(): Promise<Sharp> {
  loadingSharp ??= import('sharp').then((module) => module.default);
  return loadingSharp;
}

export const HANDLE = /^p:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface ProcessedPhoto {
  bytes: Buffer;
  width: number;
  height: number;
}

/** Target size: longest edge PHOTO_EDGE, aspect kept. Smaller images are enlarged, so every photo
 * has the geometry the contract promises. */
export function targetSize(width: number, height: number): { width: number; height: number } {
  const scale = PHOTO_EDGE / Math.max(width, height);
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

/** Validates and resizes an uploaded image to a JPEG; throws a 400 with a clear message otherwise. */
export async function processPhoto(input: Buffer): Promise<ProcessedPhoto> {
  if (input.length === 0) throw badRequest('The file is empty');
  if (input.length > PHOTO_LIMITS.maxBytes)
    throw badRequest(`The file is larger than ${PHOTO_LIMITS.maxBytes / 1024 / 1024} MiB`);

  const sharp = await sharpLibrary();
  // Header only: cheap, and lets a decompression bomb be refused before any pixel is decoded.
  let meta: Metadata;
  try {
    meta = await sharp(input, { limitInputPixels: false }).metadata();
  } catch {
    throw badRequest(`The file is not an image in a supported format (${FORMAT_LIST})`);
  }
  if (!meta.format || !ACCEPTED_FORMATS.has(meta.format))
    throw badRequest(`The file is not an image in a supported format (${FORMAT_LIST})`);
  if (meta.format === 'heif' && meta.compression !== 'av1')
    throw badRequest(`The file is not an image in a supported format (${FORMAT_LIST})`);
  const { width, height } = meta;
  if (!width || !height) throw badRequest('The image has no dimensions');
  if (width * height > PHOTO_LIMITS.maxPixels) {
    throw badRequest(
      `The image is ${width} x ${height} pixels; at most ${PHOTO_LIMITS.maxPixels / 1_000_000} megapixels are accepted`,
    );
  }

  // EXIF orientations 5-8 turn the image a quarter: the displayed width is the stored height.
  const turned = (meta.orientation ?? 1) >= 5;
  const target = targetSize(turned ? height : width, turned ? width : height);
  try {
    const { data, info } = await sharp(input, { limitInputPixels: PHOTO_LIMITS.maxPixels, failOn: 'warning', pages: 1 })
      .rotate()
      .resize(target.width, target.height, { fit: 'fill' })
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: 85, mozjpeg: true })
      .toBuffer({ resolveWithObject: true });
    // Output carries no metadata (EXIF, GPS, ICC comments): sharp strips it unless asked to keep it.
    return { bytes: data, width: info.width, height: info.height };
  } catch {
    throw badRequest('The image is corrupt or truncated and cannot be decoded');
  }
}

export function etagOf(data: Buffer): string {
  return createHash('sha256').update(data).digest('base64url').slice(0, 32);
}

export interface StoredPhoto {
  handle: string;
  width: number;
  height: number;
  replaced: string | null;
}

async function userByEppn(store: Store, eppn: string): Promise<User> {
  const user = await findUserByEppn(store.db, normalizeEppn(eppn));
  if (!user) throw notFound(`user '${normalizeEppn(eppn)}' does not exist`);
  return user;
}

/** Stores a new photo for the user under a new handle; the previous photo goes in the same transaction. */
export async function setPhoto(
  store: Store,
  user: Pick<User, 'id' | 'photo_handle' | 'org_id' | 'eppn' | 'sub'>,
  input: Buffer,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<StoredPhoto> {
  const photo = await processPhoto(input);
  const handle = `p:${randomUUID()}`;
  await store.db.transaction().execute(async (trx) => {
    // The user row first: it serializes concurrent uploads for one user on PostgreSQL.
    if (!(await photos.setUserPhotoHandle(trx, user.id, handle, now))) throw notFound('user does not exist');
    await photos.deletePhotosOfUser(trx, user.id, handle);
    await photos.insertPhoto(trx, {
      handle,
      user_id: user.id,
      bytes: photo.bytes,
      etag: etagOf(photo.bytes),
      width: photo.width,
      height: photo.height,
      updated_at: now,
    });
    await publish(trx, 'user', user.sub);
    await recordAudit(trx, { action: 'user.photo_set', actor, at: now, orgId: user.org_id, eppn: user.eppn });
  });
  return { handle, width: photo.width, height: photo.height, replaced: user.photo_handle };
}

export async function setPhotoByEppn(
  store: Store,
  eppn: string,
  input: Buffer,
  change: Change = {},
): Promise<StoredPhoto & { eppn: string }> {
  const user = await userByEppn(store, eppn);
  return { eppn: user.eppn, ...(await setPhoto(store, user, input, change)) };
}

/** Removes the user's photo; returns the handle it had. */
export async function removePhoto(
  store: Store,
  user: Pick<User, 'id' | 'photo_handle' | 'org_id' | 'eppn' | 'sub'>,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<string | null> {
  await store.db.transaction().execute(async (trx) => {
    await photos.setUserPhotoHandle(trx, user.id, null, now);
    const removed = await photos.deletePhotosOfUser(trx, user.id, null);
    await publish(trx, 'user', user.sub);
    if (removed > 0)
      await recordAudit(trx, { action: 'user.photo_remove', actor, at: now, orgId: user.org_id, eppn: user.eppn });
  });
  return user.photo_handle;
}

export async function removePhotoByEppn(
  store: Store,
  eppn: string,
  change: Change = {},
): Promise<{ eppn: string; removed: string | null }> {
  const user = await userByEppn(store, eppn);
  return { eppn: user.eppn, removed: await removePhoto(store, user, change) };
}
