// oidc-provider interactions: sign-in (passkey or password) and consent, under
// /interaction/<uid>, where the provider's interaction cookie is scoped.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Interaction, InteractionResults } from 'oidc-provider';
import { errors as oidcErrors } from 'oidc-provider';
import { findClient, type ClientRow } from '../store/clients.ts';
import { findUserBySub, type User } from '../store/directory.ts';
import { saveConsent } from '../store/consents.ts';
import { consentCovers, consentScope as scopeOfConsent } from './grants.ts';
import { ATTRIBUTE_GROUPS } from '../vocabulary.ts';
import { adoptRawCookies } from './session.ts';
import { originOf } from './html.ts';
import { consentPage, signInPage, type Frame } from './pages.ts';
import type { MessageKey } from './i18n.ts';
import {
  amrForPasskey,
  clientKey,
  frameFor,
  overLimit,
  passwordSignIn,
  sendMessage,
  sendPage,
  signInSucceeded,
  type Kit,
} from './kit.ts';

type Params = { Params: { uid: string } };
type Req = FastifyRequest<Params>;

const UID = /^[A-Za-z0-9_-]{1,64}$/;

interface Loaded {
  interaction: Interaction;
  frame: Frame;
  /** where the browser is sent once the interaction ends: forms must be allowed to go there */
  formTargets: string[];
}

