// oidc-provider interactions: sign-in (passkey or password) and consent, under
// /interaction/<uid>, where the provider's interaction cookie is scoped. Each route is a short
// list of the named steps below; a step that answers the request itself returns undefined or false.
import { LOST_PASSKEY_PATH } from './lost-passkey.ts';
import { giveConsent } from '../clients/consents.ts';
import { userActor } from '../audit/index.ts';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { findClient, type ClientRow } from '../store/clients.ts';
import { findUserBySub, type User } from '../store/directory.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { consentCovers, consentScope as scopeOfConsent } from './grants.ts';
import { ATTRIBUTE_GROUPS } from '../vocabulary.ts';
import { consentPage, signInPage } from './pages.ts';
import { signedInPage, userSignals } from './passkey-pages.ts';
import type { MessageKey } from '../ui/i18n.ts';
import { bodyField, passwordSignIn, retryHeaders, sendMessage, sendPage, type Kit, type SignInFailure } from './kit.ts';
import { withBrand } from '../ui/frame.ts';
import { passkeySignIn, sendPasskeyOptions } from './passkey-sign-in.ts';
import { offerApplies, offerRoutes, renderOffer } from './passkey-offer.ts';
import { requestedUpstream, startUpstream, upstreamChoices, upstreamRoutes } from './upstream-signin.ts';
import {
  checkCsrf,
  checkCsrfHeader,
  finish,
  loadInteraction,
  recordResult,
  requirePrompt,
  scopeOf,
  type Loaded,
  type Params,
  type Req,
} from './interaction.ts';
import {
  AMR_PASSWORD,
  acrFor,
  classesReached,
  passwordSatisfies,
  requestedAcrs,
  requiresUserVerification,
} from '../oauth/authentication-context.ts';

function clientIdOf(loaded: Loaded): string | null {
  const id = loaded.interaction.params.client_id;
  return typeof id === 'string' ? id : null;
}

async function clientOf(kit: Kit, loaded: Loaded): Promise<ClientRow | undefined> {
  const id = loaded.interaction.params.client_id;
  return typeof id === 'string' ? findClient(kit.store.db, id) : undefined;
}

async function renderSignIn(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded, failure?: SignInFailure) {
  const { csrf } = kit;
  const { uid, params } = loaded.interaction;
  // the provider's client, kept in memory until the client changes: every sign-in shows this page
  const clientId = clientIdOf(loaded);
  const client = clientId === null ? undefined : await kit.provider.current().Client.find(clientId);
  const hint = typeof params.login_hint === 'string' && params.login_hint.length <= 320 ? params.login_hint : '';
  const passwordEnough = passwordSatisfies(params);
  const error = !passwordEnough && failure?.error === 'error.passkey' ? 'error.passkey_retry' : failure?.error;
  // With a login_hint in an organization's realm, the page is that organization's, with its upstream providers.
  const { frame, upstreams } = await upstreamChoices(kit, loaded);
  const page = signInPage(frame, {
    upstreams,
    subtitle: loaded.frame.t('signin.to', { client: client?.clientName ?? '' }),
    csrf: { field: csrf.field, token: csrf.token(request, reply, scopeOf(uid)) },
    username: failure?.username ?? hint,
    error: error ? loaded.frame.t(error) : undefined,
    passkeyOnly: passwordEnough ? undefined : loaded.frame.t('signin.passkey_required'),
    passwordAction: passwordEnough ? `/interaction/${uid}/login` : undefined,
    passkeyAction: `/interaction/${uid}/passkey`,
    optionsUrl: `/interaction/${uid}/passkey/options`,
    cancelAction: `/interaction/${uid}/abort`,
    lostPasskey: (await kit.selfRecoveryOffered()) ? LOST_PASSKEY_PATH : undefined,
    signals: failure?.unknownCredential
      ? { rpId: kit.webauthn.rpId, unknownCredential: failure.unknownCredential }
      : undefined,
  });
  return sendPage(reply, failure?.status ?? 200, page, { formTargets: loaded.formTargets }, retryHeaders(failure));
}

/**
 * Someone signs in while another user's session is open (prompt=login, or a shared browser):
 * the provider ends that session first — revoking its grants — and then resumes this request
 * with a fresh one. The request must not keep the other user's grant: it is not the new user's,
 * and revoking it would take the pending request down with it.
 */
async function signIn(
  kit: Kit,
  loaded: Loaded,
  { user, amr, attested = false }: { user: User; amr: string[]; attested?: boolean },
) {
  const acr = acrFor(amr, { attested, asked: requestedAcrs(loaded.interaction.params) });
  const login = { accountId: user.sub, amr, acr, ts: Math.floor(kit.now() / 1000) };
  const { interaction } = loaded;
  // saved with the result, in the one write of the interaction
  if (interaction.grantId && interaction.session?.accountId !== login.accountId) interaction.grantId = undefined;
  return recordResult(loaded, { login });
}

