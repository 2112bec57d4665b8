// The console's Applications pages (organization administrators and operators): the organization's
// OpenID Connect clients and SAML service providers with what each receives, and one application's
// page. Read-only; orgContext -> (requireOrgAdmin) -> findApplication -> render.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findApplication, listApplications } from '../service-providers/index.ts';
import { orgContext, sendConsoleMessage, sendHtml, type ConsoleDeps } from './console-kit.ts';
import { applicationsView, applicationView } from './console-app-views.ts';

type OrgParams = { org_id: string };
type AppParams = OrgParams & { client_id: string };

async function applicationsPage(
  deps: ConsoleDeps,
  request: FastifyRequest<{ Params: OrgParams }>,
  reply: FastifyReply,
) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  const applications = await listApplications(deps.store, deps.config, ctx.org.id);
  return sendHtml(reply, 200, applicationsView(ctx.staff.view, { org: ctx.org, applications }));
}

async function applicationPage(deps: ConsoleDeps, request: FastifyRequest<{ Params: AppParams }>, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  const application = await findApplication(deps.store, deps.config, ctx.org.id, request.params.client_id);
  if (!application)
    return sendConsoleMessage(
      request,
      reply,
      404,
      { title: 'console.not_found_title', message: 'console.app_not_found' },
      ctx.staff.view,
    );
  return sendHtml(reply, 200, applicationView(ctx.staff.view, { org: ctx.org, application }));
}

export function applicationPages(deps: ConsoleDeps) {
  return async function consoleApplicationPages(app: FastifyInstance) {
    const base = '/console/org/:org_id/applications';
    app.get<{ Params: OrgParams }>(base, (q, r) => applicationsPage(deps, q, r));
    app.get<{ Params: AppParams }>(`${base}/:client_id`, (q, r) => applicationPage(deps, q, r));
  };
}
