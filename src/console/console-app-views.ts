// Console page templates of the organization's applications: the list (OpenID Connect clients and
// SAML service providers with what each receives) and one application's page (each attribute group
// with the claims or SAML attributes it releases). Read-only: applications are registered with the
// admin CLI.
import { html, type Html } from '../ui/html.ts';
import type { Application, GroupRelease } from '../service-providers/index.ts';
import { consolePage, timeOf, type ConsoleView, type OrgRef } from './console-views.ts';

const appPath = (orgId: number, clientId: string) =>
  `/console/org/${orgId}/applications/${encodeURIComponent(clientId)}`;

function protocolName(v: ConsoleView, a: Application): string {
  return v.t(a.protocol === 'saml' ? 'console.protocol_saml' : 'console.protocol_oidc');
}

function statusOf(v: ConsoleView, a: Application): string {
  return v.t(a.disabled ? 'console.status_disabled' : 'console.status_enabled');
}

function consentOf(v: ConsoleView, a: Application): string {
  if (!a.signsIn) return v.t('console.api_only');
  return v.t(a.firstParty ? 'console.first_party' : 'console.asks_consent');
}

function federationOf(v: ConsoleView, a: Application): string {
  if (!a.federation) return v.t('console.registered_here');
  return a.federation.name ?? v.t('console.federation', { id: a.federation.id });
}

/** What it receives, by name: claims, or SAML attributes by FriendlyName (the full names are on its page). */
function receives(v: ConsoleView, a: Application): Html {
  const names = a.protocol === 'saml' ? a.attributes.map((x) => x.friendlyName) : a.claims;
  if (names.length === 0) return html`${v.t('console.nothing_released')}`;
  return html`<ul class="plain compact">${names.map((n) => html`<li><code>${n}</code></li>`)}</ul>`;
}

export function applicationsView(v: ConsoleView, p: { org: OrgRef; applications: Application[] }): string {
  const { t } = v;
  const title = t('console.apps_title');
  const rows = p.applications.map(
    (a) => html`<tr>
<th scope="row"><a href="${appPath(p.org.id, a.clientId)}">${a.name}</a></th>
<td>${protocolName(v, a)}</td>
<td><code>${a.entityId ?? a.clientId}</code></td>
<td>${a.groups.length ? a.groups.join(' ') : '–'}</td>
<td>${receives(v, a)}</td>
<td>${consentOf(v, a)}</td>
<td>${statusOf(v, a)}</td>
<td>${a.protocol === 'saml' ? federationOf(v, a) : '–'}</td>
</tr>`,
  );
  const table = p.applications.length
    ? html`<div class="table-wrap"><table>
<caption class="visually-hidden">${title}</caption>
<thead><tr><th scope="col">${t('console.col_name')}</th><th scope="col">${t('console.col_protocol')}</th><th scope="col">${t('console.col_identifier')}</th><th scope="col">${t('console.col_groups')}</th><th scope="col">${t('console.col_receives')}</th><th scope="col">${t('console.col_consent')}</th><th scope="col">${t('console.col_status')}</th><th scope="col">${t('console.col_federation')}</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
    : html`<p class="notice" role="status">${t('console.apps_none')}</p>`;
  const body = html`<h1>${title}</h1>
<p>${t('console.apps_text')}</p>
${table}`;
  return consolePage(v, title, body, p.org);
}

function releaseRow(v: ConsoleView, a: Application, r: GroupRelease): Html {
  const cell =
    a.protocol === 'saml'
      ? r.attributes.map((x) => html`<li>${x.friendlyName} (<code>${x.name}</code>)</li>`)
      : r.claims.map((c) => html`<li><code>${c}</code></li>`);
  return html`<tr><th scope="row"><code>${r.group}</code></th><td>${cell.length ? html`<ul class="plain compact">${cell}</ul>` : '–'}</td></tr>`;
}

function releaseTable(v: ConsoleView, a: Application): Html {
  const { t } = v;
  if (a.groups.length === 0) return html`<p>${t('console.app_no_groups')}</p>`;
  const saml = a.protocol === 'saml';
  const total = saml
    ? html`<p>${t('console.col_receives')}:</p><ul class="plain compact">${a.attributes.map((x) => html`<li>${x.friendlyName} (<code>${x.name}</code>)</li>`)}</ul>`
    : html``;
  return html`<p class="hint">${t(saml ? 'console.app_attributes_hint' : 'console.app_claims_hint')}</p>
<div class="table-wrap" tabindex="0" role="region" aria-label="${t('console.app_releases')}"><table>
<caption class="visually-hidden">${t('console.app_releases')}</caption>
<thead><tr><th scope="col">${t('console.col_group')}</th><th scope="col">${t(saml ? 'console.col_attributes' : 'console.col_claims')}</th></tr></thead>
<tbody>${a.releases.map((r) => releaseRow(v, a, r))}</tbody></table></div>
${total}`;
}

export function applicationView(v: ConsoleView, p: { org: OrgRef; application: Application }): string {
  const { t } = v;
  const a = p.application;
  const title = t('console.app_title', { name: a.name });
  const yes = (b: boolean) => t(b ? 'console.yes' : 'console.no');
  const facts: [string, Html | string][] = [
    [t('console.col_protocol'), protocolName(v, a)],
    [t('console.app_client_id'), html`<code>${a.clientId}</code>`],
    ...(a.entityId ? ([[t('console.app_entity_id'), html`<code>${a.entityId}</code>`]] as [string, Html][]) : []),
    [t('console.col_status'), statusOf(v, a)],
    [t('console.col_consent'), consentOf(v, a)],
    [t('console.app_signs_in'), yes(a.signsIn)],
    ...(a.protocol === 'oidc' ? ([[t('console.app_api_access'), yes(a.apiAccess)]] as [string, string][]) : []),
    ...(a.protocol === 'saml' ? ([[t('console.col_federation'), federationOf(v, a)]] as [string, string][]) : []),
    [t('console.col_groups'), a.groups.length ? a.groups.join(' ') : '–'],
    [t('console.app_registered'), timeOf(v, a.createdAt || null)],
  ];
  const endpoints = a.endpoints.length
    ? html`<h2 id="endpoints-h">${t(a.protocol === 'saml' ? 'console.app_acs' : 'console.app_redirect_uris')}</h2>
<ul class="plain">${a.endpoints.map((e) => html`<li><code>${e}</code></li>`)}</ul>`
    : html``;
  const body = html`<h1>${title}</h1>
<dl class="facts">${facts.map(([k, value]) => html`<dt>${k}</dt><dd>${value}</dd>`)}</dl>
<section aria-labelledby="releases-h"><h2 id="releases-h">${t('console.app_releases')}</h2>
${releaseTable(v, a)}</section>
${endpoints}
<p><a href="/console/org/${String(p.org.id)}/applications">${t('console.app_back')}</a></p>`;
  return consolePage(v, title, body, p.org);
}
