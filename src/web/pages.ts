// Page templates: plain functions from view data to HTML. Every interpolation is escaped.
import { html, raw, type Html } from '../ui/html.ts';
import { formatTime, type Translate, type MessageKey } from '../ui/i18n.ts';
import { alert, hidden, layout, notice, type CsrfField, type Frame } from '../ui/layout.ts';

export { alert, hidden, layout, messagePage, type CsrfField, type Frame, type MessageView } from '../ui/layout.ts';

/**
 * A WebAuthn ceremony: the script (static/*.js) fetches options from data-options, runs the
 * ceremony, puts the result in `response` and submits. The button stays hidden without script.
 */
export function ceremonyForm(
  t: Translate,
  id: string,
  action: string,
  optionsUrl: string,
  csrf: CsrfField,
  label: string,
): Html {
  return html`<form id="${id}-form" method="post" action="${action}" data-options="${optionsUrl}" data-csrf="${csrf.token}"
  data-msg-working="${t('js.working')}" data-msg-cancelled="${t('js.cancelled')}" data-msg-unsupported="${t('signin.no_webauthn')}">
${hidden(csrf.field, csrf.token)}
<input type="hidden" name="response" value="">
<button type="button" id="${id}-button" class="primary" hidden>${label}</button>
<p id="${id}-status" class="status" role="status" aria-live="polite"></p>
</form>`;
}

/**
 * What static/signals.js tells the credential manager, each only where the page's visitor has
 * proven who they are (a signed-in user) or is the one who presented the credential.
 */
export interface Signals {
  rpId: string;
  /** a credential id the browser presented that this service does not know */
  unknownCredential?: string;
  /** the user handle (base64url) the user's passkeys were registered with */
  userId?: string;
  /** every passkey of the user on the server (base64url credential ids) */
  accepted?: string[];
  name?: string;
  displayName?: string;
  /** where the page goes once the signals are sent */
  continueUrl?: string;
}

export function signalsElement(s: Signals | undefined): Html {
  if (!s) return html``;
  return html`<div id="webauthn-signals" hidden data-rp-id="${s.rpId}"${
    s.unknownCredential ? html` data-unknown-credential="${s.unknownCredential}"` : html``
  }${s.userId ? html` data-user-id="${s.userId}"` : html``}${
    s.accepted ? html` data-accepted="${s.accepted.join(',')}"` : html``
  }${s.name ? html` data-name="${s.name}" data-display-name="${s.displayName ?? s.name}"` : html``}${
    s.continueUrl ? html` data-continue="${s.continueUrl}"` : html``
  }></div>`;
}

export interface SignInView {
  /** "to continue to <client>" or the account page's own subtitle */
  subtitle: string;
  csrf: CsrfField;
  username?: string;
  error?: string;
  /** why only a passkey is offered (the request asked for a phishing-resistant sign-in) */
  passkeyOnly?: string;
  /** absent: no password form (a password cannot satisfy the request) */
  passwordAction?: string;
  passkeyAction: string;
  optionsUrl: string;
  cancelAction?: string;
  signals?: Signals;
  /** where "Lost your passkey?" leads, when self-service recovery is offered */
  lostPasskey?: string;
  /** the organization's upstream identity providers: links named by the provider */
  upstreams?: UpstreamChoice[];
}

/** An upstream provider's button on the sign-in page: its name, and its logo when it has one. */
export interface UpstreamChoice {
  name: string;
  href: string;
  /** the URL of its logo (this service's /upstream/<id>/logo) */
  logo?: string;
}

function upstreamLinks(t: Translate, upstreams: UpstreamChoice[] | undefined): Html {
  if (!upstreams?.length) return html``;
  // The logo is decoration: the link's accessible name is the provider's name alone.
  const logo = (u: UpstreamChoice) => (u.logo ? html`<img class="upstream-logo" src="${u.logo}" alt="">` : html``);
  return html`<p class="divider"><span>${t('upstream.or')}</span></p>
<ul class="upstreams">${upstreams.map((u) => html`<li><a class="button secondary" href="${u.href}">${logo(u)}${u.name}</a></li>`)}</ul>`;
}

