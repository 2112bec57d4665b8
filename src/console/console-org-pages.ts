// The console's organization pages: the audit trail (a helpdesk sees one user's, an organization
// administrator the whole organization's) with CSV and JSON downloads, and, for organization
// administrators, the report with its lists as CSV, bulk offboarding and the staff list.
import { inviteUsers } from '../webauthn/invitations.ts';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AUDIT_ACTIONS, auditView } from '../audit/index.ts';
import { listAuditEvents } from '../store/audit.ts';
import { passkeyListPage, userListPage, type PasskeyListKind, type UserListKind } from '../store/reports.ts';
import { authenticatorName } from '../webauthn/aaguid.ts';
import { grantRole, mayActOn, revokeRole, roleGrants } from '../directory/roles.ts';
import { findUserByEppn } from '../store/directory.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { filterOf, csvField, toCsv, type AuditQuery } from './audit-query.ts';
import {
  formText,
  orgContext,
  queryText,
  reasonOf,
  redirect,
  requireOrgAdmin,
  sendConsoleMessage,
  sendConsoleNotFound,
  sendHtml,
  staffActor,
  type ConsoleDeps,
  type Context,
} from './console-kit.ts';
import {
  auditPageView,
  offboardDoneView,
  offboardFormView,
  offboardPreviewView,
  REPORT_LISTS,
  reportView,
  staffView,
  upstreamView,
  type ReportList,
} from './console-org-views.ts';
import { enabledProvidersOf, listUpstreamProviders, upstreamLogoPath } from '../upstream/providers.ts';
import { DEFAULT_UNUSED_DAYS, organizationReport } from './report.ts';
import { checkEppnList, MAX_OFFBOARD, offboardUsers, previewOffboarding } from './offboarding.ts';

type OrgParams = { org_id: string };
type OrgRequest = FastifyRequest<{ Params: OrgParams }>;

// ---- audit trail ---------------------------------------------------------------------------

const AUDIT_PAGE = 50;
const MAX_EXPORT = 100_000;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

type AuditShown = { action: string; actor: string; since: string; until: string };

/** The form's fields as the audit query; a date "to" includes its whole day. */
function auditQueryOf(request: FastifyRequest): { query: AuditQuery; shown: AuditShown } {
  const text = (name: string) => queryText(request, name);
  const since = text('since');
  const until = text('until');
  const query: AuditQuery = {
    eppn: text('eppn'),
    action: text('action'),
    actor: text('actor'),
    since,
    until: until && DATE.test(until) ? `${until}T23:59:59.999Z` : until,
    before: text('before'),
  };
  const shown = { action: query.action ?? '', actor: query.actor ?? '', since: since ?? '', until: until ?? '' };
  return { query, shown };
}

/** The filter's own query string (no paging), for links. */
function filterQuery(request: FastifyRequest): string {
  const params = new URLSearchParams();
  for (const name of ['eppn', 'action', 'actor', 'since', 'until']) {
    const value = queryText(request, name);
    if (value !== undefined) params.set(name, value);
  }
  return params.toString();
}

/** A helpdesk sees the trail of a user they handle; the whole organization's is for its administrators. */
async function auditContext(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply);
  if (!ctx) return undefined;
  const { query, shown } = auditQueryOf(request);
  if (!query.eppn && !requireOrgAdmin(request, reply, ctx.staff, ctx.org)) return undefined;
  let parsed;
  try {
    parsed = filterOf(query, ctx.org.id);
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return { ...ctx, shown, error: err.message, parsed: undefined };
  }
  const realm = parsed.eppn?.slice(parsed.eppn.lastIndexOf('@') + 1);
  if (parsed.eppn && realm !== ctx.org.realm) {
    sendConsoleMessage(
      request,
      reply,
      404,
      {
        title: 'console.not_found_title',
        message: 'console.user_not_found',
        vars: { eppn: parsed.eppn },
      },
      ctx.staff.view,
    );
    return undefined;
  }
  return { ...ctx, shown, parsed, error: undefined };
}

