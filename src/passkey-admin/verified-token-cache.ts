// Remembers recently verified access tokens, so an administrator walking a large organization
// (or a helpdesk tool polling) pays for one ECDSA verification per token, not one per request.
// Safe because the API's tokens are self-contained JWTs without revocation: a token that verified
// once keeps verifying until it expires (retired signing keys stay published that long).
import { LRUCache } from 'lru-cache';
import type { AccessToken, TokenVerifier } from '../http/bearer.ts';

export function cachingVerifier(inner: TokenVerifier, now: () => number = Date.now, capacity = 1000): TokenVerifier {
  const verified = new LRUCache<string, AccessToken>({ max: capacity });
  return {
    issuer: inner.issuer,
    ...(inner.dpop ? { dpop: inner.dpop } : {}),
    async verify(token, audience) {
      // The audience is part of the key: a token verified for one API is not thereby good for another.
      const key = `${audience} ${token}`;
      const hit = verified.get(key);
      if (hit && hit.exp * 1000 > now()) return hit;
      if (hit) verified.delete(key);
      const result = await inner.verify(token, audience);
      verified.set(key, result);
      return result;
    },
  };
}
