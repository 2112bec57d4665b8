// The userinfo feature: legacy GET /userinfo and the photo fetch. /openid/userinfo itself is
// served by oidc-provider with the account view of accounts.ts.
import type { FastifyInstance } from 'fastify';
import { methodNotAllowed } from '../http/errors.ts';
import { LEGACY_PATH, legacyUserinfoHandler } from './legacy.ts';
import { photoHandler } from './photos.ts';
import type { TokenDeps } from './tokens.ts';

export { userinfoAccounts } from './accounts.ts';

export const PHOTO_PATH = '/userinfo/v1/user/media/:handle';

export function userinfoPlugin(deps: TokenDeps) {
  return async function userinfo(app: FastifyInstance) {
    app.get(LEGACY_PATH, legacyUserinfoHandler(deps));
    methodNotAllowed(app, LEGACY_PATH, ['GET']);
    app.get(PHOTO_PATH, photoHandler(deps));
    methodNotAllowed(app, PHOTO_PATH, ['GET']);
  };
}