async function auditPage(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await auditContext(deps, request, reply);
  if (!ctx) return reply;
  const filter = ctx.parsed ? { ...ctx.parsed.filter, limit: AUDIT_PAGE } : undefined;
  const records = filter ? (await listAuditEvents(deps.store.db, filter)).map(auditView) : [];
  const page = auditPageView(ctx.staff.view, {
    org: ctx.org,
    eppn: ctx.parsed?.eppn ?? null,
    filter: ctx.shown,
    actions: AUDIT_ACTIONS,
    records,
    query: filterQuery(request),
    next: records.length === AUDIT_PAGE ? String(records.at(-1)!.id) : undefined,
    paged: filter?.before !== undefined,
    error: ctx.error,
  });
  return sendHtml(reply, ctx.error ? 400 : 200, page);
}

async function auditExport(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply, format: 'csv' | 'json') {
  const ctx = await auditContext(deps, request, reply);
  if (!ctx) return reply;
  if (!ctx.parsed)
    return sendHtml(
      reply,
      400,
      auditPageView(ctx.staff.view, {
        org: ctx.org,
        eppn: null,
        filter: ctx.shown,
        actions: AUDIT_ACTIONS,
        records: [],
        query: '',
        paged: false,
        error: ctx.error,
      }),
    );
  const records: ReturnType<typeof auditView>[] = [];
  let before = ctx.parsed.filter.before;
  while (records.length < MAX_EXPORT) {
    const page = await listAuditEvents(deps.store.db, { ...ctx.parsed.filter, before, limit: 1000 });
    records.push(...page.map(auditView));
    if (page.length < 1000) break;
    before = page.at(-1)!.id;
  }
  const name = `audit-${ctx.org.id}${ctx.parsed.eppn ? `-${ctx.parsed.eppn.replace(/[^a-z0-9.@_-]/g, '_')}` : ''}`;
  reply
    .header('cache-control', 'no-store')
    .header('x-content-type-options', 'nosniff')
    .header('content-disposition', `attachment; filename="${name}.${format}"`);
  if (format === 'json') return reply.type('application/json; charset=utf-8').send(JSON.stringify(records));
  return reply.type('text/csv; charset=utf-8').send(toCsv(records));
}

// ---- report ----------------------------------------------------------------------------------

function daysOf(request: FastifyRequest): number {
  const raw = (request.query as Record<string, unknown>).days;
  const n = typeof raw === 'string' && /^[0-9]{1,4}$/.test(raw) ? Number(raw) : NaN;
  return n >= 1 && n <= 3650 ? n : DEFAULT_UNUSED_DAYS;
}

async function reportPage(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  const report = await organizationReport(deps, ctx.org.id, daysOf(request));
  const query = request.query as Record<string, unknown>;
  const count = (name: string) =>
    typeof query[name] === 'string' && /^[0-9]{1,7}$/.test(query[name]) ? query[name] : undefined;
  const [invited, skipped] = [count('invited'), count('skipped')];
  const invitations = {
    mail: deps.config.smtpUrl !== undefined,
    notice:
      invited === undefined
        ? undefined
        : ctx.staff.view.t('console.invited_all', { count: invited, skipped: skipped ?? '0' }),
  };
  return sendHtml(reply, 200, reportView(ctx.staff.view, ctx.org, report, invitations));
}

/** Everyone of the organization without a passkey is invited by e-mail (webauthn/invitations.ts). */
async function inviteAll(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true, post: true });
  if (!ctx) return reply;
  const setup = { publicUrl: deps.config.publicUrl, mail: deps.config.smtpUrl !== undefined };
  const result = await inviteUsers(
    deps.store,
    deps.keys,
    setup,
    { orgId: ctx.org.id, withoutPasskey: true },
    { actor: staffActor(ctx.staff, request), now: deps.now() },
  );
  const skipped = result.skipped.filter((s) => s.reason !== 'has_passkey').length;
  return redirect(reply, `/console/org/${ctx.org.id}/report?invited=${result.queued}&skipped=${skipped}`);
}

