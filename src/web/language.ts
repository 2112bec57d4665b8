// The language switcher's target: remembers the chosen language in a cookie (and, for a signed-in
// user, as the language of their e-mail) and returns to the page it was chosen on (a path on this
// site only).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isLocale, LANGUAGE_COOKIE } from '../ui/i18n.ts';
import { isLocalPath } from '../ui/frame.ts';
import { sendNotFound, type Kit } from './kit.ts';
import { findUserBySub } from '../store/directory.ts';
import { setUserLanguage } from '../store/mail.ts';

const YEAR_SECONDS = 365 * 24 * 60 * 60;

type LanguageRequest = FastifyRequest<{ Params: { lang: string }; Querystring: { return?: unknown } }>;

/** A signed-in user's choice is also the language of their e-mail (docs/email.md). */
async function remember(kit: Kit, request: LanguageRequest, reply: FastifyReply, lang: string): Promise<void> {
  const session = await kit.sessions.current(request, reply);
  if (!session) return;
  const user = await findUserBySub(kit.store.db, session.accountId);
  if (user) await setUserLanguage(kit.store.db, user.id, lang);
}

async function choose(kit: Kit, request: LanguageRequest, reply: FastifyReply) {
  const { lang } = request.params;
  if (!isLocale(lang)) return sendNotFound(request, reply);
  const back = isLocalPath(request.query.return) ? request.query.return : '/account';
  await remember(kit, request, reply, lang);
  reply.setCookie(LANGUAGE_COOKIE, lang, {
    path: '/',
    maxAge: YEAR_SECONDS,
    sameSite: 'lax',
    httpOnly: true,
    secure: kit.config.publicUrl.startsWith('https:'),
  });
  return reply.code(303).header('location', back).header('cache-control', 'no-store').send();
}

export function languageRoutes(kit: Kit) {
  return async function language(app: FastifyInstance) {
    app.get<{ Params: { lang: string }; Querystring: { return?: unknown } }>('/language/:lang', (request, reply) =>
      choose(kit, request, reply),
    );
  };
}
