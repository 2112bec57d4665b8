// What the sign-in pages share: CSRF, sessions, WebAuthn, rate limits and page rendering.
import { loadPolicy } from '../webauthn/policy.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { AMR_PASSWORD } from '../oauth/authentication-context.ts';
import { signInAccepted, signInRefused } from './sign-in-audit.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { clientKey, rateLimit, type RateLimit } from '../http/rate-limit.ts';
import { AppError } from '../errors.ts';
import { accountDisabled, normalizeEppn, realmOf, setPassword } from '../directory/index.ts';
import { userActor } from '../audit/index.ts';
import { verifyPassword } from '../directory/passwords.ts';
import { costliestImportedHash } from '../directory/password-profile.ts';
import { checkPasswordWithDirectory, type DirectoryPasswordVerdict } from '../directory/ldap-directories.ts';
import { findUserByEppn, type User } from '../store/directory.ts';
import { createWebAuthn, type WebAuthn } from '../webauthn/ceremonies.ts';
import { createCsrf, type Csrf } from '../ui/csrf.ts';
import { createSessions, type Sessions } from './session.ts';
import { pageHeaders, type Csp } from '../ui/html.ts';
import { messagePage, type Frame } from './pages.ts';
import type { MessageKey } from '../ui/i18n.ts';
import type { Branding } from '../ui/page-brand.ts';
import { frameFor } from '../ui/frame.ts';
import { anySelfRecovery } from '../store/mail.ts';

export { clientKey };

const LOGIN_WINDOW_MS = 15 * 60 * 1000;

export interface WebDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  provider: ProviderHolder;
  branding: Branding;
  now?: () => number;
}

export interface Kit {
  config: Config;
  store: Store;
  provider: ProviderHolder;
  branding: Branding;
  csrf: Csrf;
  sessions: Sessions;
  webauthn: WebAuthn;
  limits: { ip: RateLimit; account: RateLimit; ceremonies: RateLimit };
  /** whether the sign-in pages offer "Lost your passkey?" (a mail server, and an organization allowing it) */
  selfRecoveryOffered: () => Promise<boolean>;
  now: () => number;
  /** keys for what is sealed at rest (an LDAP directory's service account password) */
  keys: Keyring;
}

/** How long the answer to "does any organization offer self-service recovery" is kept. */
const SELF_RECOVERY_CHECK_MS = 30_000;

function selfRecoveryCheck(deps: WebDeps, now: () => number): () => Promise<boolean> {
  let known: { at: number; offered: Promise<boolean> } | undefined;
  return () => {
    if (deps.config.smtpUrl === undefined) return Promise.resolve(false);
    if (!known || now() - known.at > SELF_RECOVERY_CHECK_MS) {
      const offered = anySelfRecovery(deps.store.db);
      known = { at: now(), offered };
      offered.catch(() => (known = undefined));
    }
    return known.offered;
  };
}

export function createKit(deps: WebDeps): Kit {
  const now = deps.now ?? Date.now;
  return {
    config: deps.config,
    store: deps.store,
    provider: deps.provider,
    branding: deps.branding,
    csrf: createCsrf(deps.config, deps.keys),
    sessions: createSessions(deps.provider, deps.config, now),
    webauthn: createWebAuthn(deps.config, deps.store, now),
    limits: {
      ip: rateLimit(deps.store, 'login-ip', deps.config.loginRateLimitIp, LOGIN_WINDOW_MS, now),
      account: rateLimit(deps.store, 'login-account', deps.config.loginRateLimitAccount, LOGIN_WINDOW_MS, now),
      // Every sign-in page asks for a challenge; allow well above the attempt budget.
      ceremonies: rateLimit(deps.store, 'webauthn-options', deps.config.loginRateLimitIp * 10, LOGIN_WINDOW_MS, now),
    },
    selfRecoveryOffered: selfRecoveryCheck(deps, now),
    now,
    keys: deps.keys,
  };
}

export { frameFor };

export function sendPage(
  reply: FastifyReply,
  status: number,
  body: string,
  csp: Csp = {},
  headers: Record<string, string> = {},
) {
  return reply
    .code(status)
    .headers({ ...pageHeaders(csp), ...headers })
    .send(body);
}

/** An error page: what happened, what to do, and the request id to give the helpdesk. */
export interface MessageOptions {
  title?: MessageKey;
  advice?: MessageKey;
  /** values for the message's {placeholders} */
  vars?: Record<string, string>;
  headers?: Record<string, string>;
}

