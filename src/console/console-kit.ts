// What every console page starts with: signedIn -> organizationOf -> (requireOrgAdmin) ->
// memberOf -> (checkCsrf on posts). Each step answers the request itself when it fails (the
// sign-in redirect, a 403 or 404 page) and returns undefined; the page then stops.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { frameFor } from '../ui/frame.ts';
import { pageHeaders } from '../ui/html.ts';
import type { Frame } from '../ui/layout.ts';
import { findOrganization, findUserBySub, findUserByEppn, type User } from '../store/directory.ts';
import { canHelp, staffAccess, type StaffAccess } from '../directory/roles.ts';
import { accountDisabled, eppnProblem, normalizeEppn } from '../directory/index.ts';
import { positiveId } from '../http/organization-grant.ts';
import type { ConsoleDeps } from './access.ts';
import type { Actor } from '../audit/index.ts';

export type { ConsoleDeps };
import { consoleTranslator, type ConsoleKey, type ConsoleTranslate } from './console-i18n.ts';
import { clearSession, readSession, startSignIn, writeSession, type StaffSession } from './console-session.ts';
import { messageView, type ConsoleView } from './console-views.ts';

/** The signed-in staff member, and the page frame drawn for them. */
export interface Staff {
  session: StaffSession;
  user: User;
  access: StaffAccess;
  view: ConsoleView;
}

export interface Organization {
  id: number;
  realm: string;
  name: string;
}

const csrfScope = (sub: string) => `console:${sub}`;

export function sendHtml(reply: FastifyReply, status: number, page: string, headers: Record<string, string> = {}) {
  return reply
    .code(status)
    .headers({ ...pageHeaders(), ...headers })
    .send(page);
}

export function consoleFrame(request: FastifyRequest): { frame: Frame; t: ConsoleTranslate } {
  const frame = frameFor(request);
  return { frame, t: consoleTranslator(frame.locale) };
}

/** A message page: what happened, and a link on. */
export function sendConsoleMessage(
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  keys: { title: ConsoleKey; message: ConsoleKey; vars?: Record<string, string> },
  view?: ConsoleView,
) {
  const { frame, t } = consoleFrame(request);
  const shown = view ?? { frame, t };
  const page = messageView(shown, t(keys.title), t(keys.message, keys.vars), request.id);
  return sendHtml(reply, status, page);
}

/** The 403 page every refusal of a role or organization shows. */
export function sendForbidden(request: FastifyRequest, reply: FastifyReply, view?: ConsoleView) {
  return sendConsoleMessage(
    request,
    reply,
    403,
    { title: 'console.forbidden_title', message: 'console.forbidden' },
    view,
  );
}

/** The 404 page of a console path that names nothing. */
export function sendConsoleNotFound(request: FastifyRequest, reply: FastifyReply, view?: ConsoleView) {
  return sendConsoleMessage(
    request,
    reply,
    404,
    { title: 'console.not_found_title', message: 'console.page_not_found' },
    view,
  );
}

