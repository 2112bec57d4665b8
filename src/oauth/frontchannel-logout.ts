// OIDC Front-Channel Logout 1.0 (oidc-provider has no such feature). When the user signs out at
// /openid/endsession, the page that follows loads each front-channel logout URI of the session's
// clients in a hidden iframe, with `iss` and `sid`, then continues where oidc-provider would have
// redirected.
import type Provider from 'oidc-provider';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import { findClient } from '../store/clients.ts';

/** Renders the signed-out page with the iframes; `continueTo` is where oidc-provider redirects next. */
export type FrontchannelLogoutSource = (ctx: KoaContextWithOIDC, frames: string[], continueTo: string) => void;

type Middleware = Parameters<Provider['use']>[0];

/** The client metadata property naming a front-channel logout URI (src/oauth/adapter.ts). */
export const FRONTCHANNEL_METADATA = 'frontchannel_logout_uri';

/**
 * OIDC Front-Channel Logout 1.0 section 3: a client that receives `sid` in its logout request finds
 * the session it names in its ID token's `sid`. oidc-provider puts sid in ID tokens for clients with a
 * back-channel logout URI only (Client#includeSid); clients with a front-channel one get it as well.
 */
export function includeSidForFrontchannelClients(provider: Provider): void {
  type ClientThis = { metadata(): Record<string, unknown> };
  const prototype = provider.Client.prototype as unknown as { includeSid: (this: ClientThis) => boolean };
  const backchannelRule = prototype.includeSid;
  prototype.includeSid = function includeSid(this: ClientThis) {
    return Boolean(backchannelRule.call(this)) || typeof this.metadata()[FRONTCHANNEL_METADATA] === 'string';
  };
}

/** `uri` with iss and sid added to its query (OIDC Front-Channel Logout 1.0, section 3). */
export function frontchannelUri(uri: string, issuer: string, sid: string | undefined): string {
  const url = new URL(uri);
  url.searchParams.set('iss', issuer);
  if (sid) url.searchParams.set('sid', sid);
  return url.href;
}

async function framesOf(store: Store, ctx: KoaContextWithOIDC): Promise<string[]> {
  const session = ctx.oidc.session;
  const frames: string[] = [];
  for (const [clientId, authorization] of Object.entries(session?.authorizations ?? {})) {
    const uri = (await findClient(store.db, clientId))?.frontchannel_logout_uri;
    if (uri) frames.push(frontchannelUri(uri, ctx.oidc.issuer, authorization.sid));
  }
  return frames;
}

/**
 * After oidc-provider ended the session (end_session_confirm with logout), it answers 303 to the
 * post-logout redirect URI or its own success page. When clients of that session registered a
 * front-channel logout URI, the answer becomes a page that loads them and then continues there.
 */
export function frontchannelLogout(store: Store, render: FrontchannelLogoutSource): Middleware {
  return async (ctx, next) => {
    await next();
    const oidcCtx = ctx as KoaContextWithOIDC;
    if (oidcCtx.oidc?.route !== 'end_session_confirm' || ctx.status !== 303 || !oidcCtx.oidc.params?.logout) return;
    const frames = await framesOf(store, oidcCtx);
    const continueTo = ctx.response.get('location');
    if (frames.length === 0 || !continueTo) return;
    ctx.remove('location');
    ctx.status = 200;
    render(oidcCtx, frames, continueTo);
  };
}
