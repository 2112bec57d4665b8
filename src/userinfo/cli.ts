// Admin commands for profile photos: `user set-photo` and `user remove-photo`.
import { readFileSync, statSync } from 'node:fs';
import type { Command } from '../cli/index.ts';
import { AppError, badRequest } from '../errors.ts';
import { PHOTO_LIMITS, removePhotoByEppn, setPhotoByEppn } from './photos.ts';

function option(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw badRequest(`--${name} is required`);
  return v;
}

function readImage(path: string): Buffer {
  try {
    // Checked before reading, so a huge file is refused without loading it.
    const stat = statSync(path);
    if (!stat.isFile()) throw badRequest(`${path}: not a regular file`);
    if (stat.size > PHOTO_LIMITS.maxBytes) throw badRequest(`${path}: the file is larger than ${PHOTO_LIMITS.maxBytes / 1024 / 1024} MiB`);
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw badRequest(`${path}: no such file`);
    if (code === 'EACCES') throw badRequest(`${path}: permission denied`);
    throw err;
  }
}

export const setPhotoCommand: Command = {
  usage: 'user set-photo --eppn <eppn> --file <image>   (JPEG, PNG, WebP, GIF or AVIF; stored as a 128 px JPEG)',
  options: { eppn: { type: 'string' }, file: { type: 'string' } },
  async run(ctx, v) {
    const eppn = option(v, 'eppn');
    const path = option(v, 'file');
    const image = readImage(path);
    let stored;
    try {
      stored = await setPhotoByEppn(ctx.store, eppn, image);
    } catch (err) {
      // Name the file in image errors, so the operator knows which of several uploads failed.
      if (err instanceof AppError && err.status === 400) throw badRequest(`${path}: ${err.message}`);
      throw err;
    }
    const view = { eppn: stored.eppn, handle: stored.handle, width: stored.width, height: stored.height, replaced: stored.replaced };
    return ctx.json ? view : `photo of ${stored.eppn} set: ${stored.handle} (${stored.width} x ${stored.height})${stored.replaced ? `, replacing ${stored.replaced}` : ''}`;
  },
};

export const removePhotoCommand: Command = {
  usage: 'user remove-photo --eppn <eppn>',
  options: { eppn: { type: 'string' } },
  async run(ctx, v) {
    const result = await removePhotoByEppn(ctx.store, option(v, 'eppn'));
    return ctx.json ? result : result.removed ? `photo of ${result.eppn} removed (${result.removed})` : `${result.eppn} had no photo`;
  },
};