function passwordForm(t: Translate, action: string, csrf: CsrfField, username: string | undefined): Html {
  return html`<p class="divider"><span>${t('signin.or')}</span></p>
<form id="password-form" method="post" action="${action}">
${hidden(csrf.field, csrf.token)}
<label for="username">${t('signin.username')}</label>
<input id="username" name="username" type="text" inputmode="email" autocomplete="username webauthn" autocapitalize="none" autocorrect="off" spellcheck="false" required maxlength="320" aria-describedby="username-hint" value="${username ?? ''}">
<p id="username-hint" class="hint">${t('signin.username_hint')}</p>
<label for="password">${t('signin.password')}</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
<button type="submit" class="secondary">${t('signin.submit')}</button>
</form>`;
}

export function signInPage(frame: Frame, v: SignInView): string {
  const { t } = frame;
  const body = html`
<h1>${t('signin.title')}</h1>
<p class="subtitle">${v.subtitle}</p>
${alert(v.error)}
${notice(v.passkeyOnly)}
${ceremonyForm(t, 'passkey', v.passkeyAction, v.optionsUrl, v.csrf, t('signin.passkey'))}
${v.passwordAction ? passwordForm(t, v.passwordAction, v.csrf, v.username) : html``}
${upstreamLinks(t, v.upstreams)}
${
  v.cancelAction
    ? html`<form method="post" action="${v.cancelAction}" class="inline">${hidden(v.csrf.field, v.csrf.token)}<button type="submit" class="link">${t('signin.cancel')}</button></form>`
    : html``
}
${v.lostPasskey ? html`<p class="hint"><a href="${v.lostPasskey}">${t('lost.link')}</a></p>` : html``}
${signalsElement(v.signals)}`;
  const scripts = ['/static/webauthn-browser.js', '/static/sign-in.js'];
  return layout(frame, t('signin.title'), body, v.signals ? [...scripts, '/static/signals.js'] : scripts);
}

export interface LostPasskeyView {
  csrf: CsrfField;
  action: string;
  /** shown instead of the form once a request was made */
  sent?: boolean;
}

/** Self-service recovery: the same page answers whether the account exists or not. */
export function lostPasskeyPage(frame: Frame, v: LostPasskeyView): string {
  const { t } = frame;
  const body = v.sent
    ? html`
<h1>${t('lost.title')}</h1>
<p role="status">${t('lost.sent')}</p>`
    : html`
<h1>${t('lost.title')}</h1>
<p>${t('lost.intro')}</p>
<form method="post" action="${v.action}">
${hidden(v.csrf.field, v.csrf.token)}
<label for="identifier">${t('lost.identifier')}</label>
<input id="identifier" name="identifier" type="text" inputmode="email" autocomplete="username" autocapitalize="none" autocorrect="off" spellcheck="false" required maxlength="320">
<button type="submit" class="primary">${t('lost.submit')}</button>
</form>`;
  return layout(frame, t('lost.title'), body);
}

export interface ConsentView {
  client: string;
  user: string;
  items: MessageKey[];
  csrf: CsrfField;
  action: string;
}

export function consentPage(frame: Frame, v: ConsentView): string {
  const { t } = frame;
  const body = html`
<h1>${t('consent.title')}</h1>
<p>${t('consent.intro', { client: v.client, user: v.user })}</p>
<p>${t('consent.receives')}</p>
<ul class="items">${v.items.map((k) => html`<li>${t(k)}</li>`)}</ul>
<form method="post" action="${v.action}" class="actions">
${hidden(v.csrf.field, v.csrf.token)}
<button type="submit" name="decision" value="allow" class="primary">${t('consent.allow')}</button>
<button type="submit" name="decision" value="deny" class="secondary">${t('consent.deny')}</button>
</form>
<p class="hint">${t('consent.remembered')}</p>`;
  return layout(frame, t('consent.title'), body);
}

