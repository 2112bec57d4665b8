// Console page templates: the shell (navigation, who is signed in), the organization chooser, the
// search, a user's page, the deletion confirmations and the recovery link. Every interpolation is
// escaped; the pages wear the sign-in pages' look (src/ui/layout.ts), widened for tables.
import { renderSVG } from 'uqr';
import { html, raw, type Html } from '../ui/html.ts';
import { formatTime } from '../ui/i18n.ts';
import { alert, hidden, layout, notice, type CsrfField, type Frame } from '../ui/layout.ts';
import type { StaffAccess } from '../directory/roles.ts';
import type { ConsoleKey, ConsoleTranslate } from './console-i18n.ts';

export interface ConsoleView {
  frame: Frame;
  t: ConsoleTranslate;
  staff?: { eppn: string; access: StaffAccess; noRole?: boolean };
  csrf?: CsrfField;
}

export interface OrgRef {
  id: number;
  name: string;
}

const adminOf = (v: ConsoleView, orgId: number) =>
  v.staff !== undefined && (v.staff.access.operator || v.staff.access.orgAdmin.includes(orgId));

function orgNav(v: ConsoleView, org: OrgRef | undefined): Html {
  if (!org || !v.staff || v.staff.noRole) return html``;
  const { t } = v;
  const base = `/console/org/${org.id}`;
  const links: [string, ConsoleKey][] = [[base, 'console.nav_search']];
  if (adminOf(v, org.id))
    links.push(
      [`${base}/audit`, 'console.nav_audit'],
      [`${base}/report`, 'console.nav_report'],
      [`${base}/offboard`, 'console.nav_offboard'],
      [`${base}/staff`, 'console.nav_staff'],
      [`${base}/applications`, 'console.nav_applications'],
      [`${base}/upstream`, 'console.nav_upstream'],
    );
  const many = v.staff.access.operator || v.staff.access.helpdesk.length > 1;
  if (many) links.push(['/console', 'console.nav_organizations']);
  return html`<ul>${links.map(([href, key]) => html`<li><a href="${href}">${t(key)}</a></li>`)}</ul>`;
}

function consoleHeader(v: ConsoleView, org: OrgRef | undefined): Html {
  const { t } = v;
  if (!v.staff) return html``;
  const signOut = v.csrf
    ? html`<form method="post" action="/console/sign-out" class="inline">${hidden(v.csrf.field, v.csrf.token)}<button type="submit" class="link">${t('console.sign_out')}</button></form>`
    : html``;
  return html`<nav class="console" aria-label="${t('console.nav')}">
<p class="console-name"><a href="/console">${t('console.title')}</a>${org ? html` · ${org.name}` : html``}</p>
${orgNav(v, org)}
<p class="console-who">${t('console.signed_in_as', { eppn: v.staff.eppn })} ${signOut}</p>
</nav>`;
}

/** A console page: the shell around a body. */
export function consolePage(v: ConsoleView, title: string, body: Html, org?: OrgRef, scripts: string[] = []): string {
  return layout(v.frame, `${title} – ${v.t('console.title')}`, body, scripts, {
    wide: true,
    header: consoleHeader(v, org),
  });
}

export function messageView(v: ConsoleView, title: string, message: string, reference: string): string {
  const body = html`<h1>${title}</h1>
<p class="message">${message}</p>
${v.staff ? html`` : html`<p><a href="/console">${v.t('console.signin_again')}</a></p>`}
<p class="hint reference">${v.frame.t('error.reference', { id: reference })}</p>`;
  return consolePage(v, title, body);
}

export function organizationsView(v: ConsoleView, orgs: OrgRef[]): string {
  const { t } = v;
  const body = html`<h1>${t('console.organizations_title')}</h1>
<ul class="plain">${orgs.map((o) => html`<li><a href="/console/org/${String(o.id)}">${t('console.organization', { id: o.id, name: o.name })}</a></li>`)}</ul>`;
  return consolePage(v, t('console.organizations_title'), body);
}

export interface SearchHit {
  eppn: string;
  name: string;
  email: string | null;
  passkeys: number;
  disabled: boolean;
}

