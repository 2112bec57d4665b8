// The signed-in session is oidc-provider's own session: one cookie for relying parties and the
// account page alike, so signing out at /openid/endsession also signs the account page out.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { SESSION_COOKIE, SESSION_TTL } from '../oauth/provider.ts';
import { sendLogoutTokens } from '../oauth/end-user-sessions.ts';
import { acrFor } from '../oauth/authentication-context.ts';

export interface SignedIn {
  accountId: string;
  /** stable id of this session (not the cookie value) */
  uid: string;
  /** when the user last signed in (ms) */
  signedInAt: number;
}

export interface Sessions {
  current(request: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined>;
  /** signs the browser in outside an authorization request (the account page) */
  signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    login: { accountId: string; amr: string[]; attested?: boolean },
  ): Promise<void>;
  /** makes oidc-provider see this request as PUBLIC_URL does (cookie security); call before interactionDetails and friends */
  prepare(request: FastifyRequest): void;
}

/** Cookies oidc-provider wrote straight to the raw response, handed to Fastify so they are not
 * overwritten by cookies the page itself sets. */
export function adoptRawCookies(reply: FastifyReply): void {
  const raw = reply.raw.getHeader('set-cookie');
  if (raw === undefined) return;
  reply.raw.removeHeader('set-cookie');
  for (const value of Array.isArray(raw) ? raw : [String(raw)]) reply.header('set-cookie', value);
}

export function createSessions(holder: ProviderHolder, config: Config, now: () => number = Date.now): Sessions {
  const publicUrl = new URL(config.publicUrl);
  const prepare = (request: FastifyRequest) => {
    // Cookie security follows PUBLIC_URL, exactly as on the provider's own routes.
    request.raw.headers['x-forwarded-proto'] = publicUrl.protocol.replace(':', '');
    request.raw.headers['x-forwarded-host'] = publicUrl.host;
  };
  return {
    prepare,
    async current(request, reply) {
      prepare(request);
      const provider = holder.current();
      const session = await provider.Session.get(provider.createContext(request.raw, reply.raw));
      adoptRawCookies(reply);
      return session.accountId
        ? { accountId: session.accountId, uid: session.uid, signedInAt: (session.loginTs ?? 0) * 1000 }
        : undefined;
    },
    async signIn(request, reply, login) {
      prepare(request);
      const provider = holder.current();
      const ctx = provider.createContext(request.raw, reply.raw);
      let session = await provider.Session.get(ctx);
      if (session.accountId && session.accountId !== login.accountId) {
        // Another user: end that session and start a new one (new uid), so nothing bound to the
        // old one — CSRF tokens, WebAuthn challenges, grants — carries over to this user.
        const ended = { accountId: session.accountId, authorizations: session.authorizations };
        await session.destroy();
        // The applications of the ended session hear about it, as after a logout.
        await sendLogoutTokens(provider, ended.accountId, ended.authorizations);
        session = new provider.Session();
      } else if (!(session as { new?: boolean }).new) {
        // A fresh identifier on every sign-in, so a planted cookie never becomes a signed-in one.
        session.resetIdentifier();
      }
      if (session.accountId !== login.accountId) session.authorizations = {};
      session.loginAccount({
        accountId: login.accountId,
        amr: login.amr,
        acr: acrFor(login.amr, { attested: login.attested }),
        loginTs: Math.floor(now() / 1000),
      });
      await session.save(SESSION_TTL);
      ctx.cookies.set(provider.cookieName('session'), session.jti, {
        ...SESSION_COOKIE,
        expires: new Date(session.exp * 1000),
      });
      adoptRawCookies(reply);
    },
  };
}