const consentScope = (loaded: Loaded, client: ClientRow) => scopeOfConsent(client, loaded.interaction.params.scope);

async function grantConsent(
  kit: Kit,
  request: Req,
  reply: FastifyReply,
  loaded: Loaded,
  accountId: string,
  scopes: string[],
) {
  const provider = kit.provider.current();
  const { interaction } = loaded;
  const details = interaction.prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  const existing = interaction.grantId ? await provider.Grant.find(interaction.grantId) : undefined;
  const grant = existing ?? new provider.Grant({ accountId, clientId: String(interaction.params.client_id) });
  const granted = new Set(scopes);
  const missing = (details.missingOIDCScope ?? []).filter((s) => granted.has(s));
  if (missing.length) grant.addOIDCScope(missing.join(' '));
  if (details.missingOIDCClaims?.length) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, resourceScopes] of Object.entries(details.missingResourceScopes ?? {}))
    grant.addResourceScope(indicator, resourceScopes.join(' '));
  const grantId = await grant.save();
  return finish(reply, loaded, { consent: { grantId } });
}

interface ConsentParties {
  accountId: string;
  user: User;
  client: ClientRow;
}

/** The signed-in user and the client still exist; otherwise the request ends with access_denied. */
async function loadConsentParties(
  kit: Kit,
  request: Req,
  reply: FastifyReply,
  loaded: Loaded,
): Promise<ConsentParties | undefined> {
  const accountId = loaded.interaction.session?.accountId;
  const user = accountId ? await findUserBySub(kit.store.db, accountId) : undefined;
  const client = await clientOf(kit, loaded);
  if (accountId && user && client) return { accountId, user, client };
  await finish(reply, loaded, {
    error: 'access_denied',
    error_description: 'account or client no longer exists',
  });
  return undefined;
}

async function consentStep(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded) {
  const parties = await loadConsentParties(kit, request, reply, loaded);
  if (!parties) return reply;
  const { accountId, user, client } = parties;
  const { scopes, remembered } = consentScope(loaded, client);
  // prompt=consent: ask, whatever was agreed to before (and for first-party clients too).
  const asked = loaded.interaction.prompt.reasons.includes('consent_prompt');
  if (!asked && (await consentCovers(kit.store, user.id, client, remembered)))
    return grantConsent(kit, request, reply, loaded, accountId, scopes);
  return renderConsent(kit, request, reply, loaded, { user, client, remembered });
}

async function renderConsent(
  kit: Kit,
  request: Req,
  reply: FastifyReply,
  loaded: Loaded,
  { user, client, remembered }: { user: User; client: ClientRow; remembered: string[] },
) {
  const { csrf } = kit;
  const groups = ATTRIBUTE_GROUPS.filter((g) => remembered.includes(g)).map((g) => `group.${g}` as MessageKey);
  const items: MessageKey[] = [
    'group.sub',
    ...groups,
    ...(remembered.includes('offline_access') ? (['group.offline_access'] as MessageKey[]) : []),
  ];
  // The user is known: the page wears their organization's brand.
  const frame = withBrand(loaded.frame, await kit.branding.forOrg(user.org_id));
  const page = consentPage(frame, {
    client: client.name,
    user: user.eppn,
    items,
    csrf: { field: csrf.field, token: csrf.token(request, reply, scopeOf(loaded.interaction.uid)) },
    action: `/interaction/${loaded.interaction.uid}/consent`,
  });
  return sendPage(reply, 200, page, { formTargets: loaded.formTargets });
}

// The routes: loadInteraction -> checks -> the step that answers.

async function showInteraction(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded) return reply;
  if (loaded.interaction.prompt.name === 'login') {
    // `upstream=<id>`: the application knows the user's provider (home-realm discovery).
    const upstream = await requestedUpstream(kit, loaded);
    if (upstream) return startUpstream(kit, request, reply, loaded, upstream);
    return renderSignIn(kit, request, reply, loaded);
  }
  if (loaded.interaction.prompt.name === 'consent') return consentStep(kit, request, reply, loaded);
  return sendMessage(reply, loaded.frame, 400, 'error.expired');
}

async function signInWithPassword(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !checkCsrf(kit, request, reply, loaded) || !requirePrompt(reply, loaded, 'login')) return reply;
  if (!passwordSatisfies(loaded.interaction.params)) return refusePassword(kit, request, reply, loaded);
  const result = await passwordSignIn(kit, request, clientIdOf(loaded));
  if (!result.ok) return renderSignIn(kit, request, reply, loaded, result);
  const returnTo = await signIn(kit, loaded, { user: result.user, amr: AMR_PASSWORD });
  // A browser that can make passkeys says so with the form; its user may be offered one.
  if (bodyField(request, 'webauthn') === '1' && (await offerApplies(kit, request, result.user)))
    return renderOffer(kit, request, reply, loaded, { returnTo });
  return continueSignedIn(kit, request, reply, loaded, result.user, returnTo);
}

