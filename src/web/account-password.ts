// The account page's password section: a user who has a password changes it by giving the
// current one (counted against the account's sign-in limit, so it cannot be used to guess).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { removePassword, setPassword } from '../directory/index.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { layout } from './pages.ts';
import { validatePassword, verifyPassword } from '../directory/passwords.ts';
import { userActor } from '../audit/index.ts';
import { html, type Html } from '../ui/html.ts';
import { bodyField, frameFor, overLimit, sendMessage, sendPage, type Kit } from './kit.ts';
import {
  askToSignInAgain,
  checkSessionCsrf,
  recentlySignedIn,
  redirect,
  requireSignedIn,
  sessionCsrf,
  type AccountSection,
  type AccountView,
} from './account-page.ts';

const CHANGE_PATH = '/account/password';
const REMOVE_PATH = '/account/password/remove';

/** A user with a passkey may remove their password; asked once more on a page of its own. */
function removeForm(view: AccountView, confirm: boolean): Html {
  const { t } = view;
  // prettier-ignore
  return html`<form method="post" action="${REMOVE_PATH}" id="remove-password-form">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
${confirm ? html`<input type="hidden" name="confirm" value="yes">` : html``}
<p class="hint">${t('password.remove_text')}</p>
<button type="submit" class="${confirm ? 'danger' : 'secondary'}" id="remove-password">${t('password.remove')}</button>
</form>`;
}

function passwordSection(view: AccountView): Html {
  const { t } = view;
  const status = html`<p id="password-status">${t(view.user.password_hash === null ? 'account.no_password' : 'account.password_works')}</p>`;
  // prettier-ignore
  if (view.user.password_hash === null)
    return html`<section aria-labelledby="password-heading" id="password">
<h2 id="password-heading">${t('password.title')}</h2>
${status}
</section>`;
  // prettier-ignore
  return html`<section aria-labelledby="password-heading" id="password">
<h2 id="password-heading">${t('password.title')}</h2>
${status}
<form method="post" action="${CHANGE_PATH}">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
<label for="current-password">${t('password.current')}</label>
<input id="current-password" name="current" type="password" autocomplete="current-password" required>
<label for="new-password">${t('password.new')}</label>
<input id="new-password" name="password" type="password" autocomplete="new-password" minlength="8" maxlength="1024" required aria-describedby="new-password-hint">
<p class="hint" id="new-password-hint">${t('password.rules')}</p>
<button type="submit" class="secondary">${t('password.change')}</button>
</form>
${view.passkeyCount > 0 ? removeForm(view, false) : html``}
</section>`;
}

const text = (request: FastifyRequest, name: string) => {
  const value = bodyField(request, name);
  return typeof value === 'string' && value.length <= 1024 ? value : undefined;
};

async function change(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return reply;
  if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: bodyField(request, kit.csrf.field) }))
    return reply;
  const current = text(request, 'current');
  const next = text(request, 'password');
  if (!current || !next || validatePassword(next)) return sendMessage(reply, frame, 400, 'password.invalid');
  const retry = await overLimit(kit.limits.account, who.user.eppn);
  if (retry) return sendMessage(reply, frame, 429, 'error.rate_limited', { headers: { 'retry-after': retry } });
  if (!(await verifyPassword(current, who.user.password_hash)).valid)
    return sendMessage(reply, frame, 400, 'password.wrong');
  await kit.limits.account.reset(who.user.eppn);
  const actor = userActor(who.user, request);
  await setPassword(kit.store, who.user.eppn, next, { actor, now: kit.now(), action: 'password.change' });
  return redirect(reply, '/account?done=password');
}

async function remove(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return reply;
  if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: bodyField(request, kit.csrf.field) }))
    return reply;
  if (who.user.password_hash === null) return redirect(reply, '/account?done=password_removed');
  if (!recentlySignedIn(kit, who)) return askToSignInAgain(kit, request, reply, frame, who);
  const passkeys = await listUserCredentials(kit.store.db, who.user.id);
  if (passkeys.length === 0) return sendMessage(reply, frame, 400, 'password.remove_needs_passkey');
  if (bodyField(request, 'confirm') !== 'yes') {
    const view = {
      user: who.user,
      passkeyCount: passkeys.length,
      t: frame.t,
      csrf: sessionCsrf(kit, request, reply, who),
    };
    const body = html`<h1>${frame.t('password.remove_confirm_title')}</h1>
${removeForm(view, true)}
<p><a href="/account">${frame.t('account.confirm_no')}</a></p>`;
    return sendPage(reply, 200, layout(frame, frame.t('password.remove_confirm_title'), body));
  }
  await removePassword(kit.store, who.user.id, { actor: userActor(who.user, request), now: kit.now() });
  return redirect(reply, '/account?done=password_removed');
}

export function accountPassword(kit: Kit): AccountSection {
  return {
    render: passwordSection,
    routes: async (app: FastifyInstance) => {
      app.post(CHANGE_PATH, (request, reply) => change(kit, request, reply));
      app.post(REMOVE_PATH, (request, reply) => remove(kit, request, reply));
    },
  };
}
