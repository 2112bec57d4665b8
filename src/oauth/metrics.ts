// What the authorization server adds to /metrics: tokens issued at the token endpoint (also
// logged, never with a token value), and the route labels of the paths oidc-provider serves.
import type { FastifyBaseLogger } from 'fastify';
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { metrics } from '../http/metrics.ts';
import { FastCounter } from '../http/metric-series.ts';

const issued = new FastCounter({
  name: 'idp_tokens_issued_total',
  help: 'Successful token endpoint answers (each carries one access token), by grant type and client id',
  labelNames: ['grant_type', 'client'],
  registers: [metrics],
});

/**
 * 'grant.success' is emitted once per successful token request, whatever the grant and whatever
 * the token format: the per-token events are not enough alone, since a JWT access token (what
 * client_credentials gets here) is 'issued' but never 'saved', and a refresh or device grant adds
 * a refresh token and an ID token to the same answer. grant_type is one the provider handles (a
 * request with any other was refused before this) and the client one from the registry, so both
 * labels are bounded. Only names are logged: the answer's tokens never reach this handler.
 */
export function countIssuedTokens(provider: Provider, log?: FastifyBaseLogger): void {
  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const grantType = String(ctx.oidc.params?.grant_type);
    const clientId = ctx.oidc.client?.clientId ?? 'unknown';
    issued.inc([grantType, clientId]);
    const requestId = ctx.res.getHeader('x-request-id');
    log?.info(
      { reqId: typeof requestId === 'string' ? requestId : undefined, grant_type: grantType, client_id: clientId },
      'token issued',
    );
  });
}

/**
 * The paths oidc-provider serves under the wildcard routes it is mounted on, as route patterns for
 * the request metrics: its configured routes and the ones it derives from them.
 */
export function providerRoutePatterns(routes: { authorization: string; end_session: string }): string[] {
  return [
    ...new Set([
      ...Object.values(routes),
      `${routes.authorization}/:uid`,
      `${routes.end_session}/confirm`,
      `${routes.end_session}/success`,
    ]),
  ];
}
