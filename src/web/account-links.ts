// The account page's section of linked sign-in providers (docs/upstream.md): each upstream identity
// linked to the account, with a button that unlinks it while another way to sign in remains, and
// each other enabled provider of the organization, with a button that links it. Linking is the
// upstream sign-in flow with the purpose `link`:
//   POST /account/links/link: signed in -> this session's CSRF token -> a recent sign-in -> a
//     provider of the user's organization not linked yet -> the request under way, bound to the
//     account, the session and the browser (its cookie) -> the browser goes upstream
//   the OIDC callback or the SAML ACS: the protocol's checks, the browser's binding cookie
//   GET /account/links/return/<request id>: the session must still be the one that started it (same
//     session, same account) -> the provider still enabled -> the upstream authenticated the person
//     since the request started (auth_time / AuthnInstant) -> the identity is linked to that account
//     (linkOwnIdentity: the same link, refusals and audit records as the other surfaces) -> back to
//     the account page, which says which identity was linked.
// Nobody is ever signed in by a link, and the session's user never changes. Someone else's link
// request cannot complete in this browser: its binding cookie is missing, and it belongs to
// another account and session.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  linksOfUser,
  linkOwnIdentity,
  recordRefusal,
  single,
  unlinkAccount,
  type LinkRefusal,
  type LinkView,
} from '../upstream/linking.ts';
import { enabledProvidersOf, findUpstreamProvider } from '../upstream/providers.ts';
import { peekUpstreamRequest, REQUEST_ID } from '../upstream/requests.ts';
import { signedInSince, type UpstreamAssertion, type UpstreamProvider } from '../upstream/types.ts';
import { abandonLinkRequest, takeLinkAssertion } from '../store/upstream.ts';
import { findUserById, findUserBySub } from '../store/directory.ts';
import { userActor } from '../audit/index.ts';
import { AppError } from '../errors.ts';
import { html, type Html } from '../ui/html.ts';
import { notice } from '../ui/layout.ts';
import type { MessageKey } from '../ui/i18n.ts';
import type { Frame } from './pages.ts';
import { bodyField, frameFor, sendMessage, type Kit } from './kit.ts';
import {
  askToSignInAgain,
  checkSessionCsrf,
  recentlySignedIn,
  redirect,
  requireSignedIn,
  type AccountSection,
  type AccountView,
  type Who,
} from './account-page.ts';
import { LINK_RETURN_PATH, providerFrame, sendUpstream, sendUpstreamPage } from './upstream-signin.ts';

const UNLINK_PATH = '/account/links/unlink';
const LINK_PATH = '/account/links/link';

/** How long after a link the account page says which upstream identity it was. */
const LINKED_NOTICE_MS = 10 * 60 * 1000;

/**
 * Which upstream identity a link of this account just linked, from the finished link request the
 * page was sent back with (never from the address): "Linked {provider} as {e-mail}".
 */
async function linkedNotice(kit: Kit, view: AccountView, links: LinkView[]): Promise<string | undefined> {
  if (view.done?.what !== 'linked' || view.done.ref === undefined) return undefined;
  const row = await peekUpstreamRequest(kit.store, view.done.ref);
  if (row?.purpose !== 'link' || row.user_id === null || Number(row.user_id) !== view.user.id) return undefined;
  if (row.finished_at === null || !row.assertion || kit.now() - Number(row.finished_at) > LINKED_NOTICE_MS)
    return undefined;
  const assertion = JSON.parse(row.assertion) as UpstreamAssertion;
  const link = links.find((l) => l.upstream === row.provider_id && l.subject === assertion.subject);
  if (!link) return undefined;
  const as = single(assertion.attributes, 'email') ?? single(assertion.attributes, 'eppn');
  const name = single(assertion.attributes, 'name');
  const shown = as ?? name;
  return shown === undefined
    ? view.t('account.linked_provider', { name: link.name })
    : view.t('account.linked_as', { name: link.name, as: shown });
}

