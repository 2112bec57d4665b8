// Staff sign-in to the console. The console is a relying party of this service: it sends the
// browser through the ordinary sign-in pages with an authorization request (code flow, PKCE, state,
// nonce, max_age = the idle timeout, and with CONSOLE_REQUIRE_PASSKEY the phishing-resistant class
// as an essential acr claim), redeems the code at the token endpoint, verifies the ID token with
// the provider's published keys, and keeps who signed in in a sealed cookie that lapses after the
// idle timeout (and after 12 hours whatever happens). Roles are read from the database on every
// request, so a revoked role or a disabled user is locked out at the next click. The cookie also
// carries the user's console generation at sign-in, compared with the user's row on every request:
// signing out and everything that ends the user's sessions count it up (findUserBySub's row, so no
// extra query), which ends every console session of theirs at once, copies of the cookie included.
import { createHash, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import { open, seal } from '../crypto.ts';
import { ROUTES } from '../oauth/provider.ts';
import { ACR_PHISHING_RESISTANT, acrSatisfies } from '../oauth/authentication-context.ts';
import { CONSOLE_CALLBACK, CONSOLE_CLIENT_ID } from '../clients/console-client.ts';
import { isLocalPath } from '../ui/frame.ts';
import type { ConsoleDeps } from './access.ts';
import { endConsoleSessions, findUserBySub } from '../store/directory.ts';

const AUTH_COOKIE = 'idp_console_auth';
const AUTH_TTL_MS = 10 * 60 * 1000;
export const MAX_SESSION_MS = 12 * 3600 * 1000;

export interface StaffSession {
  sub: string;
  /** when the staff member signed in to the service (ID token auth_time), ms */
  authAt: number;
  /** when the console was last used, ms */
  seen: number;
  acr: string;
  /** the user's console generation at sign-in: a session of an older generation has ended */
  gen: number;
}

interface AuthState {
  state: string;
  nonce: string;
  verifier: string;
  back: string;
  at: number;
}

const cookieName = (deps: ConsoleDeps) =>
  deps.config.publicUrl.startsWith('https:') ? '__Host-idp_console' : 'idp_console';
const secure = (deps: ConsoleDeps) => deps.config.publicUrl.startsWith('https:');

function sealJson(deps: ConsoleDeps, value: unknown, aad: string): string {
  return seal(deps.keys.consoleSession, Buffer.from(JSON.stringify(value)), aad);
}

function openJson<T>(deps: ConsoleDeps, box: unknown, aad: string): T | undefined {
  if (typeof box !== 'string' || box.length > 4000) return undefined;
  const plain = open(deps.keys.consoleSession, box, aad);
  if (!plain) return undefined;
  try {
    return JSON.parse(plain.toString('utf8')) as T;
  } catch {
    return undefined;
  }
}

export type SessionState = { session: StaffSession } | { expired: boolean };

/** The staff session this browser holds, unless it is missing, altered, idle too long or too old. */
export function readSession(deps: ConsoleDeps, request: FastifyRequest): SessionState {
  const s = openJson<StaffSession>(deps, request.cookies[cookieName(deps)], 'console-session');
  if (
    !s ||
    typeof s.sub !== 'string' ||
    typeof s.seen !== 'number' ||
    typeof s.authAt !== 'number' ||
    typeof s.gen !== 'number'
  )
    return { expired: false };
  const now = deps.now();
  const idle = now - s.seen > deps.config.consoleIdleTimeoutSeconds * 1000;
  if (idle || now - s.authAt > MAX_SESSION_MS) return { expired: true };
  return { session: s };
}

/** Writes (or renews: the idle clock starts again) the session cookie. */
export function writeSession(deps: ConsoleDeps, reply: FastifyReply, s: StaffSession): void {
  reply.setCookie(cookieName(deps), sealJson(deps, { ...s, seen: deps.now() }, 'console-session'), {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: secure(deps),
  });
}

/** Signing out: every console session of the user ends (this browser's cookie is cleared too). */
export async function endSessions(deps: ConsoleDeps, reply: FastifyReply, sub: string): Promise<void> {
  await endConsoleSessions(deps.store.db, sub);
  clearSession(deps, reply);
}

export function clearSession(deps: ConsoleDeps, reply: FastifyReply): void {
  reply.clearCookie(cookieName(deps), { path: '/', httpOnly: true, sameSite: 'lax', secure: secure(deps) });
}

const random = () => randomBytes(32).toString('base64url');

/** The authorization request that signs staff in; the browser is sent there. */
export function startSignIn(deps: ConsoleDeps, reply: FastifyReply, back: string): FastifyReply {
  const auth: AuthState = {
    state: random(),
    nonce: random(),
    verifier: random(),
    back: isLocalPath(back) && back.startsWith('/console') ? back : '/console',
    at: deps.now(),
  };
  reply.setCookie(AUTH_COOKIE, sealJson(deps, auth, 'console-auth'), {
    path: '/console',
    httpOnly: true,
    sameSite: 'lax',
    secure: secure(deps),
    maxAge: AUTH_TTL_MS / 1000,
  });
  const params = new URLSearchParams({
    client_id: CONSOLE_CLIENT_ID,
    response_type: 'code',
    scope: 'openid',
    redirect_uri: `${deps.config.publicUrl}${CONSOLE_CALLBACK}`,
    state: auth.state,
    nonce: auth.nonce,
    code_challenge: createHash('sha256').update(auth.verifier).digest('base64url'),
    code_challenge_method: 'S256',
    max_age: String(deps.config.consoleIdleTimeoutSeconds),
  });
  if (deps.config.consoleRequirePasskey)
    params.set('claims', JSON.stringify({ id_token: { acr: { essential: true, values: [ACR_PHISHING_RESISTANT] } } }));
  return reply
    .code(303)
    .header('location', `${ROUTES.authorization}?${params.toString()}`)
    .header('cache-control', 'no-store')
    .send();
}

export type CallbackResult =
  { ok: true; session: StaffSession; back: string } | { ok: false; reason: 'failed' | 'passkey' };

/** The authorization response: state checked, code redeemed, ID token verified. */
export async function finishSignIn(deps: ConsoleDeps, request: FastifyRequest): Promise<CallbackResult> {
  const auth = openJson<AuthState>(deps, request.cookies[AUTH_COOKIE], 'console-auth');
  const query = request.query as Record<string, unknown>;
  if (!auth || deps.now() - auth.at > AUTH_TTL_MS || query.state !== auth.state) return { ok: false, reason: 'failed' };
  if (typeof query.code !== 'string' || query.code.length > 200) return { ok: false, reason: 'failed' };
  const idToken = await redeem(request, deps, query.code, auth.verifier);
  if (!idToken) return { ok: false, reason: 'failed' };
  const claims = await verifyIdToken(request, deps, idToken, auth.nonce);
  if (!claims) return { ok: false, reason: 'failed' };
  if (deps.config.consoleRequirePasskey && !acrSatisfies(claims.acr, [ACR_PHISHING_RESISTANT]))
    return { ok: false, reason: 'passkey' };
  const user = await findUserBySub(deps.store.db, claims.sub);
  if (!user) return { ok: false, reason: 'failed' };
  const session = {
    sub: claims.sub,
    authAt: claims.authAt,
    seen: deps.now(),
    acr: claims.acr,
    gen: user.console_generation,
  };
  return { ok: true, back: auth.back, session };
}

export function forgetAuthState(deps: ConsoleDeps, reply: FastifyReply): void {
  reply.clearCookie(AUTH_COOKIE, { path: '/console', httpOnly: true, sameSite: 'lax', secure: secure(deps) });
}

/** The token endpoint, called in-process: the code never leaves the service. */
async function redeem(
  request: FastifyRequest,
  deps: ConsoleDeps,
  code: string,
  verifier: string,
): Promise<string | undefined> {
  const res = await request.server.inject({
    method: 'POST',
    url: ROUTES.token,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: `${deps.config.publicUrl}${CONSOLE_CALLBACK}`,
      client_id: CONSOLE_CLIENT_ID,
      code_verifier: verifier,
    }).toString(),
  });
  if (res.statusCode !== 200) {
    request.log.warn({ status: res.statusCode }, 'console sign-in: the code was not redeemed');
    return undefined;
  }
  const body = res.json<{ id_token?: unknown }>();
  return typeof body.id_token === 'string' ? body.id_token : undefined;
}

async function verifyIdToken(
  request: FastifyRequest,
  deps: ConsoleDeps,
  idToken: string,
  nonce: string,
): Promise<{ sub: string; acr: string; authAt: number } | undefined> {
  const jwks = (await request.server.inject({ method: 'GET', url: ROUTES.jwks })).json<JSONWebKeySet>();
  try {
    const { payload } = await jwtVerify(idToken, createLocalJWKSet(jwks), {
      issuer: deps.config.publicUrl,
      audience: CONSOLE_CLIENT_ID,
      algorithms: ['RS256', 'ES256'],
      requiredClaims: ['sub', 'exp', 'iat', 'nonce', 'auth_time'],
      maxTokenAge: '10 minutes',
    });
    if (payload.nonce !== nonce || typeof payload.sub !== 'string') return undefined;
    const authAt = Number(payload.auth_time) * 1000;
    if (deps.now() - authAt > deps.config.consoleIdleTimeoutSeconds * 1000 + 60_000) return undefined;
    return { sub: payload.sub, acr: typeof payload.acr === 'string' ? payload.acr : '', authAt };
  } catch (err) {
    request.log.warn({ err: err instanceof Error ? err.message : 'invalid' }, 'console sign-in: ID token refused');
    return undefined;
  }
}
