// The cookie binding an upstream sign-in to the browser that started it: a random value set with
// the redirect to the provider, whose SHA-256 the in-flight request records. The OIDC callback and
// the SAML ACS refuse an answer delivered by a browser without it (before the request is consumed
// or the code exchanged), so a sign-in link passed to someone else cannot complete in their name.
// One cookie per request (named after its id), for ten minutes, cleared when the answer arrives.
// On https: `__Host-`, Secure, HttpOnly, path /; SameSite=Lax for OIDC (a top-level GET comes back),
// None for SAML (the ACS is a cross-site POST). On plain http (PUBLIC_URL on localhost) the name has
// no prefix, like the service's other cookies; the OIDC cookie is then not Secure either, the SAML
// one stays Secure (None requires it; browsers keep Secure cookies of localhost, a secure context).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { newBrowserBinding, UPSTREAM_REQUEST_TTL_MS } from '../upstream/requests.ts';
import type { Kit } from './kit.ts';

const secureOf = (kit: Kit) => kit.config.publicUrl.startsWith('https:');

/** The binding cookie's name for the request with this id. */
export const bindingCookieName = (kit: Kit, requestId: string) =>
  `${secureOf(kit) ? '__Host-' : ''}upstream-${requestId}`;

/** A new binding value, for startUpstreamRequest; the cookie is set with setBindingCookie once the request id is known. */
export const newBinding = newBrowserBinding;

export function setBindingCookie(
  kit: Kit,
  reply: FastifyReply,
  requestId: string,
  binding: string,
  protocol: 'oidc' | 'saml',
) {
  reply.setCookie(bindingCookieName(kit, requestId), binding, {
    ...attributes(kit, protocol),
    maxAge: Math.floor(UPSTREAM_REQUEST_TTL_MS / 1000),
  });
}

function attributes(kit: Kit, protocol: 'oidc' | 'saml') {
  return protocol === 'saml'
    ? ({ path: '/', httpOnly: true, secure: true, sameSite: 'none' } as const)
    : ({ path: '/', httpOnly: true, secure: secureOf(kit), sameSite: 'lax' } as const);
}

/** The binding the browser presents for this request (undefined without one). */
export function bindingOf(kit: Kit, request: FastifyRequest, requestId: unknown): string | undefined {
  if (typeof requestId !== 'string') return undefined;
  return request.cookies[bindingCookieName(kit, requestId)];
}

export function clearBindingCookie(kit: Kit, reply: FastifyReply, requestId: string, protocol: 'oidc' | 'saml') {
  reply.clearCookie(bindingCookieName(kit, requestId), attributes(kit, protocol));
}
