// OIDC Front-Channel Logout 1.0 (oidc-provider has no such feature). When the user signs out at
// /openid/endsession, the page that follows loads each front-channel logout URI of the session's
// clients in a hidden iframe, with `iss` and `sid`, then continues where oidc-provider would have
// redirected. The composition may add what else the session was signed in to (SessionLogoutHook):
// the browser then goes there before it continues.
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

/** The front-channel logout URIs (with iss and sid) of a session's clients that registered one. */
export async function frontchannelFrames(
  store: Store,
  issuer: string,
  authorizations: Record<string, { sid?: string }> | undefined,
): Promise<string[]> {
  const frames: string[] = [];
  for (const [clientId, authorization] of Object.entries(authorizations ?? {})) {
    const uri = (await findClient(store.db, clientId))?.frontchannel_logout_uri;
    if (uri) frames.push(frontchannelUri(uri, issuer, authorization.sid));
  }
  return frames;
}

/**
 * What else the ended session was signed in to (the SAML SPs of the session), told by the
 * composition: given the session and where the logout continues, it ends what it keeps for the
 * session and answers where the browser goes first (which comes back to `continueTo` in the end)
 * and the cookies that take it there; undefined when there is nothing to tell.
 */
export type SessionLogoutHook = (
  session: { uid: string; requestId: string | null; ip: string },
  continueTo: string,
) => Promise<{ location: string; cookies: string[] } | undefined>;

/**
 * After oidc-provider ended the session (end_session_confirm with logout), it answers 303 to the
 * post-logout redirect URI or its own success page. When clients of that session registered a
 * front-channel logout URI, the answer becomes a page that loads them and then continues there.
 * With `sessionLogout`, it continues first to where that hook sends the browser (which comes back).
 */
export function frontchannelLogout(
  store: Store,
  render: FrontchannelLogoutSource,
  sessionLogout?: SessionLogoutHook,
): Middleware {
  return async (ctx, next) => {
    await next();
    const oidcCtx = ctx as KoaContextWithOIDC;
    if (oidcCtx.oidc?.route !== 'end_session_confirm' || ctx.status !== 303 || !oidcCtx.oidc.params?.logout) return;
    const session = oidcCtx.oidc.session;
    const frames = await frontchannelFrames(store, oidcCtx.oidc.issuer, session?.authorizations);
    let continueTo = ctx.response.get('location');
    if (!continueTo) return;
    const requestId = ctx.res.getHeader('x-request-id');
    const onward =
      sessionLogout && session?.uid
        ? await sessionLogout(
            { uid: session.uid, requestId: typeof requestId === 'string' ? requestId : null, ip: ctx.ip },
            continueTo,
          )
        : undefined;
    if (onward) {
      for (const cookie of onward.cookies) ctx.append('set-cookie', cookie);
      continueTo = onward.location;
      ctx.set('location', continueTo);
    }
    if (frames.length === 0) return;
    ctx.remove('location');
    ctx.status = 200;
    render(oidcCtx, frames, continueTo);
  };
}
