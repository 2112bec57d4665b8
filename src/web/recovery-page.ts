// The page a recovery link opens (/recover/<secret>): the user it names registers a new passkey
// without signing in; the link is used up in the passkey's own transaction, so of two tabs racing
// with the same link exactly one gets a passkey.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { openRecoveryLink, useRecoveryLink } from '../webauthn/recovery-links.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { userActor } from '../audit/index.ts';
import { sendError } from '../http/errors.ts';
import type { RecoveryLinkRow } from '../store/recovery-links.ts';
import type { User } from '../store/directory.ts';
import { recoveryPage } from './passkey-pages.ts';
import { withBrand } from '../ui/frame.ts';
import type { Frame } from './pages.ts';
import { bodyField, frameFor, sendMessage, sendPage, type Kit } from './kit.ts';
import { withinCeremonyLimit } from './passkey-sign-in.ts';
import { registrationError } from './registration-errors.ts';

type Req = FastifyRequest<{ Params: { token: string } }>;

interface Opened {
  link: RecoveryLinkRow;
  user: User;
  frame: Frame;
}

const scopeOf = (link: RecoveryLinkRow) => `recover:${link.id}`;

/** The link while it can be used, or a page saying it cannot (wrong, used, revoked or expired alike). */
async function openLink(kit: Kit, request: Req, reply: FastifyReply): Promise<Opened | undefined> {
  const opened = await openRecoveryLink(kit.store, request.params.token, kit.now());
  if (!opened) {
    sendMessage(reply, frameFor(request), 404, 'recovery.invalid', { title: 'recovery.title' });
    return undefined;
  }
  // The page wears the user's organization's brand.
  return { ...opened, frame: withBrand(frameFor(request), await kit.branding.forOrg(opened.user.org_id)) };
}

function render(kit: Kit, request: Req, reply: FastifyReply, opened: Opened, error?: string) {
  const { link, user, frame } = opened;
  const here = `/recover/${request.params.token}`;
  const page = recoveryPage(frame, {
    user: user.display_name ?? user.name,
    csrf: { field: kit.csrf.field, token: kit.csrf.token(request, reply, scopeOf(link)) },
    optionsUrl: `${here}/options`,
    action: here,
    error,
  });
  // The secret is in the path: no referrer, no caching.
  return sendPage(reply, error ? 400 : 200, page, {}, { 'cache-control': 'no-store' });
}

async function show(kit: Kit, request: Req, reply: FastifyReply) {
  const opened = await openLink(kit, request, reply);
  return opened ? render(kit, request, reply, opened) : reply;
}

async function options(kit: Kit, request: Req, reply: FastifyReply) {
  const opened = await openRecoveryLink(kit.store, request.params.token, kit.now());
  if (!opened) return sendError(reply, 404, 'This recovery link cannot be used');
  if (!kit.csrf.verify(request, scopeOf(opened.link), request.headers[kit.csrf.header]))
    return sendError(reply, 403, 'CSRF token missing or invalid');
  if (!(await withinCeremonyLimit(kit, request, reply))) return reply;
  const existing = await listUserCredentials(kit.store.db, opened.user.id);
  return reply.send(await kit.webauthn.registrationOptions(opened.user, existing, scopeOf(opened.link)));
}

async function register(kit: Kit, request: Req, reply: FastifyReply) {
  const opened = await openLink(kit, request, reply);
  if (!opened) return reply;
  const { link, user, frame } = opened;
  if (!kit.csrf.verify(request, scopeOf(link), bodyField(request, kit.csrf.field)))
    return sendMessage(reply, frame, 403, 'error.csrf');
  const actor = userActor(user, request);
  const outcome = await kit.webauthn.verifyRegistration(user, bodyField(request, 'response'), scopeOf(link), {
    userAgent: request.headers['user-agent'],
    requestId: request.id,
    ip: request.ip,
    within: useRecoveryLink(link, user, { actor, now: kit.now() }),
  });
  if (outcome.ok) return sendMessage(reply, frame, 200, 'recovery.done', { title: 'recovery.title' });
  request.log.info({ event: 'passkey.register_failed', reason: outcome.reason }, 'recovery registration refused');
  if (outcome.reason === 'link_used')
    return sendMessage(reply, frame, 409, 'recovery.invalid', { title: 'recovery.title' });
  return render(kit, request, reply, opened, frame.t(registrationError(outcome.reason, 'recovery.failed')));
}

export function recoveryRoutes(kit: Kit) {
  return async function recovery(app: FastifyInstance) {
    app.get<{ Params: { token: string } }>('/recover/:token', (request, reply) => show(kit, request, reply));
    app.post<{ Params: { token: string } }>('/recover/:token/options', (request, reply) =>
      options(kit, request, reply),
    );
    app.post<{ Params: { token: string } }>('/recover/:token', (request, reply) => register(kit, request, reply));
  };
}
