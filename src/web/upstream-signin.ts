// Signing in through an organization's upstream identity provider (docs/upstream.md). The sign-in
// page links each enabled provider; the browser goes upstream from /interaction/<uid>/upstream/<id>
// (or straight away for an authorization request with `upstream=<id>`), comes back to the
// provider's redirect URI /upstream/<id>/callback (OpenID Connect) or the SAML ACS, where the
// protocol checks run and establish an UpstreamAssertion, and finishUpstreamSignIn hands it to the
// interaction: /interaction/<uid>/upstream-return/<request id>, where the interaction cookie proves
// it is the browser that started, the linking rules pick the account, the session is recorded
// (amr ["fed", ...], the upstream's acr, never raised) and a user without a passkey is offered one.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientKey } from '../http/rate-limit.ts';
import { countUpstreamSignIn } from '../http/metrics.ts';
import {
  enabledProviderLogo,
  enabledProvidersOf,
  findUpstreamProvider,
  oidcCredentials,
  upstreamLogoPath,
} from '../upstream/providers.ts';
import { resolveAccount, recordRefusal, type LinkRefusal } from '../upstream/linking.ts';
import {
  authorizationUrl,
  completeSignIn,
  newChecks,
  UpstreamError,
  type Reauthenticate,
  type UpstreamFailure,
} from '../upstream/oidc.ts';
import {
  consumeUpstreamRequest,
  startUpstreamRequest,
  REQUEST_ID,
  type UpstreamPurpose,
} from '../upstream/requests.ts';
import type { UpstreamAssertion, UpstreamProvider, UpstreamRequest } from '../upstream/types.ts';
import { storeUpstreamAssertion, takeUpstreamAssertion, findOrganizationByRealm } from '../store/upstream.ts';
import { findOrganization } from '../store/directory.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { ACR_BASELINE, ACR_VALUES, passwordSatisfies } from '../oauth/authentication-context.ts';
import { withBrand } from '../ui/frame.ts';
import { sendAsset } from '../ui/page-brand.ts';
import type { MessageKey } from '../ui/i18n.ts';
import { messagePage, type Frame, type UpstreamChoice } from './pages.ts';
import { frameFor, overLimit, sendPage, signInSucceeded, type Kit } from './kit.ts';
import { signInAccepted, signInRefused } from './sign-in-audit.ts';
import { offerApplies, renderOffer } from './passkey-offer.ts';
import { loadInteraction, recordResult, requirePrompt, type Loaded } from './interaction.ts';
import { startSamlUpstream, upstreamSamlRoutes } from './upstream-saml.ts';
import { bindingOf, clearBindingCookie, newBinding, setBindingCookie } from './upstream-binding.ts';

const SNOOZE_ONLY = { ignorePolicy: true } as const;

/** Where a link request comes back to: the account page's (account-links.ts), /account/links/return/<request id>. */
export const LINK_RETURN_PATH = '/account/links/return';

/** The redirect URI registered at an OpenID Connect upstream for provider id. */
export const callbackUrl = (kit: Kit, id: string) => new URL(`/upstream/${id}/callback`, kit.config.publicUrl).href;

/** The organization a sign-in page belongs to: the login_hint's realm, if any. */
async function organizationOf(kit: Kit, loaded: Loaded): Promise<number | undefined> {
  const hint = loaded.interaction.params.login_hint;
  if (typeof hint !== 'string' || hint.length > 320) return undefined;
  const at = hint.lastIndexOf('@');
  if (at < 1) return undefined;
  const org = await findOrganizationByRealm(kit.store.db, hint.slice(at + 1).toLowerCase());
  return org ? Number(org.id) : undefined;
}

/**
 * What the sign-in page shows of upstream providers: the links of the organization's enabled ones,
 * and its brand. None when the request asks for more than an upstream sign-in can reach.
 */
export async function upstreamChoices(
  kit: Kit,
  loaded: Loaded,
): Promise<{ frame: Frame; upstreams: UpstreamChoice[] }> {
  const orgId = await organizationOf(kit, loaded);
  if (orgId === undefined) return { frame: loaded.frame, upstreams: [] };
  const frame = withBrand(loaded.frame, await kit.branding.forOrg(orgId));
  if (!passwordSatisfies(loaded.interaction.params)) return { frame, upstreams: [] };
  const providers = await enabledProvidersOf(kit.store, orgId);
  const uid = loaded.interaction.uid;
  return {
    frame,
    upstreams: providers.map((p) => ({
      name: p.name,
      href: `/interaction/${uid}/upstream/${p.id}`,
      ...(p.logo ? { logo: upstreamLogoPath(p) } : {}),
    })),
  };
}

