// GET /userinfo/v1/user/media/<handle>: the legacy photo fetch, with ETag revalidation.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { bytes as asBuffer } from '../store/index.ts';
import * as photos from '../store/photos.ts';
import { HANDLE } from '../directory/photos.ts';
import { words } from '../vocabulary.ts';
import { badRequest, notFound } from '../errors.ts';
import { insufficientScope, resolveUserToken, type TokenDeps, type UserToken } from './tokens.ts';

// A handle never changes content (a new photo gets a new handle), but a removed photo must stop
// being shown, so caches keep it an hour and revalidate with the ETag after that.
const CACHE_CONTROL = 'private, max-age=3600';

function matchesEtag(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === `"${etag}"`);
}

/** RFC 9110 13.2.2: If-None-Match wins; If-Modified-Since only counts without it. */
function notModified(request: FastifyRequest, etag: string, updatedAt: number): boolean {
  const inm = request.headers['if-none-match'];
  if (typeof inm === 'string') return matchesEtag(inm, etag);
  const ims = request.headers['if-modified-since'];
  if (typeof ims !== 'string') return false;
  const since = Date.parse(ims);
  return !Number.isNaN(since) && Math.floor(updatedAt / 1000) <= Math.floor(since / 1000);
}

export function photoHandler(deps: TokenDeps) {
  const authenticate = (request: FastifyRequest) => resolveUserToken(deps, request);

  const requirePhotoGroup = (token: UserToken) => {
    if (!words(token.client.groups).includes('userinfo-photo')) {
      throw insufficientScope(deps.config, 'Client is not authorized for the userinfo-photo attribute group');
    }
  };

  const parseHandle = (raw: string): string => {
    const handle = raw.toLowerCase();
    if (!HANDLE.test(handle)) throw badRequest("Invalid photo handle: expected 'p:' followed by a UUID");
    return handle;
  };

  const loadPhoto = async (handle: string) => {
    const photo = await photos.findPhoto(deps.store.db, handle);
    if (!photo) throw notFound('Photo does not exist');
    return photo;
  };

  return async function fetchPhoto(request: FastifyRequest<{ Params: { handle: string } }>, reply: FastifyReply) {
    requirePhotoGroup(await authenticate(request));
    const photo = await loadPhoto(parseHandle(request.params.handle));
    reply.header('etag', `"${photo.etag}"`);
    reply.header('last-modified', new Date(photo.updated_at).toUTCString());
    reply.header('cache-control', CACHE_CONTROL);
    if (notModified(request, photo.etag, photo.updated_at)) return reply.code(304).send();
    return reply.type('image/jpeg').send(asBuffer(photo.bytes));
  };
}
