// /account: sign in, list the user's own passkeys, register, rename and delete them.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findUserBySub, type User } from '../store/directory.ts';
import { deleteUserPasskey, listUserCredentials, renameUserPasskey } from '../store/passkeys.ts';
import { insertAuditEvent } from '../store/audit.ts';
import { authenticatorName } from '../webauthn/aaguid.ts';
import { validLabel } from '../webauthn/passkey-names.ts';
import type { Html } from './html.ts';
import { accountPage, confirmDeletePage, signInPage, type Frame } from './pages.ts';
import type { Locale, MessageKey, Translate } from './i18n.ts';
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
  type MessageOptions,
} from './kit.ts';
import type { SignedIn } from './session.ts';

/** What a section added to the account page gets to render with. */
export interface AccountView {
  user: User;
  locale: Locale;
  t: Translate;
  /** form field name and value that protect a form posted by the section */
  csrf: { field: string; token: string };
}

export interface AccountSection {
  render(view: AccountView): Html | Promise<Html>;
}

export interface Account {
  /** adds a section (below passkeys and password) to the account page */
  addSection(section: AccountSection): void;
  /** the signed-in user, or undefined */
  currentUser(request: FastifyRequest, reply: FastifyReply): Promise<User | undefined>;
  /** the CSRF token for account forms, or undefined when nobody is signed in */
  csrfToken(request: FastifyRequest, reply: FastifyReply): Promise<string | undefined>;
  /** true when a signed-in user's request carries the right token (form field, or the x-csrf-token header) */
  verifyCsrf(request: FastifyRequest, reply: FastifyReply, presented?: unknown): Promise<boolean>;
  /** an error page in the language and look of the account page, with the way back to it */
  sendMessage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    message: MessageKey,
    options?: MessageOptions,
  ): FastifyReply;
}

const DONE: Record<string, MessageKey> = {
  added: 'account.added',
  renamed: 'account.renamed',
  deleted: 'account.deleted',
};
const SIGN_IN_SCOPE = 'account-signin';
/** Adding or deleting a passkey needs a sign-in at most this long ago. */
export const RECENT_SIGN_IN_MS = 10 * 60 * 1000;

type IdParams = { Params: { id: string } };