export function sendMessage(
  reply: FastifyReply,
  frame: Frame,
  status: number,
  message: MessageKey,
  more: MessageOptions = {},
) {
  const page = messagePage(frame, {
    title: frame.t(more.title ?? 'error.title'),
    message: frame.t(message, more.vars),
    advice: more.advice && frame.t(more.advice),
    reference: reply.request.id,
    link: { href: '/account', text: frame.t('error.back_home') },
  });
  return sendPage(reply, status, page, {}, more.headers);
}

/** A browser asking for a path nothing serves gets a page rather than JSON. */
export function sendNotFound(request: FastifyRequest, reply: FastifyReply) {
  return sendMessage(reply, frameFor(request), 404, 'error.not_found', {
    title: 'error.not_found_title',
    advice: 'error.not_found_advice',
  });
}

/** Counts one event; returns the Retry-After seconds when the limit is reached. */
export async function overLimit(limit: RateLimit, key: string): Promise<string | undefined> {
  try {
    await limit.consume(key);
    return undefined;
  } catch (err) {
    if (err instanceof AppError && err.status === 429) return err.headers['retry-after'] ?? '900';
    throw err;
  }
}

/** Why a sign-in attempt was refused, for the sign-in page to show. */
export interface SignInFailure {
  status: number;
  error: MessageKey;
  /** what the user typed, to fill the form again */
  username?: string;
  /** seconds, when the attempt was over a limit */
  retryAfter?: string;
  /** the credential id of a passkey this service does not know, for the Signal API */
  unknownCredential?: string;
}

export type PasswordResult = { ok: true; user: User } | ({ ok: false; username: string } & SignInFailure);

/** A field of a posted form (or JSON body), not yet checked. */
export function bodyField(request: FastifyRequest, name: string): unknown {
  return (request.body as Record<string, unknown> | undefined)?.[name];
}

/** The Retry-After header for a refusal that was over a limit. */
export function retryHeaders(failure?: SignInFailure): Record<string, string> {
  return failure?.retryAfter ? { 'retry-after': failure.retryAfter } : {};
}

/** A text field of a posted form, when it is a string of at most max characters. */
function textField(request: FastifyRequest, name: string, max: number): string | undefined {
  const value = bodyField(request, name);
  return typeof value === 'string' && value.length <= max ? value : undefined;
}

/**
 * Password sign-in as a pipeline: count the attempt against the client IP and the account (one
 * atomic increment each, before any work, so parallel guesses cannot all slip under the limit),
 * read the form, verify (one argon2id whether or not the account exists; an outdated hash is
 * replaced after the sign-in succeeded). A success clears the
 * account's count and takes the attempt back from the IP's, which counts failures only.
 * Unknown user and wrong password give the same answer.
 */
export async function passwordSignIn(
  kit: Kit,
  request: FastifyRequest,
  clientId: string | null = null,
): Promise<PasswordResult> {
  const ip = clientKey(request.ip);
  const ipRetry = await overLimit(kit.limits.ip, ip);
  const rawUsername = textField(request, 'username', 320) ?? '';
  if (ipRetry)
    return { ok: false, status: 429, error: 'error.rate_limited', username: rawUsername, retryAfter: ipRetry };
  const password = textField(request, 'password', 1024);
  const eppn = normalizeEppn(rawUsername);
  if (!eppn || !password) return { ok: false, status: 400, error: 'error.credentials', username: rawUsername };
  const accountRetry = await overLimit(kit.limits.account, eppn);
  if (accountRetry)
    return { ok: false, status: 429, error: 'error.rate_limited', username: rawUsername, retryAfter: accountRetry };
  const user = await findUserByEppn(kit.store.db, eppn);
  const verdict = await checkPassword(kit, { ip, eppn }, password, user);
  let { valid, outdated } = verdict;
  if (!valid && user && user.password_hash === null) {
    const directory = await directoryPassword(kit, request, { ip, eppn }, user, password);
    if (directory === 'unavailable' || directory === 'unanswered')
      return { ok: false, status: 401, error: 'error.credentials', username: rawUsername };
    // the directory's password is never stored: nothing to rehash
    if (directory === 'valid') [valid, outdated] = [true, false];
  }
  const attempt = { method: 'password' as const, clientId, user, username: eppn };
  // Where the organization makes users with a passkey passkey-only, their password fails exactly
  // like a wrong one: nothing tells others which accounts have passkeys.
  const refusal = !valid || !user ? 'credentials' : (await passwordRetired(kit, user)) ? 'passkey_only' : undefined;
  if (refusal || !user) {
    await signInRefused(kit, request, attempt, refusal ?? 'credentials');
    return { ok: false, status: 401, error: 'error.credentials', username: rawUsername };
  }
  // Said only to whoever knows the password: nothing tells others which accounts are disabled.
  if (accountDisabled(user)) {
    await signInRefused(kit, request, attempt, 'disabled');
    return { ok: false, status: 403, error: 'error.disabled', username: rawUsername };
  }
  await kit.limits.account.reset(eppn);
  await signInSucceeded(kit, request);
  await signInAccepted(kit, request, { ...attempt, user }, AMR_PASSWORD);
  if (outdated) await rehash(kit, request, user, password);
  return { ok: true, user };
}