/**
 * On to the client after a sign-in, password or passkey alike. A browser with the Signal API (the form
 * says so) first gets a short page that tells its credential manager which of the user's passkeys
 * still exist and the user's names, when the user has any passkey to tell about.
 */
async function continueSignedIn(
  kit: Kit,
  request: Req,
  reply: FastifyReply,
  loaded: Loaded,
  user: User,
  returnTo: string,
) {
  const redirect = () => reply.code(303).header('location', returnTo).send();
  if (bodyField(request, 'signals') !== '1') return redirect();
  const credentials = await listUserCredentials(kit.store.db, user.id);
  if (credentials.length === 0) return redirect();
  const signals = { ...userSignals(kit.webauthn.rpId, user, credentials), continueUrl: returnTo };
  return sendPage(reply, 200, signedInPage(loaded.frame, signals), { formTargets: loaded.formTargets });
}

/**
 * The request asked for a class of sign-in a password cannot reach (acr_values=phr, or an acr in
 * the claims parameter): the password is refused before it is checked or counted.
 */
function refusePassword(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded) {
  request.log.info({ event: 'login.failed', method: 'password', reason: 'passkey_required' }, 'password refused');
  return renderSignIn(kit, request, reply, loaded, { status: 403, error: 'error.password_not_enough' });
}

async function passkeyOptions(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !checkCsrfHeader(kit, request, reply, loaded)) return reply;
  // A request for MFA or AAL3 needs the authenticator to verify the user: the browser is told so.
  const requireUserVerification = requiresUserVerification(requestedAcrs(loaded.interaction.params));
  return sendPasskeyOptions(kit, request, reply, scopeOf(loaded.interaction.uid), { requireUserVerification });
}

async function signInWithPasskey(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !checkCsrf(kit, request, reply, loaded) || !requirePrompt(reply, loaded, 'login')) return reply;
  const result = await passkeySignIn(kit, request, scopeOf(loaded.interaction.uid), clientIdOf(loaded));
  if (!result.ok) return renderSignIn(kit, request, reply, loaded, result);
  // The request asked only for classes this passkey cannot reach (MFA without user verification,
  // AAL3 with a synced or unattested key): asking again would only bring the user back here.
  const asked = requestedAcrs(loaded.interaction.params);
  const reached = classesReached(result.amr, result.attested);
  if (asked.length > 0 && !asked.some((a) => reached.includes(a))) {
    request.log.info({ event: 'login.failed', method: 'passkey', reason: 'class_not_reached' }, 'passkey not enough');
    return renderSignIn(kit, request, reply, loaded, { status: 403, error: 'error.passkey_not_enough' });
  }
  const returnTo = await signIn(kit, loaded, result);
  return continueSignedIn(kit, request, reply, loaded, result.user, returnTo);
}

async function decideConsent(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !checkCsrf(kit, request, reply, loaded) || !requirePrompt(reply, loaded, 'consent')) return reply;
  if (bodyField(request, 'decision') !== 'allow')
    return finish(reply, loaded, { error: 'access_denied', error_description: 'End-User denied consent' });
  const parties = await loadConsentParties(kit, request, reply, loaded);
  if (!parties) return reply;
  const { scopes, remembered } = consentScope(loaded, parties.client);
  const actor = userActor(parties.user, request);
  await giveConsent(kit.store, parties.user, parties.client.client_id, remembered, { actor, now: kit.now() });
  return grantConsent(kit, request, reply, loaded, parties.accountId, scopes);
}

async function abort(kit: Kit, request: Req, reply: FastifyReply) {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded || !checkCsrf(kit, request, reply, loaded)) return reply;
  return finish(reply, loaded, { error: 'access_denied', error_description: 'End-User aborted interaction' });
}

export function interactionRoutes(kit: Kit) {
  return async function interactions(app: FastifyInstance) {
    app.get<Params>('/interaction/:uid', (request, reply) => showInteraction(kit, request, reply));
    app.post<Params>('/interaction/:uid/login', (request, reply) => signInWithPassword(kit, request, reply));
    app.post<Params>('/interaction/:uid/passkey/options', (request, reply) => passkeyOptions(kit, request, reply));
    app.post<Params>('/interaction/:uid/passkey', (request, reply) => signInWithPasskey(kit, request, reply));
    app.post<Params>('/interaction/:uid/consent', (request, reply) => decideConsent(kit, request, reply));
    app.post<Params>('/interaction/:uid/abort', (request, reply) => abort(kit, request, reply));
    await app.register(offerRoutes(kit));
    await app.register(upstreamRoutes(kit));
  };
}
