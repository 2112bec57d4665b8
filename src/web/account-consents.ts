// The account page's applications section: the clients the user agreed to release data to, each
// with a button that withdraws the consent (the client's grants and tokens go with it, and the next
// sign-in to it asks again).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import { listConsents } from '../store/consents.ts';
import { findClient } from '../store/clients.ts';
import { withdrawConsent } from '../clients/consents.ts';
import { userActor } from '../audit/index.ts';
import { html, type Html } from '../ui/html.ts';
import { bodyField, frameFor, sendMessage, type Kit } from './kit.ts';
import { checkSessionCsrf, redirect, requireSignedIn, type AccountSection, type AccountView } from './account-page.ts';

const WITHDRAW_PATH = '/account/consents/withdraw';

async function consentsSection(store: Store, view: AccountView): Promise<Html> {
  const { t } = view;
  const consents = await listConsents(store.db, view.user.id);
  const clients = await Promise.all(consents.map((c) => findClient(store.db, c.client_id)));
  const rows = consents.flatMap((c, i) => {
    const client = clients[i];
    if (!client) return [];
    // prettier-ignore
    return [html`<li><span class="label">${client.name}</span>
<form method="post" action="${WITHDRAW_PATH}" class="inline">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
<input type="hidden" name="client_id" value="${client.client_id}">
<button type="submit" class="secondary" aria-label="${t('consents.withdraw_named', { client: client.name })}">${t('consents.withdraw')}</button>
</form></li>`];
  });
  // prettier-ignore
  return html`<section aria-labelledby="consents-heading" id="consents">
<h2 id="consents-heading">${t('consents.title')}</h2>
${rows.length ? html`<p class="hint">${t('consents.intro')}</p><ul class="consents">${rows}</ul>` : html`<p>${t('consents.none')}</p>`}
</section>`;
}

async function withdraw(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return reply;
  if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: bodyField(request, kit.csrf.field) }))
    return reply;
  const clientId = bodyField(request, 'client_id');
  if (typeof clientId !== 'string' || clientId.length > 200) return sendMessage(reply, frame, 400, 'consents.unknown');
  const change = { actor: userActor(who.user, request), now: kit.now() };
  if (!(await withdrawConsent(kit.store, who.user, clientId, change)))
    return sendMessage(reply, frame, 404, 'consents.unknown');
  return redirect(reply, '/account#consents');
}

/** The section, and its route (registered with the account page's, which parse its form). */
export function accountConsents(kit: Kit): AccountSection {
  return {
    render: (view) => consentsSection(kit.store, view),
    routes: async (app: FastifyInstance) => {
      app.post(WITHDRAW_PATH, (request, reply) => withdraw(kit, request, reply));
    },
  };
}
