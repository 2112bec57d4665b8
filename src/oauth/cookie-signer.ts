// oidc-provider's signed cookies (the `.sig` cookie beside each one) are signed exactly as Keygrip,
// which the cookies library uses for an array of keys, signs them: HMAC-SHA1 of `name=value`,
// base64url without padding, with the first key; any key verifies, so a previous IDP_SECRET's
// cookies stay valid during a rollover. Verifying here is one HMAC per key compared with
// crypto.timingSafeEqual: Keygrip compares through tsscmp, which draws a random key and computes two
// more HMACs for every comparison, and the sign-in pages read several signed cookies per request.
// The cookies library and koa take any object with these three methods in place of a Keygrip.
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface CookieSigner {
  sign(data: string): string;
  verify(data: string, digest: string): boolean;
  /** which key made the digest, or -1 */
  index(data: string, digest: string): number;
}

export function cookieSigner(keys: readonly string[]): CookieSigner {
  if (keys.length === 0) throw new Error('a cookie signer needs a key');
  const digest = (data: string, key: string) => createHmac('sha1', key).update(data).digest('base64url');
  const index = (data: string, given: string) => {
    const received = Buffer.from(String(given));
    for (let i = 0; i < keys.length; i++) {
      const expected = Buffer.from(digest(data, keys[i]!));
      if (expected.length === received.length && timingSafeEqual(expected, received)) return i;
    }
    return -1;
  };
  return {
    sign: (data) => digest(data, keys[0]!),
    verify: (data, given) => index(data, given) > -1,
    index,
  };
}
