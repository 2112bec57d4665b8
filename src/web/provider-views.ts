// Pages oidc-provider renders itself: errors, the logout confirmation and the signed-out page.
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { AccountSource } from '../oauth/provider.ts';
import { originOf, pageHeaders } from './html.ts';
import { pickLocale, translator } from './i18n.ts';
import { logoutPage, messagePage, type Frame } from './pages.ts';

function frameOf(ctx: KoaContextWithOIDC): Frame {
  const locale = pickLocale(ctx.oidc?.params?.ui_locales, ctx.get('accept-language'));
  return { locale, t: translator(locale) };
}

function respond(ctx: KoaContextWithOIDC, body: string, formTargets: string[] = []) {
  for (const [name, value] of Object.entries(pageHeaders({ formTargets }))) ctx.set(name, value);
  ctx.body = body;
}

export const providerViews: Pick<AccountSource, 'renderError' | 'logoutSource' | 'postLogoutSuccessSource'> = {
  renderError(ctx, out) {
    const frame = frameOf(ctx);
    // error and error_description are the protocol's own words; nothing internal reaches them.
    const message = [out.error, out.error_description].filter(Boolean).join(': ') || frame.t('error.generic');
    respond(ctx, messagePage(frame, { title: frame.t('error.title'), message }));
  },
  logoutSource(ctx, form) {
    const frame = frameOf(ctx);
    const target = originOf(ctx.oidc?.params?.post_logout_redirect_uri);
    respond(ctx, logoutPage(frame, form), target ? [target] : []);
  },
  async postLogoutSuccessSource(ctx) {
    const frame = frameOf(ctx);
    // The same page follows "Stay signed in": say what actually happened.
    const session = await ctx.oidc.provider.Session.get(ctx);
    if (session.accountId) {
      respond(ctx, messagePage(frame, { title: frame.t('logout.stayed_title'), message: frame.t('logout.stayed'), link: { href: '/account', text: frame.t('error.back_home') } }));
      return;
    }
    respond(ctx, messagePage(frame, { title: frame.t('logout.done_title'), message: frame.t('logout.done'), link: { href: '/account', text: frame.t('logout.sign_in_again') } }));
  },
};