export function createAccount(kit: Kit) {
  const { csrf } = kit;
  const sections: AccountSection[] = [];
  const sessionScope = (s: SignedIn) => `account:${s.uid}`;
  const bodyField = (request: FastifyRequest, name: string): unknown =>
    (request.body as Record<string, unknown> | undefined)?.[name];

  async function signedIn(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<{ session: SignedIn; user: User } | undefined> {
    const session = await kit.sessions.current(request, reply);
    if (!session) return undefined;
    const user = await findUserBySub(kit.store.db, session.accountId);
    return user ? { session, user } : undefined;
  }

  /** Signed in and carrying this session's CSRF token in the form; otherwise answered here. */
  async function authorize(
    request: FastifyRequest,
    reply: FastifyReply,
    frame: Frame,
  ): Promise<{ session: SignedIn; user: User } | undefined> {
    const who = await signedIn(request, reply);
    if (!who) {
      reply.code(303).header('location', '/account').send();
      return undefined;
    }
    if (!csrf.verify(request, sessionScope(who.session), bodyField(request, csrf.field))) {
      sendMessage(reply, frame, 403, 'error.csrf');
      return undefined;
    }
    return who;
  }

  function renderSignIn(
    request: FastifyRequest,
    reply: FastifyReply,
    frame: Frame,
    status = 200,
    error?: MessageKey,
    username?: string,
    headers: Record<string, string> = {},
  ) {
    const page = signInPage(frame, {
      subtitle: frame.t('signin.account'),
      csrf: { field: csrf.field, token: csrf.token(request, reply, SIGN_IN_SCOPE) },
      username,
      error: error ? frame.t(error) : undefined,
      passwordAction: '/account/login',
      passkeyAction: '/account/passkey',
      optionsUrl: '/account/passkey/options',
    });
    return sendPage(reply, status, page, {}, headers);
  }

  async function renderAccount(
    request: FastifyRequest,
    reply: FastifyReply,
    frame: Frame,
    who: { session: SignedIn; user: User },
    status = 200,
    flash?: MessageKey,
    error?: MessageKey,
  ) {
    const token = csrf.token(request, reply, sessionScope(who.session));
    const rows = await listUserCredentials(kit.store.db, who.user.id);
    const view: AccountView = { user: who.user, locale: frame.locale, t: frame.t, csrf: { field: csrf.field, token } };
    const page = accountPage(frame, {
      user: { eppn: who.user.eppn, name: who.user.name, hasPassword: who.user.password_hash !== null },
      passkeys: rows.map((r) => ({
        id: r.id,
        label: r.label,
        authenticator: authenticatorName(r.aaguid) ?? frame.t('account.unknown_authenticator'),
        createdAt: r.created_at,
        lastUsedAt: r.last_used_at,
      })),
      csrf: { field: csrf.field, token },
      flash: flash ? frame.t(flash) : undefined,
      error: error ? frame.t(error) : undefined,
      sections: await Promise.all(sections.map((s) => s.render(view))),
    });
    return sendPage(reply, status, page);
  }

  /** Someone at an unattended, still signed-in browser must not add their own passkey or remove the user's. */
  const recentlySignedIn = (who: { session: SignedIn }) => kit.now() - who.session.signedInAt <= RECENT_SIGN_IN_MS;
  const askToSignInAgain = (request: FastifyRequest, reply: FastifyReply, frame: Frame, who: { user: User }) =>
    renderSignIn(request, reply, frame, 401, 'account.reauth', who.user.eppn);

  const passkeyId = (raw: string) => (/^\d{1,15}$/.test(raw) ? Number(raw) : undefined);

  const account: Account = {
    addSection: (section) => void sections.push(section),
    currentUser: async (request, reply) => (await signedIn(request, reply))?.user,
    async csrfToken(request, reply) {
      const session = await kit.sessions.current(request, reply);
      return session ? csrf.token(request, reply, sessionScope(session)) : undefined;
    },
    async verifyCsrf(request, reply, presented) {
      const session = await kit.sessions.current(request, reply);
      const value = presented ?? bodyField(request, csrf.field) ?? request.headers[csrf.header];
      return session !== undefined && csrf.verify(request, sessionScope(session), value);
    },
    sendMessage: (request, reply, status, message, options) =>
      sendMessage(reply, frameFor(request), status, message, options),
  };

  const plugin = async function accountRoutes(app: FastifyInstance) {
    app.get<{ Querystring: { done?: string } }>('/account', async (request, reply) => {
      const frame = frameFor(request);
      const who = await signedIn(request, reply);
      if (!who) return renderSignIn(request, reply, frame);
      const done =
        typeof request.query.done === 'string' && Object.hasOwn(DONE, request.query.done)
          ? DONE[request.query.done]
          : undefined;
      return renderAccount(request, reply, frame, who, 200, done);
    });

    app.post('/account/login', async (request, reply) => {
      const frame = frameFor(request);
      if (!csrf.verify(request, SIGN_IN_SCOPE, bodyField(request, csrf.field)))
        return sendMessage(reply, frame, 403, 'error.csrf');
      const result = await passwordSignIn(kit, request);
      if (!result.ok)
        return renderSignIn(
          request,
          reply,
          frame,
          result.status,
          result.error,
          result.username,
          result.retryAfter ? { 'retry-after': result.retryAfter } : {},
        );
      await kit.sessions.signIn(request, reply, { accountId: result.user.sub, amr: ['pwd'] });
      return reply.code(303).header('location', '/account').send();
    });

    app.post('/account/passkey/options', async (request, reply) => {
      if (!csrf.verify(request, SIGN_IN_SCOPE, request.headers[csrf.header]))
        return reply.code(403).send({ code: 403, message: 'CSRF token missing or invalid' });
      const retry = await overLimit(kit.limits.ceremonies, clientKey(request.ip));
      if (retry)
        return reply
          .code(429)
          .header('retry-after', retry)
          .send({ code: 429, message: 'Too many requests; try again later' });
      return reply.send(
        await kit.webauthn.authenticationOptions(`${SIGN_IN_SCOPE}:${csrf.token(request, reply, SIGN_IN_SCOPE)}`),
      );
    });

    app.post('/account/passkey', async (request, reply) => {
      const frame = frameFor(request);
      if (!csrf.verify(request, SIGN_IN_SCOPE, bodyField(request, csrf.field)))
        return sendMessage(reply, frame, 403, 'error.csrf');
      const retry = await overLimit(kit.limits.ip, clientKey(request.ip));
      if (retry)
        return renderSignIn(request, reply, frame, 429, 'error.rate_limited', undefined, { 'retry-after': retry });
      const binding = `${SIGN_IN_SCOPE}:${csrf.token(request, reply, SIGN_IN_SCOPE)}`;
      const outcome = await kit.webauthn.verifyAuthentication(bodyField(request, 'response'), binding, request.id);
      if (!outcome.ok) {
        request.log.info(
          { event: 'login.failed', method: 'passkey', reason: outcome.reason },
          'passkey sign-in refused',
        );
        return renderSignIn(request, reply, frame, 401, 'error.passkey');
      }
      await signInSucceeded(kit, request);
      await kit.sessions.signIn(request, reply, {
        accountId: outcome.user.sub,
        amr: amrForPasskey(outcome.userVerified),
      });
      return reply.code(303).header('location', '/account').send();
    });

    app.post('/account/passkeys/options', async (request, reply) => {
      const who = await signedIn(request, reply);
      if (!who) return reply.code(401).send({ code: 401, message: 'Not signed in' });
      if (!csrf.verify(request, sessionScope(who.session), request.headers[csrf.header]))
        return reply.code(403).send({ code: 403, message: 'CSRF token missing or invalid' });
      if (!recentlySignedIn(who)) return reply.code(401).send({ code: 401, message: 'Sign in again to add a passkey' });
      const retry = await overLimit(kit.limits.ceremonies, clientKey(request.ip));
      if (retry)
        return reply
          .code(429)
          .header('retry-after', retry)
          .send({ code: 429, message: 'Too many requests; try again later' });
      const existing = await listUserCredentials(kit.store.db, who.user.id);
      return reply.send(await kit.webauthn.registrationOptions(who.user, existing, `register:${who.session.uid}`));
    });

    app.post('/account/passkeys', async (request, reply) => {
      const frame = frameFor(request);
      const who = await authorize(request, reply, frame);
      if (!who) return reply;
      if (!recentlySignedIn(who)) return askToSignInAgain(request, reply, frame, who);
      const outcome = await kit.webauthn.verifyRegistration(
        who.user,
        bodyField(request, 'response'),
        `register:${who.session.uid}`,
        request.headers['user-agent'],
      );
      if (!outcome.ok) {
        request.log.info({ event: 'passkey.register_failed', reason: outcome.reason }, 'passkey registration refused');
        return renderAccount(
          request,
          reply,
          frame,
          who,
          400,
          undefined,
          outcome.reason === 'already_registered' ? 'account.already_registered' : 'account.add_failed',
        );
      }
      await kit.limits.ceremonies.refund(clientKey(request.ip));
      return reply.code(303).header('location', '/account?done=added').send();
    });

    app.post<IdParams>('/account/passkeys/:id/rename', async (request, reply) => {
      const frame = frameFor(request);
      const who = await authorize(request, reply, frame);
      if (!who) return reply;
      const id = passkeyId(request.params.id);
      const label = validLabel(bodyField(request, 'label'));
      if (!label) return renderAccount(request, reply, frame, who, 400, undefined, 'account.bad_label');
      if (id === undefined || !(await renameUserPasskey(kit.store.db, who.user.id, id, label)))
        return renderAccount(request, reply, frame, who, 404, undefined, 'account.passkey_missing');
      return reply.code(303).header('location', '/account?done=renamed').send();
    });

    app.post<IdParams>('/account/passkeys/:id/delete', async (request, reply) => {
      const frame = frameFor(request);
      const who = await authorize(request, reply, frame);
      if (!who) return reply;
      if (!recentlySignedIn(who)) return askToSignInAgain(request, reply, frame, who);
      const id = passkeyId(request.params.id);
      const all = await listUserCredentials(kit.store.db, who.user.id);
      const target = all.find((p) => p.id === id);
      if (!target) return renderAccount(request, reply, frame, who, 404, undefined, 'account.passkey_missing');
      if (all.length === 1 && bodyField(request, 'confirm') !== 'yes') {
        const page = confirmDeletePage(frame, {
          id: target.id,
          label: target.label,
          hasPassword: who.user.password_hash !== null,
          csrf: { field: csrf.field, token: csrf.token(request, reply, sessionScope(who.session)) },
        });
        return sendPage(reply, 200, page);
      }
      const deleted = await kit.store.db.transaction().execute(async (trx) => {
        const ok = await deleteUserPasskey(trx, who.user.id, target.id);
        if (ok)
          await insertAuditEvent(trx, {
            at: kit.now(),
            kind: 'passkey.delete_by_user',
            orgId: who.user.org_id,
            eppn: who.user.eppn,
            passkeyIds: [target.id],
            requestId: request.id,
          });
        return ok;
      });
      if (!deleted) return renderAccount(request, reply, frame, who, 404, undefined, 'account.passkey_missing');
      return reply.code(303).header('location', '/account?done=deleted').send();
    });
  };

  return { account, plugin };
}