type LogoParams = { Params: { id: string }; Querystring: { v?: string } };

/** An enabled provider's logo, from the service's own origin; anything else is a 404. */
async function logoRoute(kit: Kit, request: FastifyRequest<LogoParams>, reply: FastifyReply) {
  const logo = await enabledProviderLogo(kit.store, request.params.id);
  if (!logo) return reply.code(404).type('text/plain; charset=utf-8').send('Not Found');
  return sendAsset(request, reply, { type: logo.type, data: logo.data, version: logo.etag });
}

/** The provider an authorization request named with `upstream=<id>`, when there is such an enabled one. */
export async function requestedUpstream(kit: Kit, loaded: Loaded): Promise<UpstreamProvider | undefined> {
  const id = loaded.interaction.params.upstream;
  if (typeof id !== 'string') return undefined;
  const provider = await findUpstreamProvider(kit.store, id);
  return provider?.enabled && passwordSatisfies(loaded.interaction.params) ? provider : undefined;
}

export async function providerFrame(kit: Kit, frame: Frame, provider: UpstreamProvider | undefined): Promise<Frame> {
  return provider ? withBrand(frame, await kit.branding.forOrg(provider.orgId)) : frame;
}

/** The organization's error page for an upstream sign-in: what happened, a way back, the request id. */
export function sendUpstreamPage(
  reply: FastifyReply,
  frame: Frame,
  status: number,
  message: MessageKey,
  {
    name,
    uid,
    advice = 'error.try_later',
    title = 'upstream.failed_title',
  }: { name: string; uid?: string; advice?: MessageKey; title?: MessageKey },
) {
  const page = messagePage(frame, {
    title: frame.t(title, { name }),
    message: frame.t(message, { name }),
    advice: frame.t(advice),
    reference: reply.request.id,
    link: uid
      ? { href: `/interaction/${uid}`, text: frame.t('upstream.back') }
      : { href: '/account', text: frame.t('error.back_home') },
  });
  return sendPage(reply, status, page);
}

const FAILURE_MESSAGES: Record<UpstreamFailure, MessageKey> = {
  denied: 'upstream.denied',
  unreachable: 'upstream.unreachable',
  timeout: 'upstream.timeout',
  invalid: 'upstream.invalid',
};

/**
 * The upstream failed (refused, unreachable, too slow, an answer that failed its checks): a log
 * line with the cause, the metric, and the organization's error page. Used by every protocol.
 */
export async function upstreamFailed(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: UpstreamProvider,
  failure: { kind: UpstreamFailure; detail: string; uid?: string },
) {
  request.log.warn(
    {
      event: 'upstream.failed',
      upstream: provider.id,
      provider_type: provider.type,
      kind: failure.kind,
      detail: failure.detail,
    },
    'upstream sign-in failed',
  );
  countUpstreamSignIn(provider.type, 'error');
  const frame = await providerFrame(kit, frameFor(request), provider);
  const status = failure.kind === 'timeout' ? 504 : failure.kind === 'unreachable' ? 502 : 400;
  return sendUpstreamPage(reply, frame, status, FAILURE_MESSAGES[failure.kind], {
    name: provider.name,
    uid: failure.uid,
  });
}

/**
 * Whether the relying party asked for a fresh sign-in (prompt=login, max_age): then the upstream is
 * asked for one too (OIDC prompt=login / max_age, SAML ForceAuthn), or its own session would do.
 */
export function reauthenticationOf(loaded: Loaded): Reauthenticate | undefined {
  const { prompt, max_age: maxAge } = loaded.interaction.params;
  const login = typeof prompt === 'string' && prompt.split(' ').includes('login');
  const age = typeof maxAge === 'string' || typeof maxAge === 'number' ? Number(maxAge) : NaN;
  const hasAge = Number.isSafeInteger(age) && age >= 0;
  if (!login && !hasAge) return undefined;
  return { prompt: login, ...(hasAge ? { maxAge: age } : {}) };
}