export function searchView(v: ConsoleView, org: OrgRef, q: string, hits: SearchHit[] | undefined, more: number) {
  const { t } = v;
  const base = `/console/org/${org.id}`;
  const table = (rows: SearchHit[]) => html`<div class="table-wrap"><table>
<caption>${t('console.search_results', { q })}</caption>
<thead><tr><th scope="col">${t('console.col_user')}</th><th scope="col">${t('console.col_name')}</th><th scope="col">${t('console.col_email')}</th><th scope="col" class="num">${t('console.col_passkeys')}</th></tr></thead>
<tbody>${rows.map(
    (h) =>
      html`<tr><td><a href="${base}/users/${encodeURIComponent(h.eppn)}">${h.eppn}</a></td><td>${h.name}</td><td>${h.email ?? ''}</td><td class="num">${String(h.passkeys)}</td></tr>`,
  )}</tbody></table></div>`;
  const results =
    hits === undefined
      ? html``
      : hits.length === 0
        ? html`<p class="notice" role="status">${t('console.search_none', { q })}</p>`
        : html`${table(hits)}${more ? html`<p class="hint">${t('console.search_more', { n: more })}</p>` : html``}`;
  const body = html`<h1>${t('console.search_title')}</h1>
<form method="get" action="${base}" role="search" class="search">
<label for="q">${t('console.search_label')}</label>
<p class="hint" id="q-hint">${t('console.search_hint')}</p>
<div class="row"><input type="search" id="q" name="q" value="${q}" maxlength="200" autocomplete="off" aria-describedby="q-hint" autofocus>
<button type="submit" class="primary narrow">${t('console.search_button')}</button></div>
</form>
${results}`;
  return consolePage(v, t('console.search_title'), body, org);
}

export interface ConsolePasskey {
  id: number;
  label: string;
  authenticator: string | undefined;
  icon: string | undefined;
  iconDark: string | undefined;
  createdAt: number;
  lastUsedAt: number | null;
  userVerified: boolean;
  synced: boolean;
}

export interface ConsoleLink {
  id: number;
  state: 'usable' | 'used' | 'revoked' | 'expired';
  expires: string;
  createdBy: string;
}

/** An upstream identity linked to the user (docs/upstream.md). */
export interface ConsoleUpstreamLink {
  upstream: string;
  name: string;
  subject: string;
  linkedAt: string;
}

export interface UserPageView {
  org: OrgRef;
  user: { eppn: string; name: string; email: string | null; disabled: boolean; hasPassword: boolean };
  passkeys: ConsolePasskey[];
  links: ConsoleLink[];
  upstreamLinks: ConsoleUpstreamLink[];
  /** false when the user's roles are as strong as the staff member's: no action is offered (directory/roles.ts) */
  mayAct: boolean;
  /** a mail server is configured: invitations can be sent */
  mail?: boolean;
  notice?: string;
  error?: string;
}

export function timeOf(v: ConsoleView, ms: number | null): Html {
  if (ms === null) return html`${v.t('console.never')}`;
  return html`<time datetime="${new Date(ms).toISOString()}">${formatTime(ms, v.frame.locale)}</time>`;
}

function icon(p: ConsolePasskey): Html {
  if (!p.icon) return html``;
  const img = html`<img class="authenticator-icon" src="${p.icon}" alt="" width="20" height="20">`;
  return p.iconDark
    ? html`<picture><source srcset="${p.iconDark}" media="(prefers-color-scheme: dark)">${img}</picture> `
    : html`${img} `;
}

export const userPath = (orgId: number, eppn: string) => `/console/org/${orgId}/users/${encodeURIComponent(eppn)}`;

function passkeyTable(v: ConsoleView, page: UserPageView): Html {
  const { t } = v;
  const path = userPath(page.org.id, page.user.eppn);
  if (page.passkeys.length === 0) return html`<p>${t('console.passkeys_none')}</p>`;
  const rows = page.passkeys.map(
    (p) => html`<tr>
<th scope="row">${p.label}</th>
<td>${icon(p)}${p.authenticator ?? t('console.unknown_model')}</td>
<td>${timeOf(v, p.createdAt)}</td>
<td>${timeOf(v, p.lastUsedAt)}</td>
<td>${t(p.userVerified ? 'console.yes' : 'console.no')}</td>
<td>${t(p.synced ? 'console.synced' : 'console.device_bound')}</td>
${page.mayAct ? html`<td><form method="get" action="${path}/passkeys/${String(p.id)}/delete"><button type="submit" class="danger small" aria-label="${t('console.delete')}: ${p.label}">${t('console.delete')}</button></form></td>` : html``}
</tr>`,
  );
  const actions = page.mayAct ? html`<th scope="col">${t('console.col_actions')}</th>` : html``;
  return html`<div class="table-wrap"><table>
<caption class="visually-hidden">${t('console.passkeys_title')}</caption>
<thead><tr><th scope="col">${t('console.col_label')}</th><th scope="col">${t('console.col_authenticator')}</th><th scope="col">${t('console.col_created')}</th><th scope="col">${t('console.col_last_used')}</th><th scope="col">${t('console.col_uv')}</th><th scope="col">${t('console.col_storage')}</th>${actions}</tr></thead>
<tbody>${rows}</tbody></table></div>
${page.mayAct ? html`<form method="get" action="${path}/delete-all" class="actions"><button type="submit" class="danger">${t('console.delete_all')}</button></form>` : html``}`;
}