async function linksSection(kit: Kit, view: AccountView): Promise<Html> {
  const { t } = view;
  const links = await linksOfUser(kit.store, view.user.id);
  const linkedNow = await linkedNotice(kit, view, links);
  const linked = new Set(links.map((l) => l.upstream));
  const available = (await enabledProvidersOf(kit.store, view.user.org_id)).filter((p) => !linked.has(p.id));
  // prettier-ignore
  const rows = links.map((l) => html`<li><span class="label">${l.name}</span>
<form method="post" action="${UNLINK_PATH}" class="inline">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
<input type="hidden" name="upstream" value="${l.upstream}">
<button type="submit" class="secondary">${t('account.unlink', { name: l.name })}</button>
</form></li>`);
  // prettier-ignore
  const offers = available.map((p) => html`<li><span class="label">${p.name}</span>
<form method="post" action="${LINK_PATH}" class="inline">
<input type="hidden" name="${view.csrf.field}" value="${view.csrf.token}">
<input type="hidden" name="upstream" value="${p.id}">
<button type="submit" class="secondary">${t('account.link', { name: p.name })}</button>
</form></li>`);
  // prettier-ignore
  return html`<section aria-labelledby="links-heading" id="links">
<h2 id="links-heading">${t('account.links_title')}</h2>
${notice(linkedNow)}
${rows.length ? html`<ul class="consents">${rows}</ul>` : html`<p>${t('account.links_none')}</p>`}
${offers.length ? html`<h3>${t('account.link_title')}</h3>
<p>${t('account.link_intro')}</p>
<ul class="consents">${offers}</ul>` : html``}
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

/** Starts linking a provider: the browser goes upstream with a request bound to this account, session and browser. */
async function startLink(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return reply;
  if (!checkSessionCsrf(kit, request, reply, frame, { who, presented: bodyField(request, kit.csrf.field) }))
    return reply;
  // A new way into the account: not for someone at an unattended, still signed-in browser.
  if (!recentlySignedIn(kit, who)) return askToSignInAgain(kit, request, reply, frame, who, 'account.reauth_link');
  const id = bodyField(request, 'upstream');
  if (typeof id !== 'string' || id.length > 40) return sendMessage(reply, frame, 400, 'error.generic');
  const provider = await findUpstreamProvider(kit.store, id);
  // Another organization's provider is as unknown here as one that does not exist.
  if (!provider || provider.orgId !== who.user.org_id) return sendMessage(reply, frame, 404, 'upstream.unknown');
  const branded = await providerFrame(kit, frame, provider);
  if (!provider.enabled)
    return sendMessage(reply, branded, 403, 'upstream.provider_disabled', { vars: { name: provider.name } });
  if ((await linksOfUser(kit.store, who.user.id)).some((l) => l.upstream === provider.id))
    return sendMessage(reply, branded, 409, 'account.link_exists', { vars: { name: provider.name } });
  // The person links the identity they sign in as now at the provider, not one a session there stands in for.
  return sendUpstream(kit, request, reply, provider, {
    purpose: { kind: 'link', userId: who.user.id, sessionUid: who.session.uid },
    frame: branded,
    // prompt=login and max_age=0 (OIDC), ForceAuthn (SAML); whether the upstream did is checked on return.
    reauthenticate: { prompt: true, maxAge: 0 },
  });
}

const LINK_REFUSALS: Record<
  LinkRefusal | 'session' | 'expired' | 'provider_disabled' | 'not_fresh',
  { status: number; message: MessageKey }
> = {
  session: { status: 403, message: 'account.link_session' },
  expired: { status: 400, message: 'account.link_expired' },
  provider_disabled: { status: 403, message: 'upstream.provider_disabled' },
  not_fresh: { status: 403, message: 'account.link_not_fresh' },
  identity_linked_elsewhere: { status: 409, message: 'account.link_identity_elsewhere' },
  account_linked_elsewhere: { status: 409, message: 'account.link_account_elsewhere' },
  disabled: { status: 403, message: 'upstream.disabled' },
  wrong_organization: { status: 403, message: 'account.link_wrong_organization' },
  no_account: { status: 403, message: 'account.link_session' },
};

function linkRefused(
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  provider: Pick<UpstreamProvider, 'id' | 'name'> | undefined,
  reason: keyof typeof LINK_REFUSALS,
) {
  request.log.info({ event: 'upstream.link_refused', upstream: provider?.id, reason }, 'upstream link refused');
  const { status, message } = LINK_REFUSALS[reason];
  return sendUpstreamPage(reply, frame, status, message, {
    name: provider?.name ?? '',
    title: 'account.link_failed_title',
    advice: 'account.link_advice',
  });
}

type ReturnParams = { Params: { rid: string } };

/**
 * A link request whose answer arrived while the browser is signed out, or signed in to another
 * account or session: it is ended (it cannot be finished later) and the refusal audited, against
 * the account that started it.
 */
async function recordOtherSession(
  kit: Kit,
  request: FastifyRequest<ReturnParams>,
  who: Who | undefined,
): Promise<UpstreamProvider | undefined> {
  if (!REQUEST_ID.test(request.params.rid)) return undefined;
  const row = await abandonLinkRequest(kit.store.db, request.params.rid, kit.now());
  if (!row?.assertion || row.user_id === null) return undefined;
  const provider = await findUpstreamProvider(kit.store, row.provider_id);
  const owner = await findUserById(kit.store.db, Number(row.user_id));
  if (!provider) return undefined;
  const subject = (JSON.parse(row.assertion) as UpstreamAssertion).subject;
  await recordRefusal(kit.store, provider, subject, 'session', {
    actor: who ? userActor(who.user, request) : { type: 'user', id: null, requestId: request.id, ip: request.ip },
    now: kit.now(),
    ...(owner ? { user: owner } : {}),
  });
  return provider;
}

/**
 * Back from the provider (after the OIDC callback or the SAML ACS checked its answer in this
 * browser): the request is taken for this session's account only, and the identity linked to it.
 */
async function linkReturn(kit: Kit, request: FastifyRequest<ReturnParams>, reply: FastifyReply) {
  reply.header('cache-control', 'no-store');
  const frame = frameFor(request);
  // The session's account as it is now, disabled or not (a disabled account is refused by the linking rules).
  const session = await kit.sessions.current(request, reply);
  const user = session ? await findUserBySub(kit.store.db, session.accountId) : undefined;
  const who = session && user ? { session, user } : undefined;
  const now = kit.now();
  // Signed out, or now another account's session: the request is not this session's to finish.
  const row =
    who && REQUEST_ID.test(request.params.rid)
      ? await takeLinkAssertion(
          kit.store.db,
          request.params.rid,
          { userId: who.user.id, sessionUid: who.session.uid },
          now,
        )
      : undefined;
  const provider = row ? await findUpstreamProvider(kit.store, row.provider_id) : undefined;
  if (!who || !row?.assertion || !provider) {
    // A live request of another account or session is refused (and ended); anything else has expired or was used.
    const other = await recordOtherSession(kit, request, who);
    if (other) return linkRefused(request, reply, await providerFrame(kit, frame, other), other, 'session');
    const known = await peekUpstreamRequest(kit.store, request.params.rid);
    const of = known?.purpose === 'link' ? await findUpstreamProvider(kit.store, known.provider_id) : undefined;
    if (!of) return sendMessage(reply, frame, 400, 'error.expired');
    return linkRefused(request, reply, await providerFrame(kit, frame, of), of, 'expired');
  }
  const branded = await providerFrame(kit, frame, provider);
  const assertion = JSON.parse(row.assertion) as UpstreamAssertion;
  const change = { actor: userActor(who.user, request), now };
  // Refused here, audited like the linking rules' refusals.
  const refuse = async (reason: 'provider_disabled' | 'not_fresh') => {
    await recordRefusal(kit.store, provider, assertion.subject, reason, { ...change, user: who.user });
    return linkRefused(request, reply, branded, provider, reason);
  };
  if (!provider.enabled) return refuse('provider_disabled');
  // The identity the person signed in as just now, not one an upstream session (maybe someone
  // else's, left in this browser) stood in for: the upstream must say it authenticated them anew.
  if (!signedInSince(assertion, Number(row.created_at))) return refuse('not_fresh');
  const outcome = await linkOwnIdentity(kit.store, provider, who.user, assertion.subject, change);
  if (!outcome.ok) return linkRefused(request, reply, branded, provider, outcome.reason);
  request.log.info({ event: 'upstream.linked', upstream: provider.id }, 'upstream identity linked by the user');
  return redirect(reply, `/account?done=linked&request=${row.id}#links`);
}

/** The section, and its routes (registered with the account page's, which parse its forms). */
export function accountLinks(kit: Kit): AccountSection {
  return {
    render: (view) => linksSection(kit, view),
    routes: async (app: FastifyInstance) => {
      app.post(UNLINK_PATH, (request, reply) => unlink(kit, request, reply));
      app.post(LINK_PATH, (request, reply) => startLink(kit, request, reply));
      app.get<ReturnParams>(`${LINK_RETURN_PATH}/:rid`, (request, reply) => linkReturn(kit, request, reply));
    },
  };
}
