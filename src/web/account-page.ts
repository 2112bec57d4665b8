// /account: sign in, list the user's own passkeys, register, rename and delete them. Each route
// is a short list of the named steps below; a step that answers the request itself returns undefined.
import { authenticatorDisplay } from '../webauthn/mds.ts';
import { userSignals } from './passkey-pages.ts';
import { registrationError } from './registration-errors.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findUserBySub, type User } from '../store/directory.ts';
import { listUserCredentials, type PasskeyRow } from '../store/passkeys.ts';
import { removeOwnPasskey, renameOwnPasskey } from '../webauthn/passkey-removal.ts';
import { validLabel } from '../webauthn/passkey-names.ts';
import type { Html } from '../ui/html.ts';
import { accountPage, confirmDeletePage, signInPage, type Frame } from './pages.ts';
import type { MessageKey, Translate } from '../ui/i18n.ts';
import { sendError } from '../http/errors.ts';
import {
  bodyField,
  clientKey,
  frameFor,
  passwordSignIn,
  retryHeaders,
  sendMessage,
  sendPage,
  type Kit,
  type SignInFailure,
} from './kit.ts';
import { withBrand } from '../ui/frame.ts';
import { passkeySignIn, sendPasskeyOptions, withinCeremonyLimit } from './passkey-sign-in.ts';
import type { SignedIn } from './session.ts';
import { LOST_PASSKEY_PATH } from './lost-passkey.ts';
import { accountDisabled } from '../directory/account-state.ts';

/** What a section added to the account page gets to render with. */
export interface AccountView {
  user: User;
  /** how many passkeys the user has */
  passkeyCount: number;
  t: Translate;
  /** form field name and value that protect a form posted by the section */
  csrf: { field: string; token: string };
  /** what was just done (`?done=`), and what it was done to (`&request=`, untrusted: only to look up) */
  done?: { what: string; ref?: string };
}

export interface AccountSection {
  render(view: AccountView): Html | Promise<Html>;
  /** the section's own form handlers, registered beside the account page's routes */
  routes?: (app: FastifyInstance) => Promise<void>;
}

const DONE: Record<string, MessageKey> = {
  added: 'account.added',
  renamed: 'account.renamed',
  deleted: 'account.deleted',
  password: 'password.changed',
  password_removed: 'password.removed',
  linked: 'account.linked',
};
const SIGN_IN_SCOPE = 'account-signin';
/** Adding or deleting a passkey needs a sign-in at most this long ago. */
export const RECENT_SIGN_IN_MS = 10 * 60 * 1000;

type IdParams = { Params: { id: string } };

/** The sign-in pages' kit and the sections other parts of the web feature add to the page. */
interface AccountKit extends Kit {
  sections: readonly AccountSection[];
}

/** The signed-in user of a request, and their session. */
export interface Who {
  session: SignedIn;
  user: User;
}

const sessionScope = (s: SignedIn) => `account:${s.uid}`;

/** The form field and token that protect a form posted by the signed-in user. */
export function sessionCsrf(kit: Kit, request: FastifyRequest, reply: FastifyReply, who: Who) {
  return { field: kit.csrf.field, token: kit.csrf.token(request, reply, sessionScope(who.session)) };
}
const signInBinding = (kit: Kit, request: FastifyRequest, reply: FastifyReply) =>
  `${SIGN_IN_SCOPE}:${kit.csrf.token(request, reply, SIGN_IN_SCOPE)}`;
const passkeyId = (raw: string) => (/^\d{1,15}$/.test(raw) ? Number(raw) : undefined);
export const redirect = (reply: FastifyReply, location: string) => reply.code(303).header('location', location).send();