export interface PasskeyItem {
  id: number;
  label: string;
  authenticator: string;
  /** the model's icon (a data: URI: AAGUID_DATA_FILE's light one, else the imported FIDO metadata's) */
  icon?: string;
  /** for the dark scheme (AAGUID_DATA_FILE) */
  iconDark?: string;
  synced: boolean;
  userVerified: boolean;
  createdAt: number;
  lastUsedAt: number | null;
}

export interface AccountPageView {
  user: { eppn: string; name: string; hasPassword: boolean };
  passkeys: PasskeyItem[];
  /** the credential manager is told which passkeys exist and the user's current names */
  signals: Signals;
  csrf: CsrfField;
  flash?: string;
  error?: string;
  sections: Html[];
}

/** Decoration beside the model's name: the dark scheme gets its own icon where there is one. */
function authenticatorIcon(light: string, dark: string | undefined): Html {
  const img = html`<img class="authenticator-icon" src="${light}" alt="" width="20" height="20">`;
  return dark
    ? html`<picture><source srcset="${dark}" media="(prefers-color-scheme: dark)">${img}</picture> `
    : html`${img} `;
}

function timeTag(frame: Frame, ms: number | null): Html {
  if (ms === null) return html`${frame.t('account.never')}`;
  return html`<time datetime="${new Date(ms).toISOString()}">${formatTime(ms, frame.locale)}</time>`;
}

export function accountPage(frame: Frame, v: AccountPageView): string {
  const { t } = frame;
  const passkeys = v.passkeys.map(
    (p) => html`
<li class="passkey" data-passkey-id="${String(p.id)}">
<h3>${p.label}</h3>
<dl>
<dt>${t('account.authenticator')}</dt><dd class="authenticator">${p.icon ? authenticatorIcon(p.icon, p.iconDark) : html``}${p.authenticator}</dd>
<dt>${t('account.kind')}</dt><dd class="kind">${t(p.synced ? 'account.kind_synced' : 'account.kind_device')}</dd>
<dt>${t('account.verification')}</dt><dd class="verification">${t(p.userVerified ? 'account.verification_yes' : 'account.verification_no')}</dd>
<dt>${t('account.created')}</dt><dd class="created">${timeTag(frame, p.createdAt)}</dd>
<dt>${t('account.last_used')}</dt><dd class="last-used">${timeTag(frame, p.lastUsedAt)}</dd>
</dl>
<form method="post" action="/account/passkeys/${String(p.id)}/rename" class="rename">
${hidden(v.csrf.field, v.csrf.token)}
<label for="label-${String(p.id)}">${t('account.label')}</label>
<span class="row"><input id="label-${String(p.id)}" name="label" type="text" required maxlength="100" value="${p.label}">
<button type="submit" class="secondary">${t('account.rename')}</button></span>
</form>
<form method="post" action="/account/passkeys/${String(p.id)}/delete" class="delete">
${hidden(v.csrf.field, v.csrf.token)}
<button type="submit" class="danger">${t('account.delete')}</button>
</form>
</li>`,
  );
  const body = html`
<h1>${t('account.title')}</h1>
<p class="subtitle">${t('account.signed_in_as', { user: `${v.user.name} (${v.user.eppn})` })}</p>
${notice(v.flash)}
${alert(v.error)}
<section aria-labelledby="passkeys-heading">
<h2 id="passkeys-heading">${t('account.passkeys')}</h2>
<p class="hint">${t('account.passkeys_intro')}</p>
${v.passkeys.length ? html`<ul class="passkeys">${passkeys}</ul>` : html`<p id="no-passkeys">${t('account.no_passkeys')}</p>`}
${ceremonyForm(t, 'register', '/account/passkeys', '/account/passkeys/options', v.csrf, t('account.add_passkey'))}
</section>
${v.sections}
<p><a href="/openid/endsession" id="sign-out">${t('account.sign_out')}</a></p>
${signalsElement(v.signals)}`;
  return layout(frame, t('account.title'), body, [
    '/static/webauthn-browser.js',
    '/static/account.js',
    '/static/signals.js',
  ]);
}

