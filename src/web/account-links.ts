// The account page's section of linked sign-in providers (docs/upstream.md): each upstream identity
// linked to the account, with a button that unlinks it while another way to sign in remains.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { linksOfUser, unlinkAccount } from '../upstream/linking.ts';
import { userActor } from '../audit/index.ts';
import { AppError } from '../errors.ts';
import { html, type Html } from '../ui/html.ts';
import { bodyField, frameFor, sendMessage, type Kit } from './kit.ts';
import { checkSessionCsrf, redirect, requireSignedIn, type AccountSection, type AccountView } from './account-page.ts';

const UNLINK_PATH = '/account/links/unlink';

async function linksSection(kit: Kit, view: AccountView): Promise<Html> {
  const { t } = view;
  const links = await linksOfUser(kit.store, view.user.id);
  // prettier-ignore
  const rows = links.map((l) => html`<li><span class="label">${l.name}</span>
<form method="post" action="${UNLINK_PATH}" class="inline">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
<input type="hidden" name="upstream" value="${l.upstream}">
<button type="submit" class="secondary">${t('account.unlink', { name: l.name })}</button>
</form></li>`);
  // prettier-ignore
  return html`<section aria-labelledby="links-heading" id="links">
<h2 id="links-heading">${t('account.links_title')}</h2>
${rows.length ? html`<ul class="consents">${rows}</ul>` : html`<p>${t('account.links_none')}</p>`}
</section>`;
}

async function unlink(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return reply;
  if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: bodyField(request, kit.csrf.field) }))
    return reply;
  const upstream = bodyField(request, 'upstream');
  if (typeof upstream !== 'string' || upstream.length > 40) return sendMessage(reply, frame, 400, 'error.generic');
  try {
    await unlinkAccount(kit.store, upstream, who.user, {
      actor: userActor(who.user, request),
      now: kit.now(),
      requireOtherWay: true,
    });
  } catch (err) {
    if (err instanceof AppError && err.status === 409) return sendMessage(reply, frame, 409, 'account.unlink_last');
    if (err instanceof AppError && err.status === 404) return sendMessage(reply, frame, 404, 'error.generic');
    throw err;
  }
  return redirect(reply, '/account#links');
}

/** The section, and its route (registered with the account page's, which parse its form). */
export function accountLinks(kit: Kit): AccountSection {
  return {
    render: (view) => linksSection(kit, view),
    routes: async (app: FastifyInstance) => {
      app.post(UNLINK_PATH, (request, reply) => unlink(kit, request, reply));
    },
  };
}