const TTL_CHOICES: { seconds: number; key: ConsoleKey; n: number }[] = [
  { seconds: 3600, key: 'console.ttl_hours', n: 1 },
  { seconds: 8 * 3600, key: 'console.ttl_hours', n: 8 },
  { seconds: 24 * 3600, key: 'console.ttl_hours', n: 24 },
  { seconds: 3 * 86400, key: 'console.ttl_days', n: 3 },
  { seconds: 7 * 86400, key: 'console.ttl_days', n: 7 },
];
export const TTL_SECONDS = TTL_CHOICES.map((c) => c.seconds);

function recoverySection(v: ConsoleView, page: UserPageView): Html {
  const { t } = v;
  const path = userPath(page.org.id, page.user.eppn);
  const options = TTL_CHOICES.map(
    (c) =>
      html`<option value="${String(c.seconds)}"${raw(c.seconds === 86400 ? ' selected' : '')}>${t(c.key, { n: c.n })}</option>`,
  );
  const links = page.links.length
    ? html`<div class="table-wrap"><table>
<caption>${t('console.recovery_links')}</caption>
<thead><tr><th scope="col">${t('console.col_state')}</th><th scope="col">${t('console.col_expires')}</th><th scope="col">${t('console.col_created_by')}</th><th scope="col">${t('console.col_actions')}</th></tr></thead>
<tbody>${page.links.map(
        (
          l,
        ) => html`<tr><td>${t(`console.state_${l.state}`)}</td><td><time datetime="${l.expires}">${formatTime(Date.parse(l.expires), v.frame.locale)}</time></td><td>${l.createdBy}</td>
<td>${l.state === 'usable' && v.csrf ? html`<form method="post" action="${path}/recovery-links/${String(l.id)}/revoke">${hidden(v.csrf.field, v.csrf.token)}<button type="submit" class="secondary small">${t('console.revoke')}</button></form>` : html``}</td></tr>`,
      )}</tbody></table></div>`
    : html`<p class="hint">${t('console.recovery_none')}</p>`;
  return html`<section aria-labelledby="recovery-h"><h2 id="recovery-h">${t('console.recovery_title')}</h2>
<p>${t('console.recovery_text')}</p>
${
  v.csrf && !page.user.disabled && page.mayAct
    ? html`<form method="post" action="${path}/recovery-links">
${hidden(v.csrf.field, v.csrf.token)}
<label for="ttl">${t('console.recovery_ttl')}</label>
<select id="ttl" name="ttl">${options}</select>
<p class="check"><input type="checkbox" id="delete-others" name="delete_others" value="yes"> <label for="delete-others">${t('console.recovery_delete_others')}</label></p>
<button type="submit" class="primary">${t('console.recovery_create')}</button>
</form>`
    : html``
}
${links}${inviteForm(v, page, path)}</section>`;
}

function upstreamSection(v: ConsoleView, page: UserPageView): Html {
  const { t } = v;
  const path = userPath(page.org.id, page.user.eppn);
  const act = page.mayAct && v.csrf !== undefined;
  const rows = page.upstreamLinks.map(
    (l) => html`<tr><th scope="row">${l.name}</th><td><code>${l.subject}</code></td>
<td><time datetime="${l.linkedAt}">${formatTime(Date.parse(l.linkedAt), v.frame.locale)}</time></td>
${act && v.csrf ? html`<td><form method="post" action="${path}/upstream-links/unlink">${hidden(v.csrf.field, v.csrf.token)}${hidden('upstream', l.upstream)}<button type="submit" class="secondary small" aria-label="${t('console.unlink')}: ${l.name}">${t('console.unlink')}</button></form></td>` : html``}
</tr>`,
  );
  const table = html`<div class="table-wrap" tabindex="0" role="region" aria-label="${t('console.links_title')}"><table>
<caption class="visually-hidden">${t('console.links_title')}</caption>
<thead><tr><th scope="col">${t('console.col_provider')}</th><th scope="col">${t('console.col_upstream_subject')}</th><th scope="col">${t('console.col_linked')}</th>${act ? html`<th scope="col">${t('console.col_actions')}</th>` : html``}</tr></thead>
<tbody>${rows}</tbody></table></div>`;
  return html`<section aria-labelledby="upstream-links-h"><h2 id="upstream-links-h">${t('console.links_title')}</h2>
${page.upstreamLinks.length ? table : html`<p>${t('console.links_none')}</p>`}</section>`;
}