/** Sends the browser to the provider for an interaction's sign-in. */
export function startUpstream(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  loaded: Loaded,
  provider: UpstreamProvider,
) {
  const hint = loaded.interaction.params.login_hint;
  const reauthenticate = reauthenticationOf(loaded);
  return sendUpstream(kit, request, reply, provider, {
    purpose: { kind: 'sign-in', interactionUid: loaded.interaction.uid },
    frame: loaded.frame,
    ...(typeof hint === 'string' && hint.length <= 320 ? { loginHint: hint } : {}),
    ...(reauthenticate ? { reauthenticate } : {}),
  });
}

/**
 * Sends the browser to the provider, for a sign-in or for a link the signed-in user asked for (the
 * account page): the request under way is recorded first, with its purpose, and bound to this
 * browser by a cookie. Counts against the per-address limit of the password form.
 */
export async function sendUpstream(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: UpstreamProvider,
  {
    purpose,
    frame,
    loginHint,
    reauthenticate,
  }: { purpose: UpstreamPurpose; frame: Frame; loginHint?: string; reauthenticate?: Reauthenticate },
) {
  const uid = purpose.kind === 'sign-in' ? purpose.interactionUid : undefined;
  const retry = await overLimit(kit.limits.ip, clientKey(request.ip));
  if (retry)
    return sendUpstreamPage(
      reply.header('retry-after', retry),
      await providerFrame(kit, frame, provider),
      429,
      'error.rate_limited',
      {
        name: provider.name,
        uid,
      },
    );
  if (provider.type === 'saml')
    return startSamlUpstream(kit, request, reply, provider, {
      purpose,
      failed: upstreamFailed,
      forceAuthn: reauthenticate !== undefined,
    });
  try {
    const checks = newChecks();
    const creds = await oidcCredentials(kit.store, kit.keys, provider.id);
    const binding = newBinding();
    const pending = await startUpstreamRequest(kit.store, {
      providerId: provider.id,
      purpose,
      ...checks,
      browserBinding: binding,
      now: kit.now(),
    });
    const url = await authorizationUrl(provider, creds, pending, {
      redirectUri: callbackUrl(kit, provider.id),
      timeoutMs: kit.config.upstreamTimeoutMs,
      ...(loginHint !== undefined ? { loginHint } : {}),
      ...(reauthenticate ? { reauthenticate } : {}),
    });
    request.log.info(
      { event: 'upstream.start', upstream: provider.id, provider_type: provider.type, purpose: purpose.kind },
      'sent upstream',
    );
    setBindingCookie(kit, reply, pending.id, binding, 'oidc');
    return reply.code(303).header('location', url.href).header('cache-control', 'no-store').send();
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    return upstreamFailed(kit, request, reply, provider, {
      kind: err.kind,
      detail: err.detail,
      ...(uid ? { uid } : {}),
    });
  }
}

type StartParams = { Params: { uid: string; id: string } };

async function startRoute(kit: Kit, request: FastifyRequest<StartParams>, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !requirePrompt(reply, loaded, 'login')) return reply;
  const provider = await findUpstreamProvider(kit.store, request.params.id);
  if (!provider)
    return sendUpstreamPage(reply, loaded.frame, 404, 'upstream.unknown', { name: '', uid: loaded.interaction.uid });
  const frame = await providerFrame(kit, loaded.frame, provider);
  if (!provider.enabled)
    return sendUpstreamPage(reply, frame, 403, 'upstream.provider_disabled', {
      name: provider.name,
      uid: loaded.interaction.uid,
    });
  if (!passwordSatisfies(loaded.interaction.params))
    return sendUpstreamPage(reply, frame, 403, 'upstream.passkey_required', {
      name: provider.name,
      uid: loaded.interaction.uid,
      advice: 'upstream.refused_advice',
    });
  return startUpstream(kit, request, reply, loaded, provider);
}

type CallbackParams = { Params: { id: string }; Querystring: Record<string, string | undefined> };

