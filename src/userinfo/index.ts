// The userinfo feature: the short path of GET /openid/userinfo (openid-userinfo.ts; oidc-provider
// serves the rest with the account view of provider-account.ts), legacy GET /userinfo and the photo fetch.
import type { FastifyInstance } from 'fastify';
import { methodNotAllowed } from '../http/errors.ts';
import { providerHandler } from '../oauth/plugin.ts';
import { ROUTES } from '../oauth/provider.ts';
import { oidcUserinfoHandler } from './openid-userinfo.ts';
import { LEGACY_PATH, legacyUserinfoHandler } from './legacy.ts';
import { photoHandler } from './photo-fetch.ts';
import type { TokenDeps } from './tokens.ts';
import { legacyUserinfoSchema, oidcUserinfoSchema, photoSchema } from './schemas.ts';

export { userinfoAccounts } from './provider-account.ts';

export const PHOTO_PATH = '/userinfo/v1/user/media/:handle';

export type UserinfoPluginDeps = TokenDeps;

export function userinfoPlugin(deps: UserinfoPluginDeps) {
  return async function userinfo(app: FastifyInstance) {
    // Only GET takes the short path; HEAD, POST and OPTIONS stay with oidc-provider.
    app.get(
      ROUTES.userinfo,
      { exposeHeadRoute: false, schema: oidcUserinfoSchema },
      oidcUserinfoHandler({ ...deps, delegate: providerHandler(deps.provider, deps.config) }),
    );
    app.get(LEGACY_PATH, { schema: legacyUserinfoSchema }, legacyUserinfoHandler(deps));
    methodNotAllowed(app, LEGACY_PATH, ['GET']);
    app.get(PHOTO_PATH, { schema: photoSchema }, photoHandler(deps));
    methodNotAllowed(app, PHOTO_PATH, ['GET']);
  };
}