export function confirmDeletePage(
  frame: Frame,
  v: { id: number; label: string; hasPassword: boolean; csrf: CsrfField },
): string {
  const { t } = frame;
  const body = html`
<h1>${t('account.confirm_title')}</h1>
<p>${t(v.hasPassword ? 'account.confirm_text' : 'account.confirm_text_no_password', { label: v.label })}</p>
<form method="post" action="/account/passkeys/${String(v.id)}/delete" class="actions">
${hidden(v.csrf.field, v.csrf.token)}
<input type="hidden" name="confirm" value="yes">
<button type="submit" class="danger">${t('account.confirm_yes')}</button>
<a href="/account" class="button secondary">${t('account.confirm_no')}</a>
</form>`;
  return layout(frame, t('account.confirm_title'), body);
}

export function logoutPage(frame: Frame, form: string): string {
  const { t } = frame;
  // The provider's form carries its own anti-forgery token; the buttons submit it.
  const body = html`
<h1>${t('logout.title')}</h1>
<p>${t('logout.question')}</p>
${raw(form)}
<div class="actions">
<button type="submit" form="op.logoutForm" name="logout" value="yes" class="primary" id="logout-yes">${t('logout.yes')}</button>
<button type="submit" form="op.logoutForm" class="secondary" id="logout-no">${t('logout.no')}</button>
</div>`;
  return layout(frame, t('logout.title'), body);
}

export interface UserCodeView {
  action: string;
  /** oidc-provider's anti-forgery token of the device form */
  xsrf: string;
  /** what the user typed, to correct it */
  code?: string;
  error?: string;
  /** the request id, when something other than the code went wrong */
  reference?: string;
}

export function userCodePage(frame: Frame, v: UserCodeView): string {
  const { t } = frame;
  const body = html`
<h1>${t('device.title')}</h1>
<p class="subtitle">${t('device.intro')}</p>
${alert(v.error)}
<form id="device-code-form" method="post" action="${v.action}">
${hidden('xsrf', v.xsrf)}
<label for="user_code">${t('device.code')}</label>
<input id="user_code" name="user_code" type="text" autocomplete="off" autocapitalize="characters" autocorrect="off" spellcheck="false" required maxlength="64" aria-describedby="user-code-hint" value="${v.code ?? ''}">
<p id="user-code-hint" class="hint">${t('device.code_hint')}</p>
<button type="submit" class="primary">${t('device.continue')}</button>
</form>
${v.reference ? html`<p class="hint reference">${t('error.reference', { id: v.reference })}</p>` : html``}`;
  return layout(frame, t('device.title'), body);
}

export interface DeviceConfirmView {
  action: string;
  xsrf: string;
  client: string;
  /** the user code as the device shows it (BCDF-GHJK) */
  code: string;
}

export function deviceConfirmPage(frame: Frame, v: DeviceConfirmView): string {
  const { t } = frame;
  const body = html`
<h1>${t('device.confirm_title')}</h1>
<p>${t('device.confirm_question', { client: v.client })}</p>
<p>${t('device.confirm_check')} <strong class="user-code">${v.code}</strong></p>
<p class="hint">${t('device.confirm_warning')}</p>
<form method="post" action="${v.action}" class="actions">
${hidden('xsrf', v.xsrf)}
${hidden('user_code', v.code)}
<button type="submit" name="confirm" value="yes" class="primary" id="device-confirm">${t('device.confirm_yes')}</button>
<button type="submit" name="abort" value="yes" class="secondary" id="device-abort">${t('device.confirm_no')}</button>
</form>`;
  return layout(frame, t('device.confirm_title'), body);
}