/** The OpenID Connect upstream sent the browser back: the request is consumed, the code exchanged and checked. */
async function oidcCallback(kit: Kit, request: FastifyRequest<CallbackParams>, reply: FastifyReply) {
  reply.header('cache-control', 'no-store');
  const provider = await findUpstreamProvider(kit.store, request.params.id);
  if (!provider || provider.type !== 'oidc')
    return sendUpstreamPage(reply, frameFor(request), 404, 'upstream.unknown', { name: '' });
  const state = request.query.state;
  const pending =
    typeof state === 'string'
      ? await consumeUpstreamRequest(kit.store, state, provider.id, bindingOf(kit, request, state), kit.now())
      : undefined;
  if (!pending) {
    request.log.warn(
      { event: 'upstream.failed', upstream: provider.id, kind: 'state' },
      'upstream answer for no request under way in this browser',
    );
    countUpstreamSignIn(provider.type, 'error');
    const frame = await providerFrame(kit, frameFor(request), provider);
    return sendUpstreamPage(reply, frame, 400, 'upstream.expired', { name: provider.name });
  }
  clearBindingCookie(kit, reply, pending.id, 'oidc');
  if (!provider.enabled) return refusedPage(kit, request, reply, provider, 'provider_disabled', pending.interactionUid);
  try {
    const creds = await oidcCredentials(kit.store, kit.keys, provider.id);
    const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
    const currentUrl = new URL(`${callbackUrl(kit, provider.id)}${query}`);
    const assertion = await completeSignIn(provider, creds, pending, {
      currentUrl,
      timeoutMs: kit.config.upstreamTimeoutMs,
    });
    return finishUpstreamSignIn(kit, request, reply, pending, assertion);
  } catch (err) {
    if (!(err instanceof UpstreamError)) throw err;
    return upstreamFailed(kit, request, reply, provider, {
      kind: err.kind,
      detail: err.detail,
      uid: pending.interactionUid,
    });
  }
}

/**
 * Every protocol's last step (the OIDC callback, the SAML ACS), once its checks passed: the
 * assertion is kept with the request under way, and the browser goes on to its interaction,
 * where the sign-in completes (the interaction's cookie is scoped to /interaction/<uid>), or, for
 * a link, back to the account page, where the session must still be the one that asked for it
 * (the ACS receives a cross-site POST, which carries no session cookie).
 */
export async function finishUpstreamSignIn(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  pending: UpstreamRequest,
  assertion: UpstreamAssertion,
) {
  if (assertion.providerId !== pending.providerId) throw new Error('assertion of another provider');
  await storeUpstreamAssertion(kit.store.db, pending.id, JSON.stringify(assertion));
  const next = pending.link
    ? `${LINK_RETURN_PATH}/${pending.id}`
    : `/interaction/${pending.interactionUid}/upstream-return/${pending.id}`;
  return reply.code(303).header('location', next).header('cache-control', 'no-store').send();
}

type ReturnParams = { Params: { uid: string; rid: string } };

const REFUSAL_MESSAGES: Record<LinkRefusal | 'provider_disabled', MessageKey> = {
  no_account: 'upstream.no_account',
  account_linked_elsewhere: 'upstream.account_linked_elsewhere',
  identity_linked_elsewhere: 'upstream.identity_linked_elsewhere',
  disabled: 'upstream.disabled',
  wrong_organization: 'upstream.wrong_organization',
  provider_disabled: 'upstream.provider_disabled',
};

async function refusedPage(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  provider: UpstreamProvider,
  reason: LinkRefusal | 'provider_disabled',
  uid: string,
) {
  request.log.info({ event: 'upstream.refused', upstream: provider.id, reason }, 'upstream sign-in refused');
  countUpstreamSignIn(provider.type, 'refused');
  const frame = await providerFrame(kit, frameFor(request), provider);
  return sendUpstreamPage(reply, frame, 403, REFUSAL_MESSAGES[reason], {
    name: provider.name,
    uid,
    advice: 'upstream.refused_advice',
  });
}

/** The acr an upstream sign-in records: the upstream's, but never one of this service's passkey classes. */
export function upstreamAcr(acr: string | undefined): string {
  if (acr === undefined) return ACR_BASELINE;
  return (ACR_VALUES as readonly string[]).includes(acr) ? ACR_BASELINE : acr;
}

/**
 * The session's auth time (seconds): when the user authenticated at the upstream, as it said, never
 * later than now; now only when it said nothing.
 */