const PASSKEY_LISTS: Partial<Record<ReportList, PasskeyListKind>> = {
  'without-uv': 'without-uv',
  unused: 'unused',
  synced: 'synced',
  'device-bound': 'device-bound',
};
const USER_LISTS: Partial<Record<ReportList, UserListKind>> = {
  'without-passkey': 'without-passkey',
  'no-sign-in-method': 'no-sign-in-method',
};
const PASSKEY_COLUMNS = [
  'id',
  'eppn',
  'label',
  'authenticator',
  'aaguid',
  'created_at',
  'last_used_at',
  'user_verified',
  'synced',
];
const USER_COLUMNS = ['eppn', 'name', 'email'];
const line = (cells: unknown[]) => `${cells.map(csvField).join(',')}\r\n`;

/** One list as CSV, read in keyset pages so a million rows never sit in memory at once. */
async function* listCsv(deps: ConsoleDeps, orgId: number, list: ReportList, days: number): AsyncGenerator<string> {
  const db = deps.store.db;
  const cutoff = deps.now() - days * 86_400_000;
  const passkeys = PASSKEY_LISTS[list];
  const users = USER_LISTS[list];
  if (list === 'models') {
    yield line(['authenticator', 'aaguid', 'passkeys']);
    const report = await organizationReport(deps, orgId, days);
    for (const m of report.by_model) yield line([m.name ?? '', m.aaguid, m.passkeys]);
    return;
  }
  yield line(passkeys ? PASSKEY_COLUMNS : USER_COLUMNS);
  let afterId = 0;
  for (;;) {
    const rows = passkeys
      ? (await passkeyListPage(db, orgId, passkeys, { afterId, limit: 5000, cutoff })).map((r) => ({
          id: r.id,
          text: line([
            r.id,
            r.eppn,
            r.label,
            authenticatorName(r.aaguid, deps.config.aaguidData) ?? '',
            r.aaguid,
            iso(r.created_at),
            r.last_used_at === null ? '' : iso(r.last_used_at),
            r.mfa_verified === 1,
            r.backup_eligible === 1,
          ]),
        }))
      : (await userListPage(db, orgId, users!, { afterId, limit: 5000 })).map((r) => ({
          id: r.id,
          text: line([r.eppn, r.name, r.email]),
        }));
    if (rows.length) yield rows.map((r) => r.text).join('');
    if (rows.length < 5000) return;
    afterId = rows.at(-1)!.id;
  }
}

async function reportList(
  deps: ConsoleDeps,
  request: FastifyRequest<{ Params: OrgParams & { list: string } }>,
  reply: FastifyReply,
) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  const list = REPORT_LISTS.find((l) => `${l}.csv` === request.params.list);
  if (!list) return sendConsoleNotFound(request, reply, ctx.staff.view);
  return reply
    .header('cache-control', 'no-store')
    .header('x-content-type-options', 'nosniff')
    .header('content-disposition', `attachment; filename="report-${ctx.org.id}-${list}.csv"`)
    .type('text/csv; charset=utf-8')
    .send(Readable.from(listCsv(deps, ctx.org.id, list, daysOf(request))));
}

// ---- bulk offboarding ------------------------------------------------------------------------

async function offboardForm(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  return sendHtml(reply, 200, offboardFormView(ctx.staff.view, { org: ctx.org, list: '' }));
}

