// "Lost your passkey?": self-service recovery by e-mail (src/webauthn/self-recovery.ts). The page
// answers the same, at once, whether the account exists, may be recovered this way, or not: the
// lookup and the message are done after the answer has gone, so neither its words nor its timing
// tell anything. Counted per client address and per name asked for (both before any work), and
// CSRF-protected like every form.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Keyring } from '../crypto.ts';
import { clientKey, rateLimit } from '../http/rate-limit.ts';
import { requestSelfRecovery } from '../webauthn/self-recovery.ts';
import { lostPasskeyPage } from './pages.ts';
import { bodyField, frameFor, overLimit, sendMessage, sendNotFound, sendPage, type Kit } from './kit.ts';

export const LOST_PASSKEY_PATH = '/lost-passkey';
const SCOPE = 'lost-passkey';
const WINDOW_MS = 60 * 60 * 1000;
/** requests per client address an hour */
export const LOST_PASSKEY_IP_LIMIT = 10;
/** requests per name (username or address) an hour: a mailbox is not flooded */
export const LOST_PASSKEY_NAME_LIMIT = 3;

function render(kit: Kit, request: FastifyRequest, reply: FastifyReply, sent = false) {
  const frame = frameFor(request);
  const page = lostPasskeyPage(frame, {
    csrf: { field: kit.csrf.field, token: kit.csrf.token(request, reply, SCOPE) },
    action: LOST_PASSKEY_PATH,
    sent,
  });
  return sendPage(reply, 200, page, {}, { 'cache-control': 'no-store' });
}

export function lostPasskeyRoutes(kit: Kit, keys: Keyring) {
  const limits = {
    ip: rateLimit(kit.store, 'lost-passkey-ip', LOST_PASSKEY_IP_LIMIT, WINDOW_MS, kit.now),
    name: rateLimit(kit.store, 'lost-passkey-name', LOST_PASSKEY_NAME_LIMIT, WINDOW_MS, kit.now),
  };
  const setup = { publicUrl: kit.config.publicUrl, mail: kit.config.smtpUrl !== undefined };

  async function offered(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    if (await kit.selfRecoveryOffered()) return true;
    sendNotFound(request, reply);
    return false;
  }

  async function ask(request: FastifyRequest, reply: FastifyReply) {
    const frame = frameFor(request);
    if (!kit.csrf.verify(request, SCOPE, bodyField(request, kit.csrf.field)))
      return sendMessage(reply, frame, 403, 'error.csrf');
    const raw = bodyField(request, 'identifier');
    const identifier = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
    if (!identifier || identifier.length > 320) return render(kit, request, reply);
    for (const [limit, key] of [
      [limits.ip, clientKey(request.ip)],
      [limits.name, identifier],
    ] as const) {
      const retryAfter = await overLimit(limit, key);
      if (retryAfter)
        return sendMessage(reply, frame, 429, 'error.rate_limited', { headers: { 'retry-after': retryAfter } });
    }
    await render(kit, request, reply, true);
    // after the answer: its timing says nothing about the account
    const from = { ip: request.ip, requestId: request.id, now: kit.now() };
    requestSelfRecovery(kit.store, keys, setup, { identifier, lang: frame.locale }, from).then(
      (outcome) => request.log.info({ event: 'self_recovery', outcome }, 'self-service recovery asked for'),
      (err: unknown) => request.log.error({ err }, 'self-service recovery failed'),
    );
    return reply;
  }

  return async function lostPasskey(app: FastifyInstance) {
    app.get(LOST_PASSKEY_PATH, async (request, reply) =>
      (await offered(request, reply)) ? render(kit, request, reply) : reply,
    );
    app.post(LOST_PASSKEY_PATH, async (request, reply) =>
      (await offered(request, reply)) ? ask(request, reply) : reply,
    );
  };
}
