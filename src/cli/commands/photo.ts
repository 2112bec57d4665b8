// `user set-photo` and `user remove-photo`: profile photos.
import { readFileSync, statSync } from 'node:fs';
import { AppError, badRequest } from '../../errors.ts';
import { PHOTO_LIMITS, removePhotoByEppn, setPhotoByEppn } from '../../directory/photos.ts';
import { by, required, type CommandDef } from '../command.ts';

function readImage(path: string): Buffer {
  try {
    // Checked before reading, so a huge file is refused without loading it.
    const stat = statSync(path);
    if (!stat.isFile()) throw badRequest(`${path}: not a regular file`);
    if (stat.size > PHOTO_LIMITS.maxBytes)
      throw badRequest(`${path}: the file is larger than ${PHOTO_LIMITS.maxBytes / 1024 / 1024} MiB`);
    return readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw badRequest(`${path}: no such file`);
    if (code === 'EACCES') throw badRequest(`${path}: permission denied`);
    throw err;
  }
}

const EPPN = {
  type: 'string',
  value: '<eppn>',
  required: true,
  description: 'the user (eduPersonPrincipalName)',
} as const;

export const photoCommands: CommandDef[] = [
  {
    group: 'user',
    name: 'set-photo',
    summary: 'set a profile photo (JPEG, PNG, WebP, GIF or AVIF; stored as a 128 px JPEG)',
    options: { eppn: EPPN, file: { type: 'string', value: '<image>', required: true, description: 'image file' } },
    async run(ctx, v) {
      const eppn = required(v, 'eppn');
      const path = required(v, 'file');
      const image = readImage(path);
      let stored;
      try {
        stored = await setPhotoByEppn(ctx.store, eppn, image, by(ctx));
      } catch (err) {
        // Name the file in image errors, so the operator knows which of several uploads failed.
        if (err instanceof AppError && err.status === 400) throw badRequest(`${path}: ${err.message}`);
        throw err;
      }
      const view = {
        eppn: stored.eppn,
        handle: stored.handle,
        width: stored.width,
        height: stored.height,
        replaced: stored.replaced,
      };
      return ctx.json
        ? view
        : `photo of ${stored.eppn} set: ${stored.handle} (${stored.width} x ${stored.height})${stored.replaced ? `, replacing ${stored.replaced}` : ''}`;
    },
  },
  {
    group: 'user',
    name: 'remove-photo',
    summary: 'remove a profile photo',
    options: { eppn: EPPN },
    async run(ctx, v) {
      const result = await removePhotoByEppn(ctx.store, required(v, 'eppn'), by(ctx));
      return ctx.json
        ? result
        : result.removed
          ? `photo of ${result.eppn} removed (${result.removed})`
          : `${result.eppn} had no photo`;
    },
  },
];
