// Fixtures of the userinfo tests: user access tokens minted through oidc-provider's own models,
// exactly as the authorization code flow stores them.
import type { TestContext } from '../helpers.ts';

export interface MintOptions {
  accountId: string;
  clientId: string;
  /** scope of the access token */
  scope: string;
  /** OIDC scopes of the grant (defaults to the token scope) */
  grantScope?: string;
  /** seconds the token lives (negative: already expired) */
  expiresIn?: number;
  /** a resource-bound token */
  aud?: string;
  /** a DPoP-bound token */
  jkt?: string;
}

export async function mintUserToken(ctx: Pick<TestContext, 'provider'>, o: MintOptions): Promise<string> {
  const provider = ctx.provider.current();
  const grant = new provider.Grant({ accountId: o.accountId, clientId: o.clientId });
  grant.addOIDCScope(o.grantScope ?? o.scope);
  const grantId = await grant.save();
  const client = await provider.Client.find(o.clientId);
  if (!client) throw new Error(`client ${o.clientId} not found`);
  const at = new provider.AccessToken({
    accountId: o.accountId,
    client,
    grantId,
    scope: o.scope,
    gty: 'authorization_code',
    ...(o.jkt ? { jkt: o.jkt } : {}),
  });
  if (o.aud) at.setAudience(o.aud);
  if (o.expiresIn !== undefined) {
    const now = Math.floor(Date.now() / 1000);
    at.iat = now - 3600;
    at.exp = now + o.expiresIn;
  }
  return at.save();
}

/** The authorization code flow's token exchange, with the code minted as the authorization
 * endpoint would store it: returns the token endpoint's JSON answer. */
export async function exchangeCode(
  ctx: Pick<TestContext, 'provider' | 'app'>,
  o: {
    accountId: string;
    clientId: string;
    secret: string;
    scope: string;
    redirectUri: string;
    claims?: Record<string, unknown>;
  },
): Promise<{ access_token: string; id_token: string; scope: string }> {
  const provider = ctx.provider.current();
  const grant = new provider.Grant({ accountId: o.accountId, clientId: o.clientId });
  grant.addOIDCScope(o.scope);
  if (o.claims) {
    for (const where of ['id_token', 'userinfo'] as const) {
      const names = Object.keys((o.claims[where] as object | undefined) ?? {});
      if (names.length) grant.addOIDCClaims(names);
    }
  }
  const grantId = await grant.save();
  const client = await provider.Client.find(o.clientId);
  if (!client) throw new Error(`client ${o.clientId} not found`);
  const code = new provider.AuthorizationCode({
    accountId: o.accountId,
    client,
    grantId,
    scope: o.scope,
    redirectUri: o.redirectUri,
    authTime: Math.floor(Date.now() / 1000),
    gty: 'authorization_code',
    ...(o.claims ? { claims: o.claims } : {}),
  });
  const value = await code.save();
  const res = await ctx.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: {
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(o.clientId)}:${encodeURIComponent(o.secret)}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    payload: new URLSearchParams({
      grant_type: 'authorization_code',
      code: value,
      redirect_uri: o.redirectUri,
    }).toString(),
  });
  if (res.statusCode !== 200) throw new Error(`code exchange failed: ${res.statusCode} ${res.body}`);
  return res.json();
}