export function authTimeOf(assertion: UpstreamAssertion, now: number): number {
  const at = assertion.authTime;
  return Math.floor((at !== undefined && Number.isFinite(at) ? Math.min(at, now) : now) / 1000);
}

function clientIdOf(loaded: Loaded): string | null {
  const id = loaded.interaction.params.client_id;
  return typeof id === 'string' ? id : null;
}

/** Back in the interaction: the linking rules pick the account, and the sign-in is recorded. */
async function upstreamReturn(kit: Kit, request: FastifyRequest<ReturnParams>, reply: FastifyReply) {
  reply.header('cache-control', 'no-store');
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !requirePrompt(reply, loaded, 'login')) return reply;
  const { uid } = loaded.interaction;
  const row = REQUEST_ID.test(request.params.rid)
    ? await takeUpstreamAssertion(kit.store.db, request.params.rid, uid, kit.now())
    : undefined;
  const provider = row ? await findUpstreamProvider(kit.store, row.provider_id) : undefined;
  if (!row?.assertion || !provider)
    return sendUpstreamPage(reply, loaded.frame, 400, 'error.expired', { name: '', uid });
  if (!provider.enabled) return refusedPage(kit, request, reply, provider, 'provider_disabled', uid);
  const assertion = JSON.parse(row.assertion) as UpstreamAssertion;
  if (!passwordSatisfies(loaded.interaction.params)) {
    const frame = await providerFrame(kit, loaded.frame, provider);
    countUpstreamSignIn(provider.type, 'refused');
    return sendUpstreamPage(reply, frame, 403, 'upstream.passkey_required', {
      name: provider.name,
      uid,
      advice: 'upstream.refused_advice',
    });
  }
  const actor = { type: 'user' as const, id: null, requestId: request.id, ip: request.ip };
  const outcome = await resolveAccount(kit.store, provider, assertion, { actor, now: kit.now() });
  const clientId = clientIdOf(loaded);
  if (!outcome.ok) {
    await recordRefusal(kit.store, provider, assertion.subject, outcome.reason, {
      actor: { ...actor, id: outcome.user?.eppn ?? null },
      now: kit.now(),
      ...(outcome.user ? { user: outcome.user } : {}),
    });
    if (outcome.user)
      await signInRefused(kit, request, { method: 'upstream', clientId, user: outcome.user }, outcome.reason);
    return refusedPage(kit, request, reply, provider, outcome.reason, uid);
  }
  const { user } = outcome;
  const org = await findOrganization(kit.store.db, user.org_id);
  if (!org) return refusedPage(kit, request, reply, provider, 'no_account', uid);
  // the upstream's own methods only where the operator trusts it with them (--trust-amr)
  const amr = ['fed', ...assertion.amr.filter((m) => m !== 'fed' && provider.trustAmr.includes(m))];
  await signInSucceeded(kit, request);
  await signInAccepted(kit, request, { method: 'upstream', clientId, user }, amr);
  countUpstreamSignIn(provider.type, 'success');
  const { interaction } = loaded;
  if (interaction.grantId && interaction.session?.accountId !== user.sub) interaction.grantId = undefined;
  const login = { accountId: user.sub, amr, acr: upstreamAcr(assertion.acr), ts: authTimeOf(assertion, kit.now()) };
  const returnTo = await recordResult(loaded, { login });
  if (
    (await listUserCredentials(kit.store.db, user.id)).length === 0 &&
    (await offerApplies(kit, request, user, SNOOZE_ONLY))
  )
    return renderOffer(kit, request, reply, loaded, { returnTo });
  return reply.code(303).header('location', returnTo).send();
}

export function upstreamRoutes(kit: Kit) {
  return async function upstream(app: FastifyInstance) {
    app.get<StartParams>('/interaction/:uid/upstream/:id', (request, reply) => startRoute(kit, request, reply));
    app.get<CallbackParams>('/upstream/:id/callback', (request, reply) => oidcCallback(kit, request, reply));
    app.get<LogoParams>('/upstream/:id/logo', (request, reply) => logoRoute(kit, request, reply));
    app.get<ReturnParams>('/interaction/:uid/upstream-return/:rid', (request, reply) =>
      upstreamReturn(kit, request, reply),
    );
    await app.register(upstreamSamlRoutes(kit, { finish: finishUpstreamSignIn, failed: upstreamFailed }));
  };
}