/** "Send an invitation by e-mail": only with a mail server, for an enabled user with an address. */
function inviteForm(v: ConsoleView, page: UserPageView, path: string): Html {
  const { t } = v;
  if (!v.csrf || !page.mail || !page.user.email || page.user.disabled || !page.mayAct) return html``;
  return html`<h3>${t('console.invite_user')}</h3>
<p>${t('console.invite_user_text')}</p>
<form method="post" action="${path}/invite">
${hidden(v.csrf.field, v.csrf.token)}
<button type="submit" class="secondary">${t('console.invite_user')}</button>
</form>`;
}

export function userView(v: ConsoleView, page: UserPageView): string {
  const { t } = v;
  const { user, org } = page;
  const title = t('console.user_title', { eppn: user.eppn });
  const body = html`<h1>${title}</h1>
${notice(page.notice)}${alert(page.error)}
<p class="subtitle">${user.name}${user.email ? html` · ${user.email}` : html``} · ${t(user.hasPassword ? 'console.user_has_password' : 'console.user_no_password')}</p>
${user.disabled ? html`<p class="alert">${t('console.user_disabled')}</p>` : html``}
${page.mayAct ? html`` : html`<p class="hint" id="user-stronger">${t('console.user_stronger')}</p>`}
<section aria-labelledby="passkeys-h"><h2 id="passkeys-h">${t('console.passkeys_title')}</h2>
${passkeyTable(v, page)}</section>
${recoverySection(v, page)}
${upstreamSection(v, page)}
<p><a href="/console/org/${String(org.id)}/audit?eppn=${encodeURIComponent(user.eppn)}">${t('console.user_audit')}</a></p>`;
  return consolePage(v, title, body, org);
}

export interface ConfirmView {
  org: OrgRef;
  eppn: string;
  /** one passkey, or all of them */
  passkey?: { id: number; label: string };
  count: number;
  error?: string;
  reason?: string;
}

export function confirmView(v: ConsoleView, c: ConfirmView): string {
  const { t } = v;
  const path = userPath(c.org.id, c.eppn);
  const title = t(c.passkey ? 'console.confirm_delete_title' : 'console.confirm_delete_all_title');
  const text = c.passkey
    ? t('console.confirm_delete_text', { label: c.passkey.label, eppn: c.eppn })
    : t('console.confirm_delete_all_text', { count: c.count, eppn: c.eppn });
  const action = c.passkey ? `${path}/passkeys/${c.passkey.id}/delete` : `${path}/delete-all`;
  const body = html`<h1>${title}</h1>
${alert(c.error)}
<p>${text}</p>
<form method="post" action="${action}">
${v.csrf ? hidden(v.csrf.field, v.csrf.token) : html``}
<label for="reason">${t('console.reason')}</label>
<p class="hint" id="reason-hint">${t('console.reason_hint')}</p>
<input type="text" id="reason" name="reason" required maxlength="500" value="${c.reason ?? ''}" aria-describedby="reason-hint" autofocus${raw(c.error ? ' aria-invalid="true"' : '')}>
<div class="actions"><button type="submit" class="danger">${t('console.confirm')}</button>
<a href="${path}" class="button secondary">${t('console.cancel')}</a></div>
</form>`;
  return consolePage(v, title, body, c.org);
}

export function recoveryCreatedView(
  v: ConsoleView,
  r: { org: OrgRef; eppn: string; url: string; expires: string },
): string {
  const { t } = v;
  const title = t('console.recovery_created_title', { eppn: r.eppn });
  const svg = renderSVG(r.url, { border: 2 });
  const qr = `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
  const expires = formatTime(Date.parse(r.expires), v.frame.locale) ?? r.expires;
  const body = html`<h1>${title}</h1>
<p>${t('console.recovery_created_text', { eppn: r.eppn, expires })}</p>
<h2 id="recovery-link-h">${t('console.recovery_link')}</h2>
<p class="recovery-link"><code id="recovery-link">${r.url}</code></p>
<p class="qr"><img src="${qr}" alt="${t('console.recovery_qr')}" width="264" height="264"></p>
<p><a href="${userPath(r.org.id, r.eppn)}">${t('console.recovery_back', { eppn: r.eppn })}</a></p>`;
  return consolePage(v, title, body, r.org);
}
