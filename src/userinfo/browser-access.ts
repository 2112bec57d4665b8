// Cross-origin access to the endpoints about the signed-in user (extended userinfo, the groups
// API), as /openid/userinfo allows it: a browser application may call them from the origins of its
// client's redirect URIs. A preflight carries no token, so it is answered for any origin; the
// request itself is refused (400 invalid_request) when its Origin is not one of the token's client.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { ClientRow } from '../store/clients.ts';
import { invalidRequest } from './tokens.ts';

const PREFLIGHT_MAX_AGE = '3600';

/** OPTIONS: the methods and the header a cross-origin request may use. */
export async function preflight(request: FastifyRequest, reply: FastifyReply) {
  const origin = request.headers.origin;
  if (typeof origin === 'string')
    reply.headers({
      'access-control-allow-origin': origin,
      'access-control-allow-methods': 'GET',
      'access-control-allow-headers': 'Authorization',
      'access-control-max-age': PREFLIGHT_MAX_AGE,
      vary: 'Origin',
    });
  return reply.code(204).header('allow', 'GET, HEAD, OPTIONS').send();
}

function clientOrigins(client: ClientRow): string[] {
  const uris = JSON.parse(client.redirect_uris) as string[];
  return uris.flatMap((uri) => {
    try {
      return [new URL(uri).origin];
    } catch {
      return [];
    }
  });
}

/** A request with an Origin: allowed for the client's own origins, which the answer names. */
export function checkOrigin(config: Config, request: FastifyRequest, reply: FastifyReply, client: ClientRow): void {
  const origin = request.headers.origin;
  if (origin === undefined) return;
  if (!clientOrigins(client).includes(origin))
    throw invalidRequest(config, 'The origin of this request is not allowed for the client of the token');
  reply.headers({
    'access-control-allow-origin': origin,
    'access-control-expose-headers': 'WWW-Authenticate',
    vary: 'Origin',
  });
}
