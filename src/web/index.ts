// The sign-in web feature: interaction pages, the account page and their static assets.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import { errors as oidcErrors } from 'oidc-provider';
import { createKit, frameFor, sendMessage, sendNotFound, type WebDeps } from './kit.ts';
import { interactionRoutes } from './interactions.ts';
import { createAccount, type Account } from './account.ts';
import { staticPlugin } from './static.ts';

export { providerViews } from './provider-views.ts';
export { loadExistingGrant } from './grants.ts';
export type { Account, AccountSection, AccountView } from './account.ts';
export { html, raw, escapeHtml, type Html } from './html.ts';
export type { WebDeps, MessageOptions } from './kit.ts';
export type { MessageKey } from './i18n.ts';

export interface Web {
  /** hooks for other features that add to the account page */
  account: Account;
  plugin: (app: FastifyInstance) => Promise<void>;
  /** the page for a browser that asked for a path nothing serves */
  notFoundPage: (request: FastifyRequest, reply: FastifyReply) => unknown;
}

export function createWeb(deps: WebDeps): Web {
  const kit = createKit(deps);
  const { account, plugin: accountRoutes } = createAccount(kit);
  return {
    account,
    notFoundPage: sendNotFound,
    async plugin(app: FastifyInstance) {
      // Pages are not part of the API document.
      app.addHook('onRoute', (route) => {
        route.schema = { ...(route.schema ?? {}), hide: true } as typeof route.schema;
      });
      await app.register(formbody, { bodyLimit: 256 * 1024 });
      // Pages answer with pages: an unexpected failure is logged and shown as a plain error page.
      app.setErrorHandler((err, request, reply) => {
        // The sign-in request can expire between showing a page and acting on it.
        if (err instanceof oidcErrors.SessionNotFound)
          return sendMessage(reply, frameFor(request), 400, 'error.expired');
        const status = (err as { statusCode?: number }).statusCode;
        if (typeof status === 'number' && status >= 400 && status < 500)
          return sendMessage(reply, frameFor(request), status, 'error.generic', { advice: 'error.try_later' });
        request.log.error({ err }, 'unhandled error');
        return sendMessage(reply, frameFor(request), 500, 'error.server', { advice: 'error.try_later' });
      });
      await app.register(staticPlugin());
      await app.register(interactionRoutes(kit));
      await app.register(accountRoutes);
    },
  };
}
