// Pages of the passkey lifecycle: the short page after a passkey sign-in that tells the browser's
// credential manager which passkeys still exist (WebAuthn Signal API), the passkey offered after a
// password sign-in, and the recovery page a one-time link opens.
import { html } from '../ui/html.ts';
import type { User } from '../store/directory.ts';
import type { PasskeyRow } from '../store/passkeys.ts';
import { bytes } from '../store/index.ts';
import {
  alert,
  ceremonyForm,
  hidden,
  layout,
  signalsElement,
  type CsrfField,
  type Frame,
  type Signals,
} from './pages.ts';

/** After a passkey sign-in in a browser with the Signal API: signals, then on to the client. */
export function signedInPage(frame: Frame, signals: Signals & { continueUrl: string }): string {
  const { t } = frame;
  const body = html`
<h1>${t('signals.title')}</h1>
<p>${t('signals.text')}</p>
<p><a href="${signals.continueUrl}" id="continue" class="button primary">${t('signals.continue')}</a></p>
${signalsElement(signals)}`;
  return layout(frame, t('signals.title'), body, ['/static/signals.js']);
}

export interface OfferView {
  csrf: CsrfField;
  /** registration: options URL and form action */
  optionsUrl: string;
  action: string;
  laterAction: string;
  continueUrl: string;
  error?: string;
}

/** The passkey offered after a password sign-in: conditional create where the browser can, and buttons. */
export function passkeyOfferPage(frame: Frame, v: OfferView): string {
  const { t } = frame;
  const body = html`
<h1>${t('offer.title')}</h1>
<p>${t('offer.text')}</p>
${alert(v.error)}
<div data-continue="${v.continueUrl}" id="offer">
${ceremonyForm(t, 'offer', v.action, v.optionsUrl, v.csrf, t('offer.create'))}
</div>
<form method="post" action="${v.laterAction}" class="inline">
${hidden(v.csrf.field, v.csrf.token)}
<button type="submit" class="secondary" id="offer-later">${t('offer.later')}</button>
</form>`;
  return layout(frame, t('offer.title'), body, ['/static/webauthn-browser.js', '/static/offer.js']);
}

export interface RecoveryView {
  user: string;
  csrf: CsrfField;
  optionsUrl: string;
  action: string;
  error?: string;
}

export function recoveryPage(frame: Frame, v: RecoveryView): string {
  const { t } = frame;
  const body = html`
<h1>${t('recovery.title')}</h1>
<p>${t('recovery.text', { user: v.user })}</p>
${alert(v.error)}
${ceremonyForm(t, 'recovery', v.action, v.optionsUrl, v.csrf, t('recovery.create'))}`;
  return layout(frame, t('recovery.title'), body, ['/static/webauthn-browser.js', '/static/account.js']);
}

/** What a signed-in user's page tells the credential manager: their passkeys, name and display name. */
export function userSignals(rpId: string, user: User, credentials: PasskeyRow[]): Signals {
  return {
    rpId,
    // The user handle the passkeys were registered with: the subject's UTF-8 bytes.
    userId: Buffer.from(user.sub, 'utf8').toString('base64url'),
    accepted: credentials.map((c) => bytes(c.credential_id).toString('base64url')),
    name: user.eppn,
    displayName: user.display_name ?? user.name,
  };
}
