// The sign-in web feature: interaction pages, the account page (with its photo section) and their
// static assets.
import type { FastifyInstance } from 'fastify';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import { errors as oidcErrors } from 'oidc-provider';
import { createKit, frameFor, sendMessage, type Kit, type WebDeps } from './kit.ts';
import { interactionRoutes } from './interaction-steps.ts';
import { createAccount } from './account-page.ts';
import { accountPhotoPlugin } from './account-photo.ts';
import { staticPlugin } from './static.ts';

export { providerViews } from './provider-views.ts';
export { loadExistingGrant } from './grants.ts';
/** the page for a browser that asked for a path nothing serves */
export { sendNotFound as notFoundPage } from './kit.ts';
export type { WebDeps } from './kit.ts';

function pagesPlugin(kit: Kit, accountRoutes: (app: FastifyInstance) => Promise<void>) {
  return async function pages(app: FastifyInstance) {
    // Pages are not part of the API document.
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true };
    });
    await app.register(formbody, { bodyLimit: 256 * 1024 });
    // Pages answer with pages: an unexpected failure is logged and shown as a plain error page.
    app.setErrorHandler((err, request, reply) => {
      // The sign-in request can expire between showing a page and acting on it.
      if (err instanceof oidcErrors.SessionNotFound) return sendMessage(reply, frameFor(request), 400, 'error.expired');
      const status = (err as { statusCode?: number }).statusCode;
      if (typeof status === 'number' && status >= 400 && status < 500)
        return sendMessage(reply, frameFor(request), status, 'error.generic', { advice: 'error.try_later' });
      request.log.error({ err }, 'unhandled error');
      return sendMessage(reply, frameFor(request), 500, 'error.server', { advice: 'error.try_later' });
    });
    await app.register(staticPlugin());
    await app.register(interactionRoutes(kit));
    await app.register(accountRoutes);
  };
}

export function webPlugin(deps: WebDeps) {
  const kit = createKit(deps);
  const { account, plugin: accountRoutes } = createAccount(kit);
  // Adds its section to the account page now, before any page is rendered.
  const photo = accountPhotoPlugin({ store: deps.store, account });
  return async function web(app: FastifyInstance) {
    // Parses cookies and writes the browser-id cookie for the pages and the photo section alike.
    await app.register(cookie);
    await app.register(pagesPlugin(kit, accountRoutes));
    // A sibling of the pages, not inside them: its multipart parser stays scoped to it, and its
    // failures other than the ones it answers itself go to the service's error handler.
    await app.register(photo);
  };
}
