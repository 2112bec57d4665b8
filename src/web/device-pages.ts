// Device sign-in (RFC 8628): the pages oidc-provider's deviceFlow renders through its source hooks
// (enter the code, confirm, done), and the routes of /device, where wrong codes are rate-limited
// per client address before oidc-provider looks a code up.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { providerHandler } from '../oauth/plugin.ts';
import { ROUTES, SESSION_COOKIE, SESSION_TTL } from '../oauth/provider.ts';
import type { DeviceFlowSources } from '../oauth/device-flow.ts';
import { clientKey, rateLimit, type RateLimit } from '../http/rate-limit.ts';
import { pageHeaders } from '../ui/html.ts';
import type { MessageKey } from '../ui/i18n.ts';
import { frameOfContext } from '../ui/frame.ts';
import { deviceConfirmPage, messagePage, userCodePage } from './pages.ts';
import { frameFor, overLimit, sendMessage, type Kit } from './kit.ts';

const WINDOW_MS = 15 * 60 * 1000;

/** Requests whose user code was wrong, expired or used: they keep the attempt they were counted. */
const wrongCodes = new WeakSet<IncomingMessage>();

function respond(ctx: KoaContextWithOIDC, status: number, body: string) {
  for (const [name, value] of Object.entries(pageHeaders())) ctx.set(name, value);
  ctx.status = status;
  ctx.body = body;
}

/**
 * oidc-provider's error handler of /device draws the user-code form again with a fresh anti-forgery
 * secret in the session, after its session step has finished. A request that came without a session
 * (a form sent after the cookie went, a resume link opened in another browser) has one that was never
 * saved: oidc-provider then fails to save it (a 500), and the form would be refused again anyway. It
 * is saved here, with its cookie, as the session step saves a new session, so the form works.
 */
async function saveNewSession(ctx: KoaContextWithOIDC): Promise<void> {
  const session = ctx.oidc.session;
  // `touched`: oidc-provider's mark of a session changed in this request
  if (!session || typeof session.exp === 'number' || !(session as { touched?: boolean }).touched) return;
  await session.save(SESSION_TTL);
  ctx.cookies.set(ctx.oidc.provider.cookieName('session'), session.jti, {
    ...SESSION_COOKIE,
    expires: new Date(session.exp * 1000),
  });
}

/** oidc-provider's anti-forgery token, from the form it built for the page. */
function xsrfOf(form: string): string {
  return /name="xsrf" value="([^"]*)"/.exec(form)?.[1] ?? '';
}

/** What went wrong with a code the user sent (oidc-provider's re-render errors), by error name. */
const CODE_ERRORS: Record<string, MessageKey> = {
  NotFoundError: 'device.wrong_code',
  ExpiredError: 'device.expired_code',
  AlreadyUsedError: 'device.used_code',
};

interface Outcome {
  status: number;
  error?: MessageKey;
  /** the request id, when the failure is not about the code */
  withReference?: boolean;
}

function outcomeOf(err: unknown): Outcome {
  if (!err) return { status: 200 };
  const name = (err as { name?: string }).name ?? '';
  if (Object.hasOwn(CODE_ERRORS, name)) return { status: 400, error: CODE_ERRORS[name] };
  if (name === 'NoCodeError') return { status: 400, error: 'device.no_code' };
  // Cancelled on the confirmation page, or denied on the consent page.
  if (name === 'AbortedError') return { status: 200, error: 'device.cancelled' };
  const status = (err as { statusCode?: number }).statusCode;
  return { status: status && status >= 400 ? status : 400, error: 'device.failed', withReference: true };
}

/** The pages oidc-provider's deviceFlow renders: enter the code, confirm it, done. */
export function deviceViews(): { deviceFlowSources: DeviceFlowSources } {
  return {
    deviceFlowSources: {
      async userCodeInputSource(ctx, form, _out, err) {
        await saveNewSession(ctx);
        const frame = frameOfContext(ctx);
        const outcome = outcomeOf(err);
        const userCode = (err as { userCode?: unknown } | undefined)?.userCode;
        if (err && Object.hasOwn(CODE_ERRORS, err.name)) wrongCodes.add(ctx.req);
        const reference = outcome.withReference ? String(ctx.res.getHeader('x-request-id') ?? '') : '';
        const page = userCodePage(frame, {
          action: ctx.oidc.urlFor('code_verification'),
          xsrf: xsrfOf(form),
          ...(typeof userCode === 'string' ? { code: userCode } : {}),
          ...(outcome.error ? { error: frame.t(outcome.error) } : {}),
          ...(reference ? { reference } : {}),
        });
        respond(ctx, outcome.status, page);
      },
      userCodeConfirmSource(ctx, form, client, _deviceInfo, userCode) {
        const frame = frameOfContext(ctx);
        const page = deviceConfirmPage(frame, {
          action: ctx.oidc.urlFor('code_verification'),
          xsrf: xsrfOf(form),
          client: client.clientName ?? client.clientId,
          code: userCode,
        });
        respond(ctx, 200, page);
        return Promise.resolve();
      },
      successSource(ctx) {
        const frame = frameOfContext(ctx);
        const client = ctx.oidc.client;
        const page = messagePage(frame, {
          title: frame.t('device.done_title'),
          message: frame.t('device.done', { client: client?.clientName ?? client?.clientId ?? '' }),
        });
        respond(ctx, 200, page);
        return Promise.resolve();
      },
    },
  };
}

/**
 * A code sent to /device is counted against the client address (one atomic increment, before
 * oidc-provider looks it up, so parallel guesses cannot slip under the limit) and given back
 * unless it was wrong: many people behind one address share a budget for mistakes only.
 */
function codeEntry(limit: RateLimit, handler: (request: FastifyRequest, reply: FastifyReply) => void) {
  return async function enterCode(request: FastifyRequest, reply: FastifyReply) {
    const key = clientKey(request.ip);
    const retryAfter = await overLimit(limit, key);
    if (retryAfter)
      return sendMessage(reply, frameFor(request), 429, 'device.rate_limited', {
        headers: { 'retry-after': retryAfter },
      });
    reply.raw.once('finish', () => {
      if (wrongCodes.has(request.raw)) return;
      limit.refund(key).catch((err: unknown) => request.log.error({ err }, 'device code attempt not refunded'));
    });
    handler(request, reply);
    return reply;
  };
}

/** /device and /device/<uid> (where the sign-in returns), served by oidc-provider. */
export function devicePlugin(kit: Kit) {
  const limit = rateLimit(kit.store, 'device-code-ip', kit.config.loginRateLimitIp, WINDOW_MS, kit.now);
  return async function device(app: FastifyInstance) {
    // oidc-provider reads the form itself: leave bodies unparsed here.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, _payload, done) => done(null));
    const handler = providerHandler(kit.provider, kit.config);
    const options = { schema: { hide: true } };
    app.get(ROUTES.code_verification, options, handler);
    app.get(`${ROUTES.code_verification}/:uid`, options, handler);
    app.post(ROUTES.code_verification, options, codeEntry(limit, handler));
    await Promise.resolve();
  };
}
