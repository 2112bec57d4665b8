// The signed-out page of OIDC Front-Channel Logout: hidden iframes to the applications'
// front-channel logout URIs, framing allowed for exactly their origins, then on to where the
// logout continues (the application's post-logout redirect URI, or the signed-out message).
import type { KoaContextWithOIDC } from 'oidc-provider';
import { html, originOf, pageHeaders } from '../ui/html.ts';
import { layout, type Frame } from './pages.ts';

/** Seconds the iframes get before the browser moves on. */
const CONTINUE_AFTER = 2;

export function frontchannelLogoutPage(frame: Frame, frames: string[], continueTo: string | undefined): string {
  const { t } = frame;
  const body = html`
<h1>${t('logout.done_title')}</h1>
<p class="message">${t('logout.done')}</p>
${frames.map((src) => html`<iframe src="${src}" hidden title="" width="0" height="0" class="frontchannel-logout"></iframe>`)}
${continueTo ? html`<p><a href="${continueTo}" id="logout-continue">${t('logout.continue')}</a></p>` : html`<p><a href="/account">${t('logout.sign_in_again')}</a></p>`}`;
  return layout(frame, t('logout.done_title'), body);
}

/** Renders it on oidc-provider's response; `ownSuccessPage` is oidc-provider's signed-out page,
 * which this page replaces (nothing to continue to). */
export function respondFrontchannelLogout(
  ctx: KoaContextWithOIDC,
  frame: Frame,
  frames: string[],
  continueTo: string,
  ownSuccessPage: string,
): void {
  const next = new URL(continueTo, ownSuccessPage).href.startsWith(ownSuccessPage) ? undefined : continueTo;
  const frameTargets = frames.map(originOf).filter((o): o is string => o !== undefined);
  const formTargets = next ? [originOf(next)].filter((o): o is string => o !== undefined) : [];
  for (const [name, value] of Object.entries(pageHeaders({ formTargets, frameTargets }))) ctx.set(name, value);
  // A refresh, not a script: the page stays within the strict script policy.
  if (next) ctx.set('refresh', `${CONTINUE_AFTER};url=${next}`);
  ctx.body = frontchannelLogoutPage(frame, frames, next);
}
