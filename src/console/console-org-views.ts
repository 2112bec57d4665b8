// Console page templates for the whole organization: the audit trail, the report, bulk
// offboarding and the staff list.
import { html, raw, type Html } from '../ui/html.ts';
import { alert, hidden, notice } from '../ui/layout.ts';
import { formatTime } from '../ui/i18n.ts';
import type { auditView } from '../audit/index.ts';
import { consolePage, userPath, type ConsoleView, type OrgRef } from './console-views.ts';
import { ADOPTION_HISTORY_DAYS, type OrganizationReport } from './report.ts';
import { adoptionChart, type Stage } from './adoption-chart.ts';
import { ADOPTION_STAGES } from '../store/adoption.ts';

type AuditRecord = ReturnType<typeof auditView>;

export interface AuditPageView {
  org: OrgRef;
  /** the user whose trail this is, when it is one user's */
  eppn: string | null;
  filter: { action: string; actor: string; since: string; until: string };
  actions: readonly string[];
  records: AuditRecord[];
  /** query strings (without before) of this filter, for the export links and paging */
  query: string;
  next?: string;
  paged: boolean;
  error?: string;
}

function auditFilterForm(v: ConsoleView, a: AuditPageView): Html {
  const { t } = v;
  const options = [
    html`<option value="">${t('console.audit_any_action')}</option>`,
    ...a.actions.map(
      (name) => html`<option value="${name}"${raw(name === a.filter.action ? ' selected' : '')}>${name}</option>`,
    ),
  ];
  return html`<form method="get" action="/console/org/${String(a.org.id)}/audit" class="filters" aria-label="${t('console.audit_filter')}">
${a.eppn ? hidden('eppn', a.eppn) : html``}
<div><label for="f-action">${t('console.audit_action')}</label><select id="f-action" name="action">${options}</select></div>
<div><label for="f-actor">${t('console.audit_actor')}</label><input type="text" id="f-actor" name="actor" value="${a.filter.actor}" maxlength="320"></div>
<div><label for="f-since">${t('console.audit_since')}</label><input type="date" id="f-since" name="since" value="${a.filter.since}"></div>
<div><label for="f-until">${t('console.audit_until')}</label><input type="date" id="f-until" name="until" value="${a.filter.until}"></div>
<div class="filters-submit"><button type="submit" class="primary narrow">${t('console.audit_apply')}</button></div>
</form>`;
}

