// User-existence checks: the deprecated GET /check_single/<username@domain> and its successors
// GET /userinfo/v1/exists/<userid_sec> and GET /userinfo/v1/exists-by-mail/<realm>/<mail>.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { forbidden } from '../errors.ts';
import {
  authenticate,
  requireScopes,
  tokenNoLongerValid,
  type AccessToken,
  type TokenVerifier,
} from '../http/bearer.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { rateLimit } from '../http/rate-limit.ts';
import { countLegacyCall, markDeprecated } from '../http/deprecation.ts';
import { findClient, listGrantedOrganizations } from '../store/clients.ts';
import * as repo from '../store/checkuser.ts';
import { knownNamespaces, parseEppn, parseMailLookup, parseUseridSec, type Lookup } from './identifiers.ts';
import { existsRouteSchema, legacyRouteSchema, mailRouteSchema, hiddenSchema } from './schemas.ts';

export interface CheckuserDeps {
  config: Config;
  store: Store;
  verifier: TokenVerifier;
  now?: () => number;
}

export const EXISTS_PATH = '/userinfo/v1/exists';
export const CURRENT_SCOPES = ['system-check-user-existence'];
export const LEGACY_SCOPES = ['gk_checkuser', 'gk_checkuser_systemlookup'];
export const NOT_AUTHORIZED = 'Client not authorized for organization';
const WINDOW_MS = 60_000;

/** A verified token of a client that is still enabled (a disabled client's tokens stop at once). */
async function authenticateEnabled(
  deps: CheckuserDeps,
  request: FastifyRequest,
  audience: string,
): Promise<AccessToken> {
  const token = await authenticate(request, deps.verifier, audience);
  const client = await findClient(deps.store.db, token.clientId);
  if (!client || client.disabled_at !== null)
    throw tokenNoLongerValid(request, deps.verifier, 'The client of this token is disabled or removed');
  return token;
}

export function checkuserPlugin(deps: CheckuserDeps) {
  const { config, store } = deps;
  const audience = `${config.publicUrl}${EXISTS_PATH}`;
  const limiter = rateLimit(store, 'checkuser', config.checkuserRateLimit, WINDOW_MS, deps.now);

  const authenticateClient = (request: FastifyRequest) => authenticateEnabled(deps, request, audience);

  /**
   * The organizations a lookup may search. With a realm (eppn, mail) it is the realm's organization,
   * decided from the identifier alone; ids without a realm (nin, secondary ids) search every
   * organization the client is configured for. Never depends on whether the user exists.
   */
  async function organizationsToSearch(clientId: string, lookup: Lookup): Promise<number[]> {
    if (lookup.kind === 'eppn' || lookup.kind === 'mail') {
      const orgId = await repo.checkableOrganizationByRealm(store.db, clientId, lookup.realm);
      if (orgId === undefined) throw forbidden(NOT_AUTHORIZED);
      return [orgId];
    }
    const orgIds = await listGrantedOrganizations(store.db, clientId, 'checkuser');
    if (orgIds.length === 0) throw forbidden(NOT_AUTHORIZED);
    return orgIds;
  }

  function exists(orgIds: number[], lookup: Lookup): Promise<boolean> {
    switch (lookup.kind) {
      case 'eppn':
        return repo.eppnExists(store.db, orgIds, lookup.eppn);
      case 'mail':
        return repo.emailExists(store.db, orgIds, lookup.mail);
      case 'nin':
        return repo.ninExists(store.db, orgIds, lookup.nin);
      case 'secondary':
        return repo.namespacedIdExists(store.db, orgIds, lookup.namespace, lookup.identifier);
    }
  }

  async function respond(clientId: string, lookup: Lookup): Promise<{ exists: boolean }> {
    const orgIds = await organizationsToSearch(clientId, lookup);
    return { exists: await exists(orgIds, lookup) };
  }

  type Params = { Params: Record<string, string | undefined> };

  async function checkSingle(request: FastifyRequest<Params>, reply: FastifyReply) {
    markDeprecated(reply, config, EXISTS_PATH);
    const token = await authenticateClient(request);
    countLegacyCall(request, 'check_single', token.clientId);
    requireScopes(token, LEGACY_SCOPES);
    await limiter.consume(token.clientId);
    return respond(token.clientId, parseEppn(request.params.username));
  }

  async function existsByUseridSec(request: FastifyRequest<Params>) {
    const token = await authenticateClient(request);
    requireScopes(token, CURRENT_SCOPES);
    await limiter.consume(token.clientId);
    return respond(token.clientId, parseUseridSec(request.params.userid_sec, config.idpNamespace));
  }

  async function existsByMail(request: FastifyRequest<Params>) {
    const token = await authenticateClient(request);
    requireScopes(token, CURRENT_SCOPES);
    await limiter.consume(token.clientId);
    return respond(token.clientId, parseMailLookup(request.params.realm, request.params.mail));
  }

  const namespaces = knownNamespaces(config.idpNamespace);

  return async function checkuser(app: FastifyInstance) {
    app.get<Params>('/check_single/:username', { schema: legacyRouteSchema }, checkSingle);
    app.get<Params>(`${EXISTS_PATH}/:userid_sec`, { schema: existsRouteSchema(namespaces) }, existsByUseridSec);
    app.get<Params>(`${EXISTS_PATH}-by-mail/:realm/:mail`, { schema: mailRouteSchema }, existsByMail);
    // Paths with the identifier left out answer 400 (not 404) through the same pipeline.
    app.get<Params>('/check_single', { schema: hiddenSchema }, checkSingle);
    app.get<Params>(EXISTS_PATH, { schema: hiddenSchema }, existsByUseridSec);
    app.get<Params>(`${EXISTS_PATH}-by-mail`, { schema: hiddenSchema }, existsByMail);
    app.get<Params>(`${EXISTS_PATH}-by-mail/:realm`, { schema: hiddenSchema }, existsByMail);
    for (const url of [
      '/check_single/:username',
      `${EXISTS_PATH}/:userid_sec`,
      `${EXISTS_PATH}-by-mail/:realm/:mail`,
      '/check_single',
      EXISTS_PATH,
      `${EXISTS_PATH}-by-mail`,
      `${EXISTS_PATH}-by-mail/:realm`,
    ]) {
      // the legacy path signals its deprecation on every answer, refusals included
      methodNotAllowed(
        app,
        url,
        ['GET'],
        url.startsWith('/check_single') ? (reply) => markDeprecated(reply, config, EXISTS_PATH) : undefined,
      );
    }
  };
}
