// The sign-in web feature: interaction pages, the account page (with its photo section) and their
// static assets.
import type { FastifyInstance } from 'fastify';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import { errors as oidcErrors } from 'oidc-provider';
import { createKit, frameFor, sendMessage, type Kit, type WebDeps } from './kit.ts';
import { interactionRoutes } from './interaction-steps.ts';
import { AppError } from '../errors.ts';
import { accountPlugin } from './account-page.ts';
import { accountPhoto } from './account-photo.ts';
import { accountConsents } from './account-consents.ts';
import { accountPassword } from './account-password.ts';
import { accountLinks } from './account-links.ts';
import { relatedOriginsRoute, staticPlugin } from './static.ts';
import { devicePlugin } from './device-pages.ts';
import { languageRoutes } from './language.ts';
import { recoveryRoutes } from './recovery-page.ts';
import { lostPasskeyRoutes } from './lost-passkey.ts';

export { providerViews } from './provider-views.ts';
export { deviceViews } from './device-pages.ts';
export { loadExistingGrant } from './grants.ts';
/** the page for a browser that asked for a path nothing serves */
export { sendNotFound as notFoundPage } from './kit.ts';
export { createBranding, wearSiteBrand } from '../ui/page-brand.ts';
export type { WebDeps } from './kit.ts';

function pagesPlugin(kit: Kit, keys: WebDeps['keys'], accountRoutes: (app: FastifyInstance) => Promise<void>) {
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
      // A typed error (AppError) or one of Fastify's own client errors (bad body, too large).
      const status = err instanceof AppError ? err.status : (err as { statusCode?: number }).statusCode;
      const headers = err instanceof AppError ? err.headers : {};
      // Too much at once (too many password checks under way): worth trying again shortly.
      if (err instanceof AppError && err.status === 503)
        return sendMessage(reply, frameFor(request), 503, 'error.busy', { advice: 'error.busy_advice', headers });
      if (typeof status === 'number' && status >= 400 && status < 500)
        return sendMessage(reply, frameFor(request), status, 'error.generic', { advice: 'error.try_later', headers });
      request.log.error({ err }, 'unhandled error');
      return sendMessage(reply, frameFor(request), 500, 'error.server', { advice: 'error.try_later' });
    });
    await app.register(staticPlugin());
    await app.register(relatedOriginsRoute(kit.config.webauthnRelatedOrigins));
    await app.register(kit.branding.routes);
    await app.register(languageRoutes(kit));
    await app.register(interactionRoutes(kit));
    await app.register(recoveryRoutes(kit));
    await app.register(lostPasskeyRoutes(kit, keys));
    await app.register(accountRoutes);
  };
}

export function webPlugin(deps: WebDeps) {
  const kit = createKit(deps);
  const photo = accountPhoto(kit);
  const accountRoutes = accountPlugin(kit, [
    accountPassword(kit),
    photo.section,
    accountConsents(kit),
    accountLinks(kit),
  ]);
  return async function web(app: FastifyInstance) {
    // Parses cookies and writes the browser-id cookie for the pages and the photo section alike.
    await app.register(cookie);
    await app.register(pagesPlugin(kit, deps.keys, accountRoutes));
    // A sibling of the pages, not inside them: its multipart parser stays scoped to it, and its
    // failures other than the ones it answers itself go to the service's error handler.
    await app.register(photo.plugin);
    // oidc-provider's device pages: they read their own forms, like the photo section's parser stays apart.
    await app.register(devicePlugin(kit));
  };
}
