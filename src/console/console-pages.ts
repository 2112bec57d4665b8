// The console's web pages under /console: sign-in as a relying party of this service
// (console-session.ts), the organization chooser, and the helpdesk's and administrators' pages.
// Pages answer with pages: a failure is a console page with the request id, never JSON.
import { readFileSync } from 'node:fs';
import { packageFile } from '../package-files.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import { listOrganizations } from '../store/directory.ts';
import { consoleClientState, CONSOLE_CLIENT_ID, CONSOLE_SIGNED_OUT } from '../clients/console-client.ts';
import { ROUTES } from '../oauth/provider.ts';
import { AppError } from '../errors.ts';
import {
  checkCsrf,
  redirect,
  sendConsoleMessage,
  sendConsoleNotFound,
  sendHtml,
  signedIn,
  type ConsoleDeps,
} from './console-kit.ts';
import { endSessions, finishSignIn, forgetAuthState, writeSession } from './console-session.ts';
import { organizationsView } from './console-views.ts';
import { userPages } from './console-user-pages.ts';
import { organizationPages } from './console-org-pages.ts';
import { applicationPages } from './console-app-pages.ts';
import { databaseOutage } from '../http/errors.ts';

const SCRIPT = readFileSync(packageFile('console/static/console.js'));

/** The console's client exists and is enabled (`client disable idp-console` switches the console off at once). */
async function usable(deps: ConsoleDeps, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  if ((await consoleClientState(deps.store, deps.config.publicUrl, deps.now())) === 'ready') return true;
  sendConsoleMessage(request, reply, 503, { title: 'console.disabled_title', message: 'console.disabled' });
  return false;
}

async function home(deps: ConsoleDeps, request: FastifyRequest, reply: FastifyReply) {
  const staff = await signedIn(deps, request, reply);
  if (!staff) return reply;
  const orgs = await listOrganizations(deps.store.db);
  const mine = staff.access.operator ? orgs : orgs.filter((o) => staff.access.helpdesk.includes(o.id));
  if (mine.length === 1) return redirect(reply, `/console/org/${mine[0]!.id}`);
  return sendHtml(
    reply,
    200,
    organizationsView(
      staff.view,
      mine.map((o) => ({ id: o.id, name: o.name })),
    ),
  );
}

async function callback(deps: ConsoleDeps, request: FastifyRequest, reply: FastifyReply) {
  const result = await finishSignIn(deps, request);
  forgetAuthState(deps, reply);
  if (!result.ok) {
    const message = result.reason === 'passkey' ? 'console.signin_passkey' : 'console.signin_failed';
    return sendConsoleMessage(request, reply, 400, { title: 'console.signin_failed_title', message });
  }
  writeSession(deps, reply, result.session);
  request.log.info({ sub: result.session.sub, acr: result.session.acr }, 'console sign-in');
  return redirect(reply, result.back);
}

/** Ends the console session, then the service's own through RP-initiated logout. */
async function signOut(deps: ConsoleDeps, request: FastifyRequest, reply: FastifyReply) {
  const staff = await signedIn(deps, request, reply);
  if (!staff || !checkCsrf(deps, request, reply, staff)) return reply;
  await endSessions(deps, reply, staff.user.sub);
  const params = new URLSearchParams({
    client_id: CONSOLE_CLIENT_ID,
    post_logout_redirect_uri: `${deps.config.publicUrl}${CONSOLE_SIGNED_OUT}`,
  });
  return redirect(reply, `${ROUTES.end_session}?${params.toString()}`);
}

function signedOut(request: FastifyRequest, reply: FastifyReply) {
  return sendConsoleMessage(request, reply, 200, { title: 'console.signed_out_title', message: 'console.signed_out' });
}

function consoleErrors(app: FastifyInstance) {
  app.setErrorHandler((err, request, reply) => {
    // A typed error (AppError) or one of Fastify's own client errors (bad body, too large).
    const status = err instanceof AppError ? err.status : (err as { statusCode?: number }).statusCode;
    if (typeof status === 'number' && status >= 400 && status < 500)
      return sendConsoleMessage(request, reply, status, {
        title: 'console.error_title',
        message: 'console.error_request',
      });
    // The database away for the moment (src/http/errors.ts): the same 503 as everywhere, as a page.
    const outage = databaseOutage(err, request);
    if (outage) {
      reply.headers(outage.headers);
      return sendConsoleMessage(request, reply, outage.status, {
        title: 'console.error_title',
        message: 'console.error_server',
      });
    }
    request.log.error({ err }, 'unhandled error');
    return sendConsoleMessage(request, reply, 500, { title: 'console.error_title', message: 'console.error_server' });
  });
}

export function consolePages(deps: ConsoleDeps) {
  return async function consoleWeb(app: FastifyInstance) {
    app.addHook('onRoute', (route) => {
      route.schema = { ...(route.schema ?? {}), hide: true };
    });
    await app.register(cookie);
    await app.register(formbody, { bodyLimit: 3 * 1024 * 1024 });
    consoleErrors(app);
    app.addHook('preHandler', async (request, reply) => {
      if (request.url.startsWith('/console/static/')) return;
      if (!(await usable(deps, request, reply))) return reply;
    });
    app.get('/console/static/console.js', (_request, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(SCRIPT),
    );
    app.get('/console', (q, r) => home(deps, q, r));
    app.get('/console/callback', (q, r) => callback(deps, q, r));
    app.post('/console/sign-out', (q, r) => signOut(deps, q, r));
    app.get(CONSOLE_SIGNED_OUT, signedOut);
    await app.register(userPages(deps));
    await app.register(organizationPages(deps));
    await app.register(applicationPages(deps));
    app.get('/console/*', (request, reply) => sendConsoleNotFound(request, reply));
  };
}