/** The posted list, checked: the eppns, or the page that says what is wrong (nothing done). */
function postedList(request: FastifyRequest, reply: FastifyReply, ctx: Context): string[] | undefined {
  const text = formText(request, 'eppns', 2 * 1024 * 1024) ?? '';
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  const { t } = ctx.staff.view;
  const fail = (error: string) => {
    sendHtml(reply, 400, offboardFormView(ctx.staff.view, { org: ctx.org, list: text.slice(0, 200_000), error }));
    return undefined;
  };
  if (lines.length === 0) return fail(t('console.offboard_empty'));
  if (lines.length > MAX_OFFBOARD) return fail(t('console.offboard_too_long', { max: MAX_OFFBOARD }));
  const checked = checkEppnList(lines, ctx.org.realm);
  if (!checked.ok) return fail(t('console.offboard_bad', { n: checked.bad, lines: checked.problems.join('; ') }));
  return checked.eppns;
}

/** What offboarding the list would do, and whom on it the staff member may not act on (directory/roles.ts). */
async function previewFor(deps: ConsoleDeps, ctx: Context, eppns: string[]) {
  const preview = await previewOffboarding(deps, ctx.org.id, eppns);
  const stronger: string[] = [];
  const actor = { type: 'user' as const, id: ctx.staff.user.eppn };
  for (const { eppn } of preview.found) {
    const user = await findUserByEppn(deps.store.db, eppn);
    if (user && !(await mayActOn(deps.store.db, actor, user))) stronger.push(eppn);
  }
  return { ...preview, stronger };
}

async function offboardPreview(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true, post: true });
  if (!ctx) return reply;
  const eppns = postedList(request, reply, ctx);
  if (!eppns) return reply;
  const preview = await previewFor(deps, ctx, eppns);
  return sendHtml(reply, 200, offboardPreviewView(ctx.staff.view, { org: ctx.org, eppns, ...preview }));
}

async function offboard(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true, post: true });
  if (!ctx) return reply;
  const eppns = postedList(request, reply, ctx);
  if (!eppns) return reply;
  const reason = reasonOf(request);
  if (!reason) {
    const preview = await previewFor(deps, ctx, eppns);
    const error = ctx.staff.view.t('console.error_reason');
    const view = { org: ctx.org, eppns, ...preview, error, reason: formText(request, 'reason', 500) };
    return sendHtml(reply, 400, offboardPreviewView(ctx.staff.view, view));
  }
  const who = staffActor(ctx.staff, request);
  let done;
  try {
    done = await offboardUsers(deps, ctx.org.id, eppns, { who, requestId: request.id, ip: request.ip, reason });
  } catch (err) {
    // someone listed has a role as strong as the staff member's: nothing was done
    if (!(err instanceof AppError) || err.status !== 403) throw err;
    const preview = await previewFor(deps, ctx, eppns);
    const view = { org: ctx.org, eppns, ...preview, error: err.message, reason };
    return sendHtml(reply, 403, offboardPreviewView(ctx.staff.view, view));
  }
  request.log.info({ staff: ctx.staff.user.eppn, org_id: ctx.org.id, users: done.found.length }, 'bulk offboarding');
  return sendHtml(reply, 200, offboardDoneView(ctx.staff.view, { org: ctx.org, ...done }));
}

// ---- staff -----------------------------------------------------------------------------------

async function renderStaff(
  deps: ConsoleDeps,
  reply: FastifyReply,
  ctx: Context,
  status: number,
  flash: { notice?: string; error?: string; eppn?: string } = {},
) {
  const grants = await roleGrants(deps.store, ctx.org.id);
  const rows = grants.map((g) => ({ eppn: g.eppn, role: g.role, grantedAt: g.granted_at }));
  return sendHtml(reply, status, staffView(ctx.staff.view, { org: ctx.org, rows, ...flash }));
}

async function staffPage(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  return ctx ? renderStaff(deps, reply, ctx, 200) : reply;
}

