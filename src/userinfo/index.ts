// The userinfo feature: the short path of GET /openid/userinfo (openid-userinfo.ts; oidc-provider
// serves the rest with the account view of provider-account.ts), legacy GET /userinfo and the photo fetch.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { methodNotAllowed } from '../http/errors.ts';
import { providerHandler } from '../oauth/plugin.ts';
import { ROUTES } from '../oauth/provider.ts';
import { oidcUserinfoHandler } from './openid-userinfo.ts';
import { LEGACY_PATH, legacyUserinfoHandler } from './legacy.ts';
import { photoHandler } from './photo-fetch.ts';
import type { TokenDeps } from './tokens.ts';
import { hiddenSchema, legacyUserinfoSchema, oidcUserinfoSchema, photoSchema } from './schemas.ts';
import { preflight } from './browser-access.ts';
import { EXTENDED_PATH, LOOKUP_PATH, extendedUserinfoHandler, lookupHandler } from './directory-api.ts';
import { GROUPS_PATH, groupsHandlers } from './groups-api.ts';
import type { UserBoundDeps } from './user-bound.ts';
import {
  extendedUserinfoSchema,
  groupMembersSchema,
  groupSchema,
  groupTypesSchema,
  lookupSchema,
  myGroupsSchema,
  myMembershipSchema,
} from './directory-schemas.ts';

export { userinfoAccounts } from './provider-account.ts';

export const PHOTO_PATH = '/userinfo/v1/user/media/:handle';

export type UserinfoPluginDeps = TokenDeps & UserBoundDeps;

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
    directoryRoutes(app, deps);
  };
}

/** The extended userinfo, the user lookup and the groups API (docs/userinfo.md). */
function directoryRoutes(app: FastifyInstance, deps: UserBoundDeps) {
  const groups = groupsHandlers(deps);
  const routes = [
    [EXTENDED_PATH, extendedUserinfoSchema, extendedUserinfoHandler(deps)],
    [`${LOOKUP_PATH}/:id`, lookupSchema, lookupHandler(deps)],
    [`${GROUPS_PATH}/me/groups`, myGroupsSchema, groups.myGroups],
    [`${GROUPS_PATH}/me/groups/:id`, myMembershipSchema, groups.myMembership],
    [`${GROUPS_PATH}/groups/:id`, groupSchema, groups.groupDetails],
    [`${GROUPS_PATH}/groups/:id/members`, groupMembersSchema, groups.groupMembers],
    [`${GROUPS_PATH}/grouptypes`, groupTypesSchema, groups.types],
  ] as const;
  for (const [url, schema, handler] of routes) {
    app.get(url, { schema }, handler as (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>);
    // browsers may call the user's endpoints; the lookup is for servers only
    const browsers = url !== `${LOOKUP_PATH}/:id`;
    if (browsers) app.options(url, { schema: hiddenSchema }, preflight);
    methodNotAllowed(app, url, browsers ? ['GET', 'OPTIONS'] : ['GET']);
  }
}
