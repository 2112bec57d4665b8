// RFC 9449 7.1 at /openid/userinfo: a request under the DPoP scheme that carries no proof is an
// authentication failure of the DPoP scheme, 401 with a DPoP challenge (error="invalid_dpop_proof"),
// as the service's own APIs answer it (src/http/bearer.ts). oidc-provider answers 400
// invalid_request; every other answer of its userinfo endpoint is left as it is.
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { DPOP_ALGS } from '../http/dpop.ts';

type Middleware = Parameters<Provider['use']>[0];

const DPOP_SCHEME = /^DPoP\s/i;
const MISSING = 'DPoP proof missing';

export function userinfoDpopChallenge(): Middleware {
  return async (ctx, next) => {
    await next();
    const oidc = (ctx as KoaContextWithOIDC).oidc;
    if (oidc?.route !== 'userinfo' || ctx.status !== 400) return;
    if (!DPOP_SCHEME.test(ctx.get('authorization')) || ctx.get('dpop') !== '') return;
    ctx.status = 401;
    ctx.set(
      'www-authenticate',
      `DPoP realm="${oidc.issuer}", error="invalid_dpop_proof", error_description="${MISSING}", algs="${DPOP_ALGS.join(' ')}"`,
    );
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = { error: 'invalid_dpop_proof', error_description: MISSING };
  };
}
