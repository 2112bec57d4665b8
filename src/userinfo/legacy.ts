// GET /userinfo: the deprecated legacy userinfo, replaced by /openid/userinfo. Same tokens and
// same release rules; the older { user, audience } shape.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { listUserIds } from '../store/directory.ts';
import { countLegacyCall, markDeprecated } from '../http/deprecation.ts';
import { words } from '../vocabulary.ts';
import { legacyUser, needsSecondaryIds, releasedGroups, type LegacyUser } from './claims.ts';
import { resolveUserToken, type TokenDeps, type UserToken } from './tokens.ts';

export interface LegacyUserinfo {
  user: LegacyUser;
  /** the client the token was issued to; a relying party must check it is its own id */
  audience: string;
}

export const LEGACY_PATH = '/userinfo';
export const REPLACEMENT_PATH = '/openid/userinfo';

export function legacyUserinfoHandler(deps: TokenDeps) {
  const signalDeprecation = (reply: FastifyReply) => markDeprecated(reply, deps.config, REPLACEMENT_PATH);

  const authenticate = (request: FastifyRequest) => resolveUserToken(deps, request);

  const release = async (token: UserToken): Promise<LegacyUserinfo> => {
    const groups = releasedGroups(words(token.client.groups), token.scopes);
    const secondary = needsSecondaryIds(groups) ? await listUserIds(deps.store.db, token.user.id) : [];
    return { user: legacyUser(deps.config, token.user, secondary, groups), audience: token.clientId };
  };

  return async function legacyUserinfo(request: FastifyRequest, reply: FastifyReply) {
    // Every answer, errors included, tells the caller the endpoint is going away.
    signalDeprecation(reply);
    let clientId: string | undefined;
    try {
      const token = await authenticate(request);
      clientId = token.clientId;
      const body = await release(token);
      return reply.type('application/json; charset=utf-8').send(body);
    } finally {
      countLegacyCall(request, 'userinfo', clientId);
    }
  };
}
