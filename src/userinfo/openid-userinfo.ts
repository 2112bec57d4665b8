// GET /openid/userinfo for the common request: a plain bearer token in the Authorization header,
// no Origin, no DPoP, no parameters, a client without signed userinfo. oidc-provider's Koa
// pipeline costs several times what the answer itself does, so this path answers such requests
// with the provider's own models and the same checks as its userinfo action
// (lib/actions/userinfo.js, lib/shared/access_token.js). Everything else, and every failure,
// goes to oidc-provider unchanged, so error answers, CORS, DPoP, signed userinfo and the claims
// parameter are exactly the provider's.
//
// Measured (bench/userinfo.ts): the provider's pipeline, then this path, then this path with the
// claims reused per token each cut the cost per request about in half.
//
// The claims computed for a token are kept until something they depend on changes: the token, its
// grant, the user, their organization or the client. Each such change publishes an invalidation in its transaction
// (src/store/invalidation.ts) that drops the entry at once here and within a fraction of a second
// on every other instance, so a kept answer is served without asking the database. An entry also
// ends with the token's expiry, and after USERINFO_CACHE_TTL at the latest (a safety net).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { LRUCache } from 'lru-cache';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { parseBearer } from '../http/bearer.ts';
import { findReleaseSubject } from '../store/userinfo.ts';
import type { Invalidation, Topic } from '../store/invalidation.ts';
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
  /** epoch ms: the token's expiry, or the end of the cache time if sooner */
  until: number;
  /** what the answer depends on, as invalidation index keys */
  dependsOn: string[];
}

const indexKey = (topic: Topic, key: string) => `${topic}\u0000${key}`;

/** Answers kept per token value, found again by what they depend on when that changes. Each
 * entry also carries its end as the cache's time to live, and the ended ones are dropped at most a
 * cache time after they end: what is kept follows the rate of new tokens over USERINFO_CACHE_TTL,
 * instead of filling up to the bound over hours with answers no one may read any more. */
export function answerCache(purgeEveryMs: number) {
  const byDependency = new Map<string, Set<string>>();
  let purgedAt = Date.now();
  const cache = new LRUCache<string, Answer>({
    max: CACHE_ENTRIES,
    // on eviction, replacement and deletion alike
    dispose: (answer, token) => {
      for (const dependency of answer.dependsOn) {
        const tokens = byDependency.get(dependency);
        tokens?.delete(token);
        if (tokens?.size === 0) byDependency.delete(dependency);
      }
    },
  });
  return {
    get: (token: string) => cache.get(token),
    /** how many answers, and how many things they depend on, are kept */
    size: () => ({ answers: cache.size, dependencies: byDependency.size }),
    delete: (token: string) => void cache.delete(token),
    set(token: string, answer: Answer, now: number) {
      // no timer: the next answer kept after a cache time sweeps the ended ones
      if (now - purgedAt >= purgeEveryMs) {
        purgedAt = now;
        cache.purgeStale();
      }
      cache.set(token, answer, { ttl: Math.max(1, answer.until - now) });
      for (const dependency of answer.dependsOn) {
        let tokens = byDependency.get(dependency);
        if (!tokens) byDependency.set(dependency, (tokens = new Set()));
        tokens.add(token);
      }
    },
    invalidate(invalidation: Invalidation | null) {
      if (invalidation === null) return cache.clear();
      const tokens = byDependency.get(indexKey(invalidation.topic, invalidation.key));
      if (tokens) for (const token of [...tokens]) cache.delete(token);
    },
  };
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
  const invalidations = store.invalidations;
  // Without invalidations nothing is kept: a change could not reach the cache.
  const ttlMs = invalidations ? config.userinfoCacheTtl * 1000 : 0;
  const cache = answerCache(ttlMs);
  if (ttlMs > 0) invalidations?.subscribe((invalidation) => cache.invalidate(invalidation));

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
    // The token's expiry; the grant's too (it has one when the provider gives grants a lifetime).
    const until = Math.min(token.exp * 1000, grant.exp ? grant.exp * 1000 : Infinity, now + ttlMs);
    const dependsOn = [
      indexKey('token', value),
      indexKey('grant', grantId),
      indexKey('user', accountId),
      indexKey('client', clientId),
      // disabling the user's organization ends what is kept for its users' tokens
      indexKey('organization', String(subject.user.org_id)),
    ];
    return { body, until, dependsOn };
  }

  async function answer(value: string): Promise<Answer | undefined> {
    const now = Date.now();
    if (ttlMs <= 0) return compute(value, now);
    const hit = cache.get(value);
    if (hit && hit.until > now) return hit;
    if (hit) cache.delete(value);
    const sequence = invalidations?.sequence;
    const fresh = await compute(value, now);
    // An invalidation that arrived meanwhile may concern what compute() read: answer, but do not keep it.
    if (fresh && invalidations?.sequence === sequence) cache.set(value, fresh, now);
    return fresh;
  }

  return async function oidcUserinfo(request: FastifyRequest, reply: FastifyReply) {
    const value = isPlainRequest(request);
    const found = value === undefined ? undefined : await answer(value);
    if (!found) return deps.delegate(request, reply);
    return reply.headers(PROVIDER_HEADERS).type('application/json; charset=utf-8').send(found.body);
  };
}