async function signedIn(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<Who | undefined> {
  const session = await kit.sessions.current(request, reply);
  if (!session) return undefined;
  const user = await findUserBySub(kit.store.db, session.accountId);
  // Disabling ends the sessions; a session read in the same moment still counts for nothing.
  return user && !accountDisabled(user) ? { session, user } : undefined;
}

/** Signed in; otherwise the browser is sent to the account page to sign in. */
export async function requireSignedIn(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Who | undefined> {
  const who = await signedIn(kit, request, reply);
  if (!who) redirect(reply, '/account');
  return who;
}

/** The form carries this session's CSRF token; otherwise answered here. */
export function checkSessionCsrf(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  { who, presented }: { who: Who; presented: unknown },
): boolean {
  if (kit.csrf.verify(request, sessionScope(who.session), presented)) return true;
  sendMessage(reply, frame, 403, 'error.csrf');
  return false;
}

/** Signed in and carrying this session's CSRF token in the form; otherwise answered here. */
async function authorize(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
): Promise<Who | undefined> {
  const who = await requireSignedIn(kit, request, reply);
  if (!who) return undefined;
  const presented = bodyField(request, kit.csrf.field);
  return checkSessionCsrf(kit, request, reply, frame, { who, presented }) ? who : undefined;
}

/** The sign-in form's CSRF token (not bound to a session: there is none yet). */
function checkSignInCsrf(kit: Kit, request: FastifyRequest, reply: FastifyReply, frame: Frame): boolean {
  if (kit.csrf.verify(request, SIGN_IN_SCOPE, bodyField(request, kit.csrf.field))) return true;
  sendMessage(reply, frame, 403, 'error.csrf');
  return false;
}

/** Someone at an unattended, still signed-in browser must not add their own passkey or remove the user's. */
export const recentlySignedIn = (kit: Kit, who: Who) => kit.now() - who.session.signedInAt <= RECENT_SIGN_IN_MS;

async function renderSignIn(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  failure?: SignInFailure,
) {
  const { csrf } = kit;
  const page = signInPage(frame, {
    subtitle: frame.t('signin.account'),
    csrf: { field: csrf.field, token: csrf.token(request, reply, SIGN_IN_SCOPE) },
    username: failure?.username,
    error: failure ? frame.t(failure.error) : undefined,
    passwordAction: '/account/login',
    passkeyAction: '/account/passkey',
    optionsUrl: '/account/passkey/options',
    lostPasskey: (await kit.selfRecoveryOffered()) ? LOST_PASSKEY_PATH : undefined,
    signals: failure?.unknownCredential
      ? { rpId: kit.webauthn.rpId, unknownCredential: failure.unknownCredential }
      : undefined,
  });
  return sendPage(reply, failure?.status ?? 200, page, {}, retryHeaders(failure));
}

export const askToSignInAgain = (
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  who: Who,
  error: MessageKey = 'account.reauth',
) => renderSignIn(kit, request, reply, frame, { status: 401, error, username: who.user.eppn });

async function renderAccount(
  kit: AccountKit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  who: Who,
  {
    status = 200,
    flash,
    error,
    done,
  }: { status?: number; flash?: MessageKey; error?: MessageKey; done?: AccountView['done'] } = {},
) {
  const { csrf } = kit;
  const token = csrf.token(request, reply, sessionScope(who.session));
  const rows = await listUserCredentials(kit.store.db, who.user.id);
  // The signed-in user's page wears their organization's brand.
  frame = withBrand(frame, await kit.branding.forOrg(who.user.org_id));
  const view: AccountView = {
    user: who.user,
    passkeyCount: rows.length,
    t: frame.t,
    csrf: { field: csrf.field, token },
    ...(done ? { done } : {}),
  };
  const page = accountPage(frame, {
    user: {
      eppn: who.user.eppn,
      name: who.user.display_name ?? who.user.name,
      hasPassword: who.user.password_hash !== null,
    },
    passkeys: await Promise.all(
      rows.map(async (r) => {
        const shown = await authenticatorDisplay(kit.store.db, r.aaguid, kit.config.aaguidData);
        return {
          id: r.id,
          label: r.label,
          authenticator: shown.name ?? frame.t('account.unknown_authenticator'),
          icon: shown.icon,
          iconDark: shown.iconDark,
          synced: r.backup_eligible === 1,
          userVerified: r.mfa_verified === 1,
          createdAt: r.created_at,
          lastUsedAt: r.last_used_at,
        };
      }),
    ),
    signals: userSignals(kit.webauthn.rpId, who.user, rows),
    csrf: { field: csrf.field, token },
    flash: flash ? frame.t(flash) : undefined,
    error: error ? frame.t(error) : undefined,
    sections: await Promise.all(kit.sections.map((s) => Promise.resolve(s.render(view)))),
  });
  return sendPage(reply, status, page);
}

/** Deleting the last passkey is asked about once more; true when this request was answered with that page. */
function confirmLastPasskey(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  frame: Frame,
  { who, all, target }: { who: Who; all: PasskeyRow[]; target: PasskeyRow },
): boolean {
  if (all.length !== 1 || bodyField(request, 'confirm') === 'yes') return false;
  const page = confirmDeletePage(frame, {
    id: target.id,
    label: target.label,
    hasPassword: who.user.password_hash !== null,
    csrf: { field: kit.csrf.field, token: kit.csrf.token(request, reply, sessionScope(who.session)) },
  });
  sendPage(reply, 200, page);
  return true;
}

// The routes.

async function showAccount(
  kit: AccountKit,
  request: FastifyRequest<{ Querystring: { done?: string; request?: string } }>,
  reply: FastifyReply,
) {
  const frame = frameFor(request);
  const who = await signedIn(kit, request, reply);
  if (!who) return renderSignIn(kit, request, reply, frame);
  const { done, request: ref } = request.query;
  const flash = typeof done === 'string' && Object.hasOwn(DONE, done) ? DONE[done] : undefined;
  return renderAccount(kit, request, reply, frame, who, {
    ...(flash ? { flash, done: { what: done!, ...(typeof ref === 'string' ? { ref } : {}) } } : {}),
  });
}

async function signInWithPassword(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  if (!checkSignInCsrf(kit, request, reply, frame)) return reply;
  const result = await passwordSignIn(kit, request);
  if (!result.ok) return renderSignIn(kit, request, reply, frame, result);
  await kit.sessions.signIn(request, reply, { accountId: result.user.sub, amr: ['pwd'] });
  return redirect(reply, '/account');
}

async function signInPasskeyOptions(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  if (!kit.csrf.verify(request, SIGN_IN_SCOPE, request.headers[kit.csrf.header]))
    return sendError(reply, 403, 'CSRF token missing or invalid');
  return sendPasskeyOptions(kit, request, reply, signInBinding(kit, request, reply));
}

async function signInWithPasskey(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  if (!checkSignInCsrf(kit, request, reply, frame)) return reply;
  const result = await passkeySignIn(kit, request, signInBinding(kit, request, reply));
  if (!result.ok) return renderSignIn(kit, request, reply, frame, result);
  await kit.sessions.signIn(request, reply, { accountId: result.user.sub, amr: result.amr, attested: result.attested });
  return redirect(reply, '/account');
}

async function registrationOptions(kit: Kit, request: FastifyRequest, reply: FastifyReply) {
  const who = await signedIn(kit, request, reply);
  if (!who) return sendError(reply, 401, 'Not signed in');
  if (!kit.csrf.verify(request, sessionScope(who.session), request.headers[kit.csrf.header]))
    return sendError(reply, 403, 'CSRF token missing or invalid');
  if (!recentlySignedIn(kit, who)) return sendError(reply, 401, 'Sign in again to add a passkey');
  if (!(await withinCeremonyLimit(kit, request, reply))) return reply;
  const existing = await listUserCredentials(kit.store.db, who.user.id);
  return reply.send(await kit.webauthn.registrationOptions(who.user, existing, `register:${who.session.uid}`));
}

async function registerPasskey(kit: AccountKit, request: FastifyRequest, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await authorize(kit, request, reply, frame);
  if (!who) return reply;
  if (!recentlySignedIn(kit, who)) return askToSignInAgain(kit, request, reply, frame, who);
  const outcome = await kit.webauthn.verifyRegistration(
    who.user,
    bodyField(request, 'response'),
    `register:${who.session.uid}`,
    { userAgent: request.headers['user-agent'], requestId: request.id, ip: request.ip },
  );
  if (!outcome.ok) {
    request.log.info({ event: 'passkey.register_failed', reason: outcome.reason }, 'passkey registration refused');
    const error = registrationError(outcome.reason, 'account.add_failed');
    return renderAccount(kit, request, reply, frame, who, { status: 400, error });
  }
  await kit.limits.ceremonies.refund(clientKey(request.ip));
  return redirect(reply, '/account?done=added');
}

async function renamePasskey(kit: AccountKit, request: FastifyRequest<IdParams>, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await authorize(kit, request, reply, frame);
  if (!who) return reply;
  const id = passkeyId(request.params.id);
  const label = validLabel(bodyField(request, 'label'));
  if (!label) return renderAccount(kit, request, reply, frame, who, { status: 400, error: 'account.bad_label' });
  const actor = { at: kit.now(), requestId: request.id, ip: request.ip };
  if (id === undefined || !(await renameOwnPasskey(kit.store, actor, who.user, id, label)))
    return renderAccount(kit, request, reply, frame, who, { status: 404, error: 'account.passkey_missing' });
  return redirect(reply, '/account?done=renamed');
}

async function deletePasskey(kit: AccountKit, request: FastifyRequest<IdParams>, reply: FastifyReply) {
  const frame = frameFor(request);
  const who = await authorize(kit, request, reply, frame);
  if (!who) return reply;
  if (!recentlySignedIn(kit, who)) return askToSignInAgain(kit, request, reply, frame, who);
  const id = passkeyId(request.params.id);
  const all = await listUserCredentials(kit.store.db, who.user.id);
  const target = all.find((p) => p.id === id);
  const missing = { status: 404, error: 'account.passkey_missing' } as const;
  if (!target) return renderAccount(kit, request, reply, frame, who, missing);
  if (confirmLastPasskey(kit, request, reply, frame, { who, all, target })) return reply;
  const actor = { at: kit.now(), requestId: request.id, ip: request.ip };
  if (!(await removeOwnPasskey(kit.store, actor, who.user, target.id)))
    return renderAccount(kit, request, reply, frame, who, missing);
  return redirect(reply, '/account?done=deleted');
}

/** The account page's routes; sections (the profile photo) are shown below passkeys and password. */
export function accountPlugin(base: Kit, sections: readonly AccountSection[] = []) {
  const kit: AccountKit = { ...base, sections };
  return async function accountRoutes(app: FastifyInstance) {
    app.get<{ Querystring: { done?: string; request?: string } }>('/account', (request, reply) =>
      showAccount(kit, request, reply),
    );
    app.post('/account/login', (request, reply) => signInWithPassword(kit, request, reply));
    app.post('/account/passkey/options', (request, reply) => signInPasskeyOptions(kit, request, reply));
    app.post('/account/passkey', (request, reply) => signInWithPasskey(kit, request, reply));
    app.post('/account/passkeys/options', (request, reply) => registrationOptions(kit, request, reply));
    app.post('/account/passkeys', (request, reply) => registerPasskey(kit, request, reply));
    app.post<IdParams>('/account/passkeys/:id/rename', (request, reply) => renamePasskey(kit, request, reply));
    app.post<IdParams>('/account/passkeys/:id/delete', (request, reply) => deletePasskey(kit, request, reply));
    for (const section of sections) if (section.routes) await app.register(section.routes);
  };
}