/**
 * A user without a password of their own, provided by an LDAP directory that checks passwords,
 * signs in with the directory's (docs/ldap.md). A directory that cannot be reached in time is the
 * usual refusal, logged. What it costs the rate limits (docs/ldap.md, Signing in):
 * - too many checks at once for the directory (503): given back to both counters, nothing was sent;
 * - the directory failed before the bind with the password was sent: given back to the account's
 *   counter (an outage never locks a user out), kept by the address's (it still bounds how much
 *   work one address makes a struggling directory do);
 * - the bind was sent and no answer came: counted by both, as a wrong password. The directory may
 *   have checked it; a directory slow to refuse (some delay failed binds) must not give an attacker
 *   free guesses that only a right password answers in time.
 */
async function directoryPassword(
  kit: Kit,
  request: FastifyRequest,
  keys: { ip: string; eppn: string },
  user: User,
  password: string,
): Promise<DirectoryPasswordVerdict> {
  let verdict: DirectoryPasswordVerdict;
  try {
    verdict = await checkPasswordWithDirectory(kit.store, kit.keys, user, password);
  } catch (err) {
    if (err instanceof AppError && err.status === 503) {
      await kit.limits.ip.refund(keys.ip);
      await kit.limits.account.refund(keys.eppn);
    }
    throw err;
  }
  if (verdict === 'unavailable') {
    request.log.warn({ event: 'ldap.unavailable', org_id: user.org_id }, 'the LDAP directory did not answer a sign-in');
    await kit.limits.account.refund(keys.eppn);
  } else if (verdict === 'unanswered')
    request.log.warn(
      { event: 'ldap.unanswered', org_id: user.org_id },
      "the LDAP directory did not answer a sign-in's bind in time",
    );
  return verdict;
}

/**
 * Verifies the password (one hash whether or not the user exists). Refused because too many hashes
 * are already under way (503 with Retry-After, for the pages' error handler), the attempt is given
 * back to both counters: the password was not checked.
 */
async function checkPassword(kit: Kit, keys: { ip: string; eppn: string }, password: string, user?: User) {
  try {
    // as costly as the organization's costliest imported hash, whoever the user (docs/sign-in.md, Timing)
    const costliest = await costliestImportedHash(kit.store, realmOf(keys.eppn));
    return await verifyPassword(password, user?.password_hash, { costliest });
  } catch (err) {
    if (err instanceof AppError && err.status === 503) {
      await kit.limits.ip.refund(keys.ip);
      await kit.limits.account.refund(keys.eppn);
    }
    throw err;
  }
}

/**
 * The password was right but its hash is of an older format (or weaker parameters): it is hashed
 * again and replaced, unless it changed meanwhile. The sign-in does not wait on a busy hashing
 * queue for this: the next sign-in tries again.
 */
async function rehash(kit: Kit, request: FastifyRequest, user: User, password: string): Promise<void> {
  try {
    await setPassword(kit.store, user.eppn, password, {
      actor: userActor(user, request),
      now: kit.now(),
      action: 'password.rehash',
      replacing: user.password_hash!,
    });
  } catch (err) {
    if (!(err instanceof AppError && err.status === 503)) throw err;
    request.log.info({ event: 'password.rehash_deferred' }, 'password hash left for the next sign-in: hashing busy');
  }
}

/** The organization's policy is passkey-only and the user has a passkey. */
async function passwordRetired(kit: Kit, user: User): Promise<boolean> {
  if (!(await loadPolicy(kit.store.db, user.org_id)).passkeyOnly) return false;
  return (await listUserCredentials(kit.store.db, user.id)).length > 0;
}

/**
 * A sign-in succeeded: the per-IP counters count failures only, so give back the attempt and
 * the challenge the sign-in page asked for. Many people behind one address (a campus NAT)
 * then share a budget for mistakes, not for signing in.
 */
export async function signInSucceeded(kit: Kit, request: FastifyRequest): Promise<void> {
  const ip = clientKey(request.ip);
  await kit.limits.ip.refund(ip);
  await kit.limits.ceremonies.refund(ip);
}
