// The audit trail and the log of sign-ins, the same for the sign-in pages of an authorization
// request and for the account page: every attempt that reached a verdict is one record (attempts
// refused before any check, over a rate limit or malformed, are counted in metrics only).
import type { FastifyRequest } from 'fastify';
import type { User } from '../store/directory.ts';
import { recordAudit } from '../audit/index.ts';
import type { Store } from '../store/index.ts';
import { markFirstSignIn } from '../store/adoption.ts';

/** What recording needs of the pages' kit. */
interface Recorder {
  store: Store;
  now: () => number;
}

export type SignInMethod = 'password' | 'passkey' | 'upstream';

export interface SignInAttempt {
  method: SignInMethod;
  /** the application the user signs in to; null on the account page */
  clientId: string | null;
  /** the user, when the attempt named an existing one */
  user?: Pick<User, 'eppn' | 'org_id'>;
  /** what was typed as the username, when no user matched (password sign-in) */
  username?: string;
}

function actorOf(request: FastifyRequest, user: SignInAttempt['user']) {
  return { type: 'user' as const, id: user?.eppn ?? null, requestId: request.id, ip: request.ip };
}

export async function signInRefused(kit: Recorder, request: FastifyRequest, attempt: SignInAttempt, reason: string) {
  const { method, clientId, user } = attempt;
  request.log.info({ event: 'login.failed', method, reason, client_id: clientId }, `${method} sign-in refused`);
  await recordAudit(kit.store.db, {
    action: 'signin.failed',
    actor: actorOf(request, user),
    at: kit.now(),
    subject: user?.eppn ?? attempt.username?.slice(0, 320) ?? null,
    orgId: user?.org_id ?? null,
    clientId,
    eppn: user?.eppn ?? null,
    details: { method, reason },
  });
}

export async function signInAccepted(
  kit: Recorder,
  request: FastifyRequest,
  attempt: SignInAttempt & { user: Pick<User, 'id' | 'eppn' | 'org_id' | 'first_sign_in_at'> },
  amr: string[],
) {
  const { method, clientId, user } = attempt;
  request.log.info({ event: 'login.succeeded', method, amr, client_id: clientId }, `${method} sign-in succeeded`);
  const at = kit.now();
  // the adoption funnel's "signed in at least once": one write, on the first sign-in only
  if (user.first_sign_in_at === null) await markFirstSignIn(kit.store.db, user.id, at);
  await recordAudit(kit.store.db, {
    action: 'signin.succeeded',
    actor: actorOf(request, user),
    at,
    orgId: user.org_id,
    clientId,
    eppn: user.eppn,
    details: { method, amr },
  });
}