function details(r: AuditRecord): string {
  const parts: string[] = [];
  if (r.passkey_ids.length) parts.push(`passkeys ${r.passkey_ids.join(', ')}`);
  const d = r.details as Record<string, unknown> | null;
  if (d && typeof d === 'object')
    for (const [k, value] of Object.entries(d))
      parts.push(`${k}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return parts.join('; ');
}

export function auditPageView(v: ConsoleView, a: AuditPageView): string {
  const { t } = v;
  const title = a.eppn ? t('console.audit_user_title', { eppn: a.eppn }) : t('console.audit_title');
  const base = `/console/org/${a.org.id}/audit`;
  const table = a.records.length
    ? html`<div class="table-wrap"><table>
<caption class="visually-hidden">${title}</caption>
<thead><tr><th scope="col">${t('console.col_time')}</th><th scope="col">${t('console.col_action')}</th><th scope="col">${t('console.col_actor')}</th><th scope="col">${t('console.col_subject')}</th><th scope="col">${t('console.col_details')}</th></tr></thead>
<tbody>${a.records.map(
        (
          r,
        ) => html`<tr><td><time datetime="${r.at}">${formatTime(Date.parse(r.at), v.frame.locale)}</time></td><td>${r.action}</td><td>${r.actor_type}: ${r.actor ?? ''}</td>
<td>${r.eppn ? html`<a href="${userPath(a.org.id, r.eppn)}">${r.eppn}</a>` : html`${r.subject ?? ''}`}</td><td class="details">${details(r)}</td></tr>`,
      )}</tbody></table></div>`
    : html`<p class="notice" role="status">${t('console.audit_none')}</p>`;
  const sep = a.query ? '&' : '';
  const body = html`<h1>${title}</h1>
${alert(a.error)}
${auditFilterForm(v, a)}
<p class="downloads"><a href="${base}.csv?${a.query}">${t('console.download_csv')}</a> · <a href="${base}.json?${a.query}">${t('console.download_json')}</a></p>
${table}
<p class="pager">${a.paged ? html`<a href="${base}?${a.query}">${t('console.audit_newest')}</a> ` : html``}${a.next ? html`<a href="${base}?${a.query}${sep}before=${a.next}" rel="next">${t('console.audit_older')}</a>` : html``}</p>`;
  return consolePage(v, title, body, a.org);
}

export const REPORT_LISTS = [
  'models',
  'without-uv',
  'unused',
  'synced',
  'device-bound',
  'without-passkey',
  'no-sign-in-method',
] as const;
export type ReportList = (typeof REPORT_LISTS)[number];

/** The report's invitations: (with a mail server) the form inviting everyone without a passkey; the funnel counts the invited. */
export interface ReportInvitations {
  mail: boolean;
  notice?: string;
}

function invitationsSection(v: ConsoleView, org: OrgRef, i: ReportInvitations): Html {
  const { t } = v;
  if (!i.mail || !v.csrf) return html``;
  return html`<h2>${t('console.invite_all_title')}</h2>
${notice(i.notice)}
<p>${t('console.invite_all_text')}</p>
<form method="post" action="/console/org/${String(org.id)}/invite">
${hidden(v.csrf.field, v.csrf.token)}
<button type="submit" class="primary">${t('console.invite_all')}</button>
</form>`;
}

export function reportView(
  v: ConsoleView,
  org: OrgRef,
  r: OrganizationReport,
  invitations?: ReportInvitations,
): string {
  const { t } = v;
  const base = `/console/org/${org.id}/report`;
  const csv = (list: ReportList) => `${base}/${list}.csv?days=${r.unused_days}`;
  const figure = (label: string, value: string, list?: ReportList) =>
    html`<tr><th scope="row">${label}</th><td class="num">${value}</td><td>${list ? html`<a href="${csv(list)}">${t('console.download_csv')}<span class="visually-hidden">: ${label}</span></a>` : html``}</td></tr>`;
  const body = html`<h1>${t('console.report_title')}</h1>
<form method="get" action="${base}" class="filters">
<div><label for="days">${t('console.report_days')}</label><input type="number" id="days" name="days" min="1" max="3650" value="${String(r.unused_days)}"></div>
<div class="filters-submit"><button type="submit" class="primary narrow">${t('console.audit_apply')}</button></div>
</form>
<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.report_title')}</caption>
<thead><tr><th scope="col">${t('console.col_figure')}</th><th scope="col" class="num">${t('console.col_value')}</th><th scope="col">${t('console.report_lists')}</th></tr></thead>
<tbody>
${figure(t('console.report_users'), String(r.users))}
${figure(t('console.report_with_passkey'), String(r.users_with_passkey))}
${figure(t('console.report_without_passkey'), String(r.users - r.users_with_passkey), 'without-passkey')}
${figure(t('console.report_coverage'), `${r.coverage_percent} %`)}
${figure(t('console.report_no_method'), String(r.users_without_sign_in_method), 'no-sign-in-method')}
${figure(t('console.report_passkeys'), String(r.passkeys))}
${figure(t('console.report_synced'), String(r.synced), 'synced')}
${figure(t('console.report_device_bound'), String(r.device_bound), 'device-bound')}
${figure(t('console.report_without_uv'), String(r.without_user_verification), 'without-uv')}
${figure(t('console.report_unused', { days: r.unused_days }), String(r.unused), 'unused')}
</tbody></table></div>
${invitations ? invitationsSection(v, org, invitations) : html``}
<h2>${t('console.report_by_model')}</h2>
<p><a href="${csv('models')}">${t('console.download_csv')}<span class="visually-hidden">: ${t('console.report_by_model')}</span></a></p>
<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.report_by_model')}</caption>
<thead><tr><th scope="col">${t('console.col_model')}</th><th scope="col">AAGUID</th><th scope="col" class="num">${t('console.col_count')}</th></tr></thead>
<tbody>${r.by_model.map((m) => html`<tr><td>${m.name ?? t('console.unknown_model')}</td><td class="mono">${m.aaguid}</td><td class="num">${String(m.passkeys)}</td></tr>`)}</tbody>
</table></div>
${adoptionSection(v, r)}`;
  return consolePage(v, t('console.report_title'), body, org);
}

/** The funnel of the move: today's figures, the chart of the last 90 days, and its figures by day. */
function adoptionSection(v: ConsoleView, r: OrganizationReport): Html {
  const { t } = v;
  const labels = Object.fromEntries(ADOPTION_STAGES.map((s) => [s, t(`console.adoption_${s}`)])) as Record<
    Stage,
    string
  >;
  const share = (n: number) =>
    r.adoption.users === 0 ? '' : `${String(Math.round((1000 * n) / r.adoption.users) / 10)} %`;
  const chartTitle = t('console.adoption_chart', { days: ADOPTION_HISTORY_DAYS });
  return html`<h2 id="adoption">${t('console.adoption_title')}</h2>
<p>${t('console.adoption_text')}</p>
<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.adoption_title')}</caption>
<thead><tr><th scope="col">${t('console.col_stage')}</th><th scope="col" class="num">${t('console.col_users')}</th><th scope="col" class="num">${t('console.adoption_share')}</th></tr></thead>
<tbody>${ADOPTION_STAGES.map((s) => html`<tr><th scope="row">${labels[s]}</th><td class="num">${String(r.adoption[s])}</td><td class="num">${share(r.adoption[s])}</td></tr>`)}</tbody>
</table></div>
<h3>${chartTitle}</h3>
${adoptionChart(r.adoption_history, ADOPTION_HISTORY_DAYS, labels, {
  title: chartTitle,
  describe: t('console.adoption_describe', r.adoption),
})}
<details><summary>${t('console.adoption_by_day')}</summary>
<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.adoption_by_day')}</caption>
<thead><tr><th scope="col">${t('console.col_day')}</th>${ADOPTION_STAGES.map((s) => html`<th scope="col" class="num">${labels[s]}</th>`)}</tr></thead>
<tbody>${[...r.adoption_history].reverse().map((d) => html`<tr><th scope="row"><time datetime="${d.day}">${d.day}</time></th>${ADOPTION_STAGES.map((s) => html`<td class="num">${String(d[s])}</td>`)}</tr>`)}</tbody>
</table></div>
</details>`;
}

export interface OffboardView {
  org: OrgRef;
  list: string;
  error?: string;
}

export function offboardFormView(v: ConsoleView, o: OffboardView): string {
  const { t } = v;
  const body = html`<h1>${t('console.offboard_title')}</h1>
${alert(o.error)}
<p>${t('console.offboard_text')}</p>
<form method="post" action="/console/org/${String(o.org.id)}/offboard/preview">
${v.csrf ? hidden(v.csrf.field, v.csrf.token) : html``}
<label for="eppns">${t('console.offboard_list')}</label>
<textarea id="eppns" name="eppns" rows="10" spellcheck="false" autocomplete="off"${raw(o.error ? ' aria-invalid="true"' : '')}>${o.list}</textarea>
<label for="eppn-file">${t('console.offboard_file')}</label>
<input type="file" id="eppn-file" accept=".txt,.csv,text/plain,text/csv" data-fills="eppns">
<div class="actions"><button type="submit" class="primary">${t('console.offboard_preview')}</button></div>
</form>`;
  return consolePage(v, t('console.offboard_title'), body, o.org, ['/console/static/console.js']);
}

export interface OffboardPreview {
  org: OrgRef;
  eppns: string[];
  found: { eppn: string; passkeys: number }[];
  notFound: string[];
  passkeys: number;
  /** listed users whose roles are as strong as the staff member's: the list is not offered for offboarding */
  stronger: string[];
  error?: string;
  reason?: string;
}

function foundTable(v: ConsoleView, p: { org: OrgRef; found: { eppn: string; passkeys: number }[] }): Html {
  const { t } = v;
  if (!p.found.length) return html``;
  return html`<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.offboard_preview_title')}</caption>
<thead><tr><th scope="col">${t('console.col_user')}</th><th scope="col" class="num">${t('console.col_passkeys')}</th></tr></thead>
<tbody>${p.found.map((f) => html`<tr><td><a href="${userPath(p.org.id, f.eppn)}">${f.eppn}</a></td><td class="num">${String(f.passkeys)}</td></tr>`)}</tbody></table></div>`;
}

function notFoundList(v: ConsoleView, notFound: string[]): Html {
  if (!notFound.length) return html``;
  return html`<h2>${v.t('console.offboard_not_found', { n: notFound.length })}</h2><ul class="plain">${notFound.map((e) => html`<li>${e}</li>`)}</ul>`;
}

export function offboardPreviewView(v: ConsoleView, p: OffboardPreview): string {
  const { t } = v;
  const stronger = p.stronger.length
    ? html`<p class="alert" id="offboard-stronger">${t('console.offboard_stronger', { n: p.stronger.length, eppns: p.stronger.slice(0, 20).join(', ') })}</p>
<p><a href="/console/org/${String(p.org.id)}/offboard" class="button secondary">${t('console.cancel')}</a></p>`
    : undefined;
  const form = stronger
    ? stronger
    : p.found.length
      ? html`<form method="post" action="/console/org/${String(p.org.id)}/offboard">
${v.csrf ? hidden(v.csrf.field, v.csrf.token) : html``}
${hidden('eppns', p.eppns.join('\n'))}
<label for="reason">${t('console.reason')}</label>
<p class="hint" id="reason-hint">${t('console.reason_hint')}</p>
<input type="text" id="reason" name="reason" required maxlength="500" value="${p.reason ?? ''}" aria-describedby="reason-hint"${raw(p.error ? ' aria-invalid="true"' : '')}>
<div class="actions"><button type="submit" class="danger">${t('console.confirm')}</button>
<a href="/console/org/${String(p.org.id)}/offboard" class="button secondary">${t('console.cancel')}</a></div>
</form>`
      : html`<p class="notice" role="status">${t('console.offboard_nothing')}</p>`;
  const body = html`<h1>${t('console.offboard_preview_title')}</h1>
${alert(p.error)}
<p>${t('console.offboard_found', { n: p.found.length, passkeys: p.passkeys })}</p>
${foundTable(v, p)}
${notFoundList(v, p.notFound)}
${form}`;
  return consolePage(v, t('console.offboard_preview_title'), body, p.org);
}

export function offboardDoneView(
  v: ConsoleView,
  d: { org: OrgRef; found: { eppn: string; passkeys: number }[]; notFound: string[]; passkeys: number },
): string {
  const { t } = v;
  const body = html`<h1>${t('console.offboard_done_title')}</h1>
${notice(t('console.offboard_done', { n: d.found.length, passkeys: d.passkeys }))}
${foundTable(v, d)}
${notFoundList(v, d.notFound)}`;
  return consolePage(v, t('console.offboard_done_title'), body, d.org);
}

export interface StaffRow {
  eppn: string;
  role: string;
  grantedAt: string;
}

export function staffView(
  v: ConsoleView,
  s: { org: OrgRef; rows: StaffRow[]; notice?: string; error?: string; eppn?: string },
): string {
  const { t } = v;
  const base = `/console/org/${s.org.id}/staff`;
  const roleName = (role: string) =>
    role === 'helpdesk' || role === 'org-admin' || role === 'operator' ? t(`console.role_${role}`) : role;
  const rows = s.rows.map(
    (
      r,
    ) => html`<tr><td>${r.eppn}</td><td>${roleName(r.role)}</td><td><time datetime="${r.grantedAt}">${formatTime(Date.parse(r.grantedAt), v.frame.locale)}</time></td>
<td>${r.role === 'helpdesk' && v.csrf ? html`<form method="post" action="${base}/revoke">${hidden(v.csrf.field, v.csrf.token)}${hidden('eppn', r.eppn)}<button type="submit" class="secondary small" aria-label="${t('console.revoke')}: ${r.eppn}">${t('console.revoke')}</button></form>` : html``}</td></tr>`,
  );
  const body = html`<h1>${t('console.staff_title')}</h1>
${notice(s.notice)}${alert(s.error)}
<p>${t('console.staff_text')}</p>
<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.staff_title')}</caption>
<thead><tr><th scope="col">${t('console.col_user')}</th><th scope="col">${t('console.col_role')}</th><th scope="col">${t('console.col_granted')}</th><th scope="col">${t('console.col_actions')}</th></tr></thead>
<tbody>${rows}</tbody></table></div>
<form method="post" action="${base}">
${v.csrf ? hidden(v.csrf.field, v.csrf.token) : html``}
<label for="staff-eppn">${t('console.staff_eppn')}</label>
<div class="row"><input type="text" id="staff-eppn" name="eppn" maxlength="320" autocomplete="off" value="${s.eppn ?? ''}"${raw(s.error ? ' aria-invalid="true"' : '')}>
<button type="submit" class="primary narrow">${t('console.staff_grant')}</button></div>
</form>`;
  return consolePage(v, t('console.staff_title'), body, s.org);
}

export interface UpstreamRow {
  name: string;
  /** its logo's URL, as the sign-in page shows it */
  logo?: string;
  type: string;
  enabled: boolean;
  linkBy: string;
  createUsers: boolean;
  namespace: string | null;
}

/** The organization's upstream identity providers, read-only and without any secret. */
export function upstreamView(v: ConsoleView, u: { org: OrgRef; rows: UpstreamRow[] }): string {
  const { t } = v;
  const yes = (b: boolean) => t(b ? 'console.yes' : 'console.no');
  const rows = u.rows.map(
    (r) =>
      html`<tr><th scope="row">${r.logo ? html`<img class="upstream-logo" src="${r.logo}" alt="">` : html``}${r.name}</th><td>${r.type === 'saml' ? t('console.protocol_saml') : t('console.protocol_oidc')}</td><td>${yes(r.enabled)}</td><td>${r.linkBy}</td><td>${yes(r.createUsers)}</td><td>${r.namespace ?? ''}</td></tr>`,
  );
  const table = html`<div class="table-wrap" tabindex="0" role="region" aria-label="${t('console.upstream_title')}"><table>
<caption class="visually-hidden">${t('console.upstream_title')}</caption>
<thead><tr><th scope="col">${t('console.col_name')}</th><th scope="col">${t('console.col_type')}</th><th scope="col">${t('console.col_enabled')}</th><th scope="col">${t('console.col_link_by')}</th><th scope="col">${t('console.col_create_users')}</th><th scope="col">${t('console.col_namespace')}</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
  const body = html`<h1>${t('console.upstream_title')}</h1>
<p>${t('console.upstream_text')}</p>
${u.rows.length ? table : html`<p>${t('console.upstream_none')}</p>`}`;
  return consolePage(v, t('console.upstream_title'), body, u.org);
}