async function changeHelpdesk(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply, grant: boolean) {
  const ctx = await orgContext(deps, request, reply, { admin: true, post: true });
  if (!ctx) return reply;
  const eppn = (formText(request, 'eppn', 320) ?? '').trim().toLowerCase();
  const { t } = ctx.staff.view;
  const actor = staffActor(ctx.staff, request);
  const change = { eppn, role: 'helpdesk' as const, orgId: ctx.org.id };
  try {
    if (!eppn || eppn.slice(eppn.lastIndexOf('@') + 1) !== ctx.org.realm)
      throw new AppError(400, t('console.bad_eppn'));
    await (grant ? grantRole : revokeRole)(deps.store, change, { actor, now: deps.now() });
  } catch (err) {
    if (!(err instanceof AppError) || err.status >= 500) throw err;
    // Messages of the roles' rules name the user or the role; an unknown user reads as a bad username.
    const error = err.status === 404 && grant ? t('console.bad_eppn') : err.message;
    return renderStaff(deps, reply, ctx, err.status === 409 ? 409 : 400, { error, eppn });
  }
  return renderStaff(deps, reply, ctx, 200, {
    notice: t(grant ? 'console.staff_granted' : 'console.staff_revoked', { eppn }),
  });
}

// ---- upstream identity providers (read-only) -----------------------------------------------------

async function upstreamPage(deps: ConsoleDeps, request: OrgRequest, reply: FastifyReply) {
  const ctx = await orgContext(deps, request, reply, { admin: true });
  if (!ctx) return reply;
  // the logos the sign-in page shows, of the enabled providers (a disabled one's is not served)
  const logos = new Map(
    (await enabledProvidersOf(deps.store, ctx.org.id)).map((p) => [p.id, upstreamLogoPath(p)] as const),
  );
  const rows = (await listUpstreamProviders(deps.store, ctx.org.id)).map((p) => ({
    name: p.name,
    logo: logos.get(p.id),
    type: p.type,
    enabled: p.enabled,
    linkBy: String(p.link_by),
    createUsers: p.create_users === true,
    namespace: typeof p.namespace === 'string' ? p.namespace : null,
  }));
  return sendHtml(reply, 200, upstreamView(ctx.staff.view, { org: ctx.org, rows }));
}

export function organizationPages(deps: ConsoleDeps) {
  return async function consoleOrganizationPages(app: FastifyInstance) {
    const base = '/console/org/:org_id';
    app.get<{ Params: OrgParams }>(`${base}/audit`, (q, r) => auditPage(deps, q, r));
    app.get<{ Params: OrgParams }>(`${base}/audit.csv`, (q, r) => auditExport(deps, q, r, 'csv'));
    app.get<{ Params: OrgParams }>(`${base}/audit.json`, (q, r) => auditExport(deps, q, r, 'json'));
    app.get<{ Params: OrgParams }>(`${base}/report`, (q, r) => reportPage(deps, q, r));
    app.post<{ Params: OrgParams }>(`${base}/invite`, (q, r) => inviteAll(deps, q, r));
    app.get<{ Params: OrgParams & { list: string } }>(`${base}/report/:list`, (q, r) => reportList(deps, q, r));
    app.get<{ Params: OrgParams }>(`${base}/offboard`, (q, r) => offboardForm(deps, q, r));
    app.post<{ Params: OrgParams }>(`${base}/offboard/preview`, (q, r) => offboardPreview(deps, q, r));
    app.post<{ Params: OrgParams }>(`${base}/offboard`, (q, r) => offboard(deps, q, r));
    app.get<{ Params: OrgParams }>(`${base}/staff`, (q, r) => staffPage(deps, q, r));
    app.get<{ Params: OrgParams }>(`${base}/upstream`, (q, r) => upstreamPage(deps, q, r));
    app.post<{ Params: OrgParams }>(`${base}/staff`, (q, r) => changeHelpdesk(deps, q, r, true));
    app.post<{ Params: OrgParams }>(`${base}/staff/revoke`, (q, r) => changeHelpdesk(deps, q, r, false));
  };
}
