// GET /openid/userinfo for the common request: a plain bearer token in the Authorization header,
// no Origin, no DPoP, no parameters, a client without signed userinfo. oidc-provider's Koa
// pipeline costs several times what the answer itself does, so this path answers such requests
// with the provider's own models and the same checks as its userinfo action
// (lib/actions/userinfo.js, lib/shared/access_token.js). Everything else, and every failure,
// goes to oidc-provider unchanged, so error answers, CORS, DPoP, signed userinfo and the claims
// parameter are exactly the provider's.
//
// Measured (bench/userinfo.ts): the provider's pipeline, then this path, then this path with the
// claims reused per token for USERINFO_CACHE_TTL each cut the cost per request about in half.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { LRUCache } from 'lru-cache';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { parseBearer } from '../http/bearer.ts';
import { findReleaseSubject, tokenAndGrantLive } from '../store/userinfo.ts';
import { words } from '../vocabulary.ts';
import { oidcClaims, releasedGroups } from './claims.ts';

export interface OidcUserinfoDeps {
  config: Config;
  store: Store;
  provider: ProviderHolder;
  /** hands the request to oidc-provider */
  delegate(request: FastifyRequest, reply: FastifyReply): void;
}

// Bounds the memory of the claims cache; the least recently used entry goes first.
const CACHE_ENTRIES = 10_000;

interface Answer {
  /** the claims, serialized once */
  body: string;
  grantId: string;
  /** epoch ms: the token's expiry, or the end of the cache time if sooner */
  until: number;
}

/** The headers oidc-provider sends on a userinfo answer to a request without Origin. */
const PROVIDER_HEADERS = {
  'cache-control': 'no-store',
  vary: 'Origin',
  'access-control-allow-origin': '*',
  // DPoP nonces are issued (src/oauth/provider.ts), so browsers may read DPoP-Nonce as well
  'access-control-expose-headers': 'DPoP-Nonce,WWW-Authenticate',
};

function isPlainRequest(request: FastifyRequest): string | undefined {
  const h = request.headers;
  if (h.origin !== undefined || h.dpop !== undefined) return undefined;
  if (
    h['content-type'] !== undefined ||
    h['transfer-encoding'] !== undefined ||
    (h['content-length'] !== undefined && h['content-length'] !== '0')
  )
    return undefined;
  if (request.url.includes('?')) return undefined;
  // Exactly `Bearer <token>`: any other spelling is left to the provider's own parsing.
  const bearer = parseBearer(h.authorization);
  return bearer.kind === 'token' && h.authorization!.length === bearer.token.length + 7 ? bearer.token : undefined;
}

export function oidcUserinfoHandler(deps: OidcUserinfoDeps) {
  const { config, store } = deps;
  const ttlMs = config.userinfoCacheTtl * 1000;
  const cache = new LRUCache<string, Answer>({ max: CACHE_ENTRIES });

  /** The claims to answer with, or undefined when the provider must answer instead. */
  async function compute(value: string, now: number): Promise<Answer | undefined> {
    const provider = deps.provider.current();
    const token = await provider.AccessToken.find(value);
    if (!token || token.isExpired || !token.scopes.has('openid')) return undefined;
    if (token['x5t#S256'] || token.jkt || token.aud !== undefined || token.claims) return undefined;
    const { clientId, accountId, grantId } = token;
    if (!clientId || !accountId || !grantId || !token.exp) return undefined;

    const [grant, subject] = await Promise.all([
      provider.Grant.find(grantId, { ignoreExpiration: true }),
      findReleaseSubject(store.db, accountId, clientId),
    ]);
    if (!subject?.client || subject.client.userinfo_signed_response_alg) return undefined;
    if (!grant || grant.isExpired || grant.clientId !== clientId || grant.accountId !== accountId) return undefined;
    if (grant.getRejectedOIDCClaims().length) return undefined;

    const scope = grant.getOIDCScopeFiltered(new Set(words(token.scope)));
    const groups = releasedGroups(words(subject.client.groups), words(scope));
    const body = JSON.stringify(oidcClaims(config, subject.user, subject.secondary, groups));
    return { body, grantId, until: Math.min(token.exp * 1000, now + ttlMs) };
  }

  /**
   * A cached answer still needs its token and grant in the database, unexpired: revocation and
   * logout act at once, on every instance. Only the claims (groups, profile) may be ttl old.
   */
  async function cached(value: string, now: number): Promise<Answer | undefined> {
    const hit = cache.get(value);
    if (!hit) return undefined;
    if (hit.until <= now || !(await tokenAndGrantLive(store.db, value, hit.grantId, now))) {
      cache.delete(value);
      return undefined;
    }
    return hit;
  }

  async function answer(value: string): Promise<Answer | undefined> {
    const now = Date.now();
    if (ttlMs > 0) {
      const hit = await cached(value, now);
      if (hit) return hit;
    }
    const fresh = await compute(value, now);
    if (fresh && ttlMs > 0) cache.set(value, fresh);
    return fresh;
  }

  return async function oidcUserinfo(request: FastifyRequest, reply: FastifyReply) {
    const value = isPlainRequest(request);
    const found = value === undefined ? undefined : await answer(value);
    if (!found) return deps.delegate(request, reply);
    return reply.headers(PROVIDER_HEADERS).type('application/json; charset=utf-8').send(found.body);
  };
}