export function interactionRoutes(kit: Kit) {
  const { csrf } = kit;
  const scopeOf = (uid: string) => `interaction:${uid}`;

  /** The interaction this browser holds for uid, or a page saying it is gone. */
  async function loadInteraction(request: Req, reply: FastifyReply): Promise<Loaded | undefined> {
    const fallback = frameFor(request);
    if (!UID.test(request.params.uid)) {
      sendMessage(reply, fallback, 400, 'error.expired');
      return undefined;
    }
    kit.sessions.prepare(request);
    let interaction: Interaction;
    try {
      interaction = await kit.provider.current().interactionDetails(request.raw, reply.raw);
    } catch (err) {
      adoptRawCookies(reply);
      if (err instanceof oidcErrors.SessionNotFound) {
        sendMessage(reply, fallback, 400, 'error.expired');
        return undefined;
      }
      throw err;
    }
    adoptRawCookies(reply);
    if (interaction.uid !== request.params.uid) {
      sendMessage(reply, fallback, 400, 'error.expired');
      return undefined;
    }
    const redirect = originOf(interaction.params.redirect_uri);
    return {
      interaction,
      frame: frameFor(request, interaction.params.ui_locales),
      formTargets: redirect ? [redirect] : [],
    };
  }

  function checkCsrf(request: Req, reply: FastifyReply, loaded: Loaded, presented: unknown): boolean {
    if (csrf.verify(request, scopeOf(loaded.interaction.uid), presented)) return true;
    sendMessage(reply, loaded.frame, 403, 'error.csrf');
    return false;
  }

  const bodyField = (request: FastifyRequest, name: string): unknown =>
    (request.body as Record<string, unknown> | undefined)?.[name];

  async function clientOf(loaded: Loaded): Promise<ClientRow | undefined> {
    const id = loaded.interaction.params.client_id;
    return typeof id === 'string' ? findClient(kit.store.db, id) : undefined;
  }

  async function renderSignIn(
    request: Req,
    reply: FastifyReply,
    loaded: Loaded,
    status = 200,
    error?: MessageKey,
    username?: string,
    headers: Record<string, string> = {},
  ) {
    const { uid, params } = loaded.interaction;
    const client = await clientOf(loaded);
    const hint = typeof params.login_hint === 'string' && params.login_hint.length <= 320 ? params.login_hint : '';
    const page = signInPage(loaded.frame, {
      subtitle: loaded.frame.t('signin.to', { client: client?.name ?? '' }),
      csrf: { field: csrf.field, token: csrf.token(request, reply, scopeOf(uid)) },
      username: username ?? hint,
      error: error ? loaded.frame.t(error) : undefined,
      passwordAction: `/interaction/${uid}/login`,
      passkeyAction: `/interaction/${uid}/passkey`,
      optionsUrl: `/interaction/${uid}/passkey/options`,
      cancelAction: `/interaction/${uid}/abort`,
    });
    return sendPage(reply, status, page, { formTargets: loaded.formTargets }, headers);
  }

  /**
   * Records the result and sends the browser back to the provider. The result is merged with the
   * previous step's (the sign-in before a consent page): without it the provider would see a
   * consent without a login, and prompt=login would ask for the password again.
   */
  async function finish(request: Req, reply: FastifyReply, result: InteractionResults) {
    const returnTo = await kit.provider.current().interactionResult(request.raw, reply.raw, result);
    adoptRawCookies(reply);
    return reply.code(303).header('location', returnTo).send();
  }

  /**
   * Someone signs in while another user's session is open (prompt=login, or a shared browser):
   * the provider ends that session first — revoking its grants — and then resumes this request
   * with a fresh one. The request must not keep the other user's grant: it is not the new user's,
   * and revoking it would take the pending request down with it.
   */
  async function signIn(
    request: Req,
    reply: FastifyReply,
    loaded: Loaded,
    login: NonNullable<InteractionResults['login']>,
  ) {
    const { interaction } = loaded;
    if (interaction.grantId && interaction.session?.accountId !== login.accountId) {
      interaction.grantId = undefined;
      await interaction.persist();
    }
    return finish(request, reply, { login });
  }

  const consentScope = (loaded: Loaded, client: ClientRow) => scopeOfConsent(client, loaded.interaction.params.scope);

  async function grantConsent(request: Req, reply: FastifyReply, loaded: Loaded, accountId: string, scopes: string[]) {
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
    return finish(request, reply, { consent: { grantId } });
  }

  async function consentStep(request: Req, reply: FastifyReply, loaded: Loaded) {
    const accountId = loaded.interaction.session?.accountId;
    const user = accountId ? await findUserBySub(kit.store.db, accountId) : undefined;
    const client = await clientOf(loaded);
    if (!accountId || !user || !client)
      return finish(request, reply, {
        error: 'access_denied',
        error_description: 'account or client no longer exists',
      });
    const { scopes, remembered } = consentScope(loaded, client);
    // prompt=consent: ask, whatever was agreed to before (and for first-party clients too).
    const asked = loaded.interaction.prompt.reasons.includes('consent_prompt');
    if (!asked && (await consentCovers(kit.store, user.id, client, remembered)))
      return grantConsent(request, reply, loaded, accountId, scopes);
    return renderConsent(request, reply, loaded, user, client, remembered);
  }

  function renderConsent(
    request: Req,
    reply: FastifyReply,
    loaded: Loaded,
    user: User,
    client: ClientRow,
    remembered: string[],
  ) {
    const groups = ATTRIBUTE_GROUPS.filter((g) => remembered.includes(g)).map((g) => `group.${g}` as MessageKey);
    const items: MessageKey[] = [
      'group.sub',
      ...groups,
      ...(remembered.includes('offline_access') ? (['group.offline_access'] as MessageKey[]) : []),
    ];
    const page = consentPage(loaded.frame, {
      client: client.name,
      user: user.eppn,
      items,
      csrf: { field: csrf.field, token: csrf.token(request, reply, scopeOf(loaded.interaction.uid)) },
      action: `/interaction/${loaded.interaction.uid}/consent`,
    });
    return sendPage(reply, 200, page, { formTargets: loaded.formTargets });
  }

  return async function interactions(app: FastifyInstance) {
    app.get<Params>('/interaction/:uid', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded) return reply;
      if (loaded.interaction.prompt.name === 'login') return renderSignIn(request, reply, loaded);
      if (loaded.interaction.prompt.name === 'consent') return consentStep(request, reply, loaded);
      return sendMessage(reply, loaded.frame, 400, 'error.expired');
    });

    app.post<Params>('/interaction/:uid/login', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded || !checkCsrf(request, reply, loaded, bodyField(request, csrf.field))) return reply;
      if (loaded.interaction.prompt.name !== 'login') return sendMessage(reply, loaded.frame, 400, 'error.expired');
      const result = await passwordSignIn(kit, request);
      if (!result.ok)
        return renderSignIn(
          request,
          reply,
          loaded,
          result.status,
          result.error,
          result.username,
          result.retryAfter ? { 'retry-after': result.retryAfter } : {},
        );
      return signIn(request, reply, loaded, {
        accountId: result.user.sub,
        amr: ['pwd'],
        ts: Math.floor(kit.now() / 1000),
      });
    });

    app.post<Params>('/interaction/:uid/passkey/options', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded) return reply;
      if (!csrf.verify(request, scopeOf(loaded.interaction.uid), request.headers[csrf.header]))
        return reply.code(403).send({ code: 403, message: 'CSRF token missing or invalid' });
      const retry = await overLimit(kit.limits.ceremonies, clientKey(request.ip));
      if (retry)
        return reply
          .code(429)
          .header('retry-after', retry)
          .send({ code: 429, message: 'Too many requests; try again later' });
      return reply.send(await kit.webauthn.authenticationOptions(scopeOf(loaded.interaction.uid)));
    });

    app.post<Params>('/interaction/:uid/passkey', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded || !checkCsrf(request, reply, loaded, bodyField(request, csrf.field))) return reply;
      if (loaded.interaction.prompt.name !== 'login') return sendMessage(reply, loaded.frame, 400, 'error.expired');
      const retry = await overLimit(kit.limits.ip, clientKey(request.ip));
      if (retry)
        return renderSignIn(request, reply, loaded, 429, 'error.rate_limited', undefined, { 'retry-after': retry });
      const outcome = await kit.webauthn.verifyAuthentication(
        bodyField(request, 'response'),
        scopeOf(loaded.interaction.uid),
        request.id,
      );
      if (!outcome.ok) {
        request.log.info(
          { event: 'login.failed', method: 'passkey', reason: outcome.reason },
          'passkey sign-in refused',
        );
        return renderSignIn(request, reply, loaded, 401, 'error.passkey');
      }
      await signInSucceeded(kit, request);
      return signIn(request, reply, loaded, {
        accountId: outcome.user.sub,
        amr: amrForPasskey(outcome.userVerified),
        ts: Math.floor(kit.now() / 1000),
      });
    });

    app.post<Params>('/interaction/:uid/consent', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded || !checkCsrf(request, reply, loaded, bodyField(request, csrf.field))) return reply;
      if (loaded.interaction.prompt.name !== 'consent') return sendMessage(reply, loaded.frame, 400, 'error.expired');
      const decision = bodyField(request, 'decision');
      if (decision !== 'allow')
        return finish(request, reply, { error: 'access_denied', error_description: 'End-User denied consent' });
      const accountId = loaded.interaction.session?.accountId;
      const user = accountId ? await findUserBySub(kit.store.db, accountId) : undefined;
      const client = await clientOf(loaded);
      if (!accountId || !user || !client)
        return finish(request, reply, {
          error: 'access_denied',
          error_description: 'account or client no longer exists',
        });
      const { scopes, remembered } = consentScope(loaded, client);
      await saveConsent(kit.store.db, user.id, client.client_id, remembered, kit.now());
      return grantConsent(request, reply, loaded, accountId, scopes);
    });

    app.post<Params>('/interaction/:uid/abort', async (request, reply) => {
      const loaded = await loadInteraction(request, reply);
      if (!loaded || !checkCsrf(request, reply, loaded, bodyField(request, csrf.field))) return reply;
      return finish(request, reply, { error: 'access_denied', error_description: 'End-User aborted interaction' });
    });
  };
}
