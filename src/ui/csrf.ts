// CSRF protection for every form and fetch: a random browser id in an HttpOnly cookie, and
// per-form tokens that are an HMAC of that id and the form's scope (an interaction, or the
// signed-in session). A page on another site can neither read the cookie nor compute the HMAC.
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type {} from '@fastify/cookie';
import { hmac, safeEqual, type Keyring } from '../crypto.ts';
import type { Config } from '../config.ts';

const BROWSER_ID = /^[A-Za-z0-9_-]{43}$/;

export interface Csrf {
  /** the token for forms of scope; sets the browser-id cookie when the browser has none */
  token(request: FastifyRequest, reply: FastifyReply, scope: string): string;
  /** true when presented is the token for scope in this browser */
  verify(request: FastifyRequest, scope: string, presented: unknown): boolean;
  /** the form field and the header that carry the token */
  field: string;
  header: string;
}

function cookieSecure(config: Config): boolean {
  return config.publicUrl.startsWith('https:');
}

export function createCsrf(config: Config, keys: Keyring): Csrf {
  const secure = cookieSecure(config);
  // __Host- pins the cookie to this origin (Secure, Path=/, no Domain) where the browser allows it.
  const cookie = secure ? '__Host-idp_browser' : 'idp_browser';
  const issued = new WeakMap<FastifyRequest, string>();

  // request.cookies comes from @fastify/cookie, registered once by the web plugin.
  const browserId = (request: FastifyRequest): string | undefined => {
    const value = issued.get(request) ?? request.cookies[cookie];
    return typeof value === 'string' && BROWSER_ID.test(value) ? value : undefined;
  };
  const mac = (id: string, scope: string, key = keys.csrf) => hmac(key, `csrf\n${id}\n${scope}`);

  return {
    field: '_csrf',
    header: 'x-csrf-token',
    token(request, reply, scope) {
      let id = browserId(request);
      if (!id) {
        id = randomBytes(32).toString('base64url');
        issued.set(request, id);
        reply.setCookie(cookie, id, { path: '/', httpOnly: true, sameSite: 'lax', secure });
      }
      return mac(id, scope);
    },
    verify(request, scope, presented) {
      const id = browserId(request);
      if (!id || typeof presented !== 'string' || presented.length > 100) return false;
      // A token from before a rotation of the master secret still passes during the transition.
      const previous = keys.previousCsrf;
      return (
        safeEqual(mac(id, scope), presented) ||
        (previous !== undefined && safeEqual(mac(id, scope, previous), presented))
      );
    },
  };
}
