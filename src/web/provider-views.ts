// Pages oidc-provider renders itself: errors, the logout confirmation and the signed-out page.
import type { FastifyBaseLogger } from 'fastify';
import { errors, type KoaContextWithOIDC } from 'oidc-provider';
import type { AccountSource } from '../oauth/provider.ts';
import { originOf, pageHeaders } from '../ui/html.ts';
import type { MessageKey } from '../ui/i18n.ts';
import { frameOfContext } from '../ui/frame.ts';
import { logoutPage, messagePage } from './pages.ts';
import { respondFrontchannelLogout } from './frontchannel-logout-page.ts';

function respond(ctx: KoaContextWithOIDC, body: string, formTargets: string[] = []) {
  for (const [name, value] of Object.entries(pageHeaders({ formTargets }))) ctx.set(name, value);
  ctx.body = body;
}

type Explanation = { message: MessageKey; advice?: MessageKey };

const fromApplication = (message: MessageKey): Explanation => ({ message, advice: 'oauth.back_to_application' });
const startAgain = (message: MessageKey): Explanation => ({ message, advice: 'oauth.start_again' });

/** What an OAuth error code means to the person in front of the browser, and what they can do. */
const EXPLANATIONS: Record<string, Explanation> = {
  invalid_client: fromApplication('oauth.invalid_client'),
  invalid_redirect_uri: fromApplication('oauth.invalid_redirect_uri'),
  invalid_request: fromApplication('oauth.invalid_request'),
  invalid_request_uri: fromApplication('oauth.invalid_request'),
  invalid_request_object: fromApplication('oauth.invalid_request'),
  request_not_supported: fromApplication('oauth.invalid_request'),
  request_uri_not_supported: fromApplication('oauth.invalid_request'),
  registration_not_supported: fromApplication('oauth.invalid_request'),
  unsupported_response_type: fromApplication('oauth.invalid_request'),
  unsupported_response_mode: fromApplication('oauth.invalid_request'),
  invalid_scope: fromApplication('oauth.invalid_scope'),
  invalid_target: fromApplication('oauth.invalid_scope'),
  invalid_authorization_details: fromApplication('oauth.invalid_scope'),
  unauthorized_client: fromApplication('oauth.unauthorized_client'),
  access_denied: startAgain('oauth.access_denied'),
  login_required: startAgain('oauth.login_required'),
  interaction_required: startAgain('oauth.login_required'),
  consent_required: startAgain('oauth.login_required'),
  account_selection_required: startAgain('oauth.login_required'),
  server_error: { message: 'error.server', advice: 'error.try_later' },
  temporarily_unavailable: { message: 'error.server', advice: 'error.try_later' },
};

export function explainError(code: string | undefined, error?: unknown): Explanation {
  // A sign-in request that expired, was finished already, or belongs to another browser.
  if (error instanceof errors.SessionNotFound) return { message: 'error.expired' };
  return (
    (code && Object.hasOwn(EXPLANATIONS, code) ? EXPLANATIONS[code] : undefined) ?? {
      message: 'error.generic',
      advice: 'error.try_later',
    }
  );
}

/** oidc-provider's pages; log receives one line per error page, with the request id it shows. */
export function providerViews(
  log: FastifyBaseLogger,
): Pick<AccountSource, 'renderError' | 'logoutSource' | 'postLogoutSuccessSource' | 'frontchannelLogoutSource'> {
  return {
    renderError(ctx, out, error) {
      const frame = frameOfContext(ctx);
      // The provider mount set the request id on the response before handing the request over.
      const reference = String(ctx.res.getHeader('x-request-id') ?? '') || undefined;
      // The protocol's words go to the log for the helpdesk; the person gets an explanation.
      log.info(
        { reqId: reference, route: ctx.oidc?.route, error: out.error, error_description: out.error_description },
        'authorization error page',
      );
      const { message, advice } = explainError(out.error, error);
      respond(
        ctx,
        messagePage(frame, {
          title: frame.t('error.title'),
          message: frame.t(message),
          advice: advice && frame.t(advice),
          reference,
        }),
      );
    },
    frontchannelLogoutSource(ctx, frames, continueTo) {
      respondFrontchannelLogout(ctx, frameOfContext(ctx), frames, continueTo, ctx.oidc.urlFor('end_session_success'));
    },
    logoutSource(ctx, form) {
      const frame = frameOfContext(ctx);
      const target = originOf(ctx.oidc?.params?.post_logout_redirect_uri);
      respond(ctx, logoutPage(frame, form), target ? [target] : []);
    },
    async postLogoutSuccessSource(ctx) {
      const frame = frameOfContext(ctx);
      // The same page follows "Stay signed in": say what actually happened.
      const session = await ctx.oidc.provider.Session.get(ctx);
      if (session.accountId) {
        respond(
          ctx,
          messagePage(frame, {
            title: frame.t('logout.stayed_title'),
            message: frame.t('logout.stayed'),
            link: { href: '/account', text: frame.t('error.back_home') },
          }),
        );
        return;
      }
      respond(
        ctx,
        messagePage(frame, {
          title: frame.t('logout.done_title'),
          message: frame.t('logout.done'),
          link: { href: '/account', text: frame.t('logout.sign_in_again') },
        }),
      );
    },
  };
}