/** Step 1: a live staff session, else the sign-in (GET) or a page saying to sign in again. */
export async function signedIn(
  deps: ConsoleDeps,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Staff | undefined> {
  const state = readSession(deps, request);
  if (!('session' in state)) {
    if (request.method === 'GET') startSignIn(deps, reply, request.url);
    else reply.code(303).header('location', '/console').header('cache-control', 'no-store').send();
    return undefined;
  }
  const user = await findUserBySub(deps.store.db, state.session.sub);
  // signed out (here or elsewhere), disabled (or their organization), or their sessions ended since: sign in again
  if (!user || accountDisabled(user) || user.console_generation !== state.session.gen) {
    clearSession(deps, reply);
    startSignIn(deps, reply, '/console');
    return undefined;
  }
  const access = await staffAccess(deps.store, user.id);
  const { frame, t } = consoleFrame(request);
  const token = deps.csrf.token(request, reply, csrfScope(user.sub));
  const view: ConsoleView = { frame, t, staff: { eppn: user.eppn, access }, csrf: { field: deps.csrf.field, token } };
  if (!access.operator && access.helpdesk.length === 0) {
    writeSession(deps, reply, state.session);
    sendConsoleMessage(
      request,
      reply,
      403,
      {
        title: 'console.no_access_title',
        message: 'console.no_access',
        vars: { eppn: user.eppn },
      },
      { ...view, staff: { eppn: user.eppn, access, noRole: true } },
    );
    return undefined;
  }
  writeSession(deps, reply, state.session);
  return { session: state.session, user, access, view };
}

/** Step 2: an organization the staff member works for; another one is refused alike whether it exists or not. */
export async function organizationOf(
  deps: ConsoleDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  staff: Staff,
  rawId: string,
): Promise<Organization | undefined> {
  const id = positiveId(rawId);
  if (id === undefined || !canHelp(staff.access, id)) {
    sendForbidden(request, reply, staff.view);
    return undefined;
  }
  const org = await findOrganization(deps.store.db, id);
  if (!org) {
    sendConsoleNotFound(request, reply, staff.view);
    return undefined;
  }
  return { id: org.id, realm: org.realm, name: org.name };
}

export const isOrgAdmin = (staff: Staff, orgId: number) =>
  staff.access.operator || staff.access.orgAdmin.includes(orgId);

/** Step 2b, for reports, bulk offboarding, the whole organization's audit trail and its staff. */
export function requireOrgAdmin(
  request: FastifyRequest,
  reply: FastifyReply,
  staff: Staff,
  org: Organization,
): boolean {
  if (isOrgAdmin(staff, org.id)) return true;
  sendForbidden(request, reply, staff.view);
  return false;
}

export interface Context {
  staff: Staff;
  org: Organization;
}

/** Steps 1, 2 (and 2b for administrators' pages, CSRF for posts) of a page under /console/org/<org_id>. */
export async function orgContext(
  deps: ConsoleDeps,
  request: FastifyRequest<{ Params: { org_id: string } }>,
  reply: FastifyReply,
  { admin = false, post = false } = {},
): Promise<Context | undefined> {
  const staff = await signedIn(deps, request, reply);
  if (!staff) return undefined;
  const org = await organizationOf(deps, request, reply, staff, request.params.org_id);
  if (!org) return undefined;
  if (admin && !requireOrgAdmin(request, reply, staff, org)) return undefined;
  if (post && !checkCsrf(deps, request, reply, staff)) return undefined;
  return { staff, org };
}

/** Who acts, for the audit trail: the staff member, with the request. */
export const staffActor = (staff: Staff, request: FastifyRequest): Actor => ({
  type: 'user',
  id: staff.user.eppn,
  requestId: request.id,
  ip: request.ip,
});

/** Step 3: the organization's user of that eppn; any other (unknown, malformed, another organization's) is a 404. */
export async function memberOf(
  deps: ConsoleDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  { staff, org }: { staff: Staff; org: Organization },
  rawEppn: unknown,
): Promise<User | undefined> {
  const eppn = typeof rawEppn === 'string' ? normalizeEppn(rawEppn) : '';
  const user = eppn && !eppnProblem(eppn) ? await findUserByEppn(deps.store.db, eppn) : undefined;
  if (user && user.org_id === org.id) return user;
  sendConsoleMessage(
    request,
    reply,
    404,
    { title: 'console.not_found_title', message: 'console.user_not_found', vars: { eppn: eppn.slice(0, 100) } },
    staff.view,
  );
  return undefined;
}

/** Step 4 of every form post: the token of this staff member's forms, from this browser. */
export function checkCsrf(deps: ConsoleDeps, request: FastifyRequest, reply: FastifyReply, staff: Staff): boolean {
  const presented = (request.body as Record<string, unknown> | undefined)?.[deps.csrf.field];
  if (deps.csrf.verify(request, csrfScope(staff.user.sub), presented)) return true;
  sendConsoleMessage(request, reply, 403, { title: 'console.forbidden_title', message: 'console.csrf' }, staff.view);
  return false;
}

/** A text field of the posted form, when it is a string of at most max characters. */
export function formText(request: FastifyRequest, name: string, max: number): string | undefined {
  const value = (request.body as Record<string, unknown> | undefined)?.[name];
  return typeof value === 'string' && value.length <= max ? value : undefined;
}

const CONTROL = /[\u0000-\u001f\u007f]/;

/** A query parameter given once, not empty, cut to max characters. */
export function queryText(request: FastifyRequest, name: string, max = 320): string | undefined {
  const value = (request.query as Record<string, unknown>)[name];
  return typeof value === 'string' && value ? value.slice(0, max) : undefined;
}

/** A reason: one line, 1 to 500 characters after trimming. */
export function reasonOf(request: FastifyRequest): string | undefined {
  const raw = formText(request, 'reason', 2000)?.trim();
  return raw && raw.length <= 500 && !CONTROL.test(raw) ? raw : undefined;
}

export const redirect = (reply: FastifyReply, to: string) =>
  reply.code(303).header('location', to).header('cache-control', 'no-store').send();
