// Signing in with a passkey, the same on the sign-in page of an interaction and on the account
// page: the browser asks for a challenge bound to the form it came from, then posts the assertion.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { User } from '../store/directory.ts';
import { sendError } from '../http/errors.ts';
import { amrForPasskey } from '../oauth/authentication-context.ts';
import { bodyField, clientKey, overLimit, signInSucceeded, type Kit, type SignInFailure } from './kit.ts';
import { signInAccepted, signInRefused } from './sign-in-audit.ts';
import { asAuthentication } from '../webauthn/responses.ts';
import { accountDisabled } from '../directory/account-state.ts';

export type PasskeyResult =
  { ok: true; user: User; amr: string[]; attested: boolean; passkeyId: number } | ({ ok: false } & SignInFailure);

/**
 * Counts a request for a WebAuthn challenge (sign-in or registration) against the client IP.
 * Every sign-in page asks for one, so the count is generous and kept apart from the one for
 * attempts. Over the limit, the script gets a JSON 429 here and this returns false.
 */
export async function withinCeremonyLimit(kit: Kit, request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
  const retry = await overLimit(kit.limits.ceremonies, clientKey(request.ip));
  if (!retry) return true;
  sendError(reply, 429, 'Too many requests; try again later', { 'retry-after': retry });
  return false;
}

/** The challenge for a passkey sign-in, bound to binding. */
export async function sendPasskeyOptions(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  binding: string,
  options: { requireUserVerification?: boolean } = {},
) {
  if (!(await withinCeremonyLimit(kit, request, reply))) return reply;
  return reply.send(await kit.webauthn.authenticationOptions(binding, options));
}

/**
 * Passkey sign-in as a pipeline: count the attempt against the client IP, verify the assertion
 * (the challenge must have been issued for binding), and on success give the attempt back.
 */
export async function passkeySignIn(
  kit: Kit,
  request: FastifyRequest,
  binding: string,
  clientId: string | null = null,
): Promise<PasskeyResult> {
  const retry = await overLimit(kit.limits.ip, clientKey(request.ip));
  if (retry) return { ok: false, status: 429, error: 'error.rate_limited', retryAfter: retry };
  const outcome = await kit.webauthn.verifyAuthentication(bodyField(request, 'response'), binding, request.id);
  if (!outcome.ok) {
    await signInRefused(kit, request, { method: 'passkey', clientId }, outcome.reason);
    // The page tells the browser's credential manager to forget a passkey this service does
    // not know (deleted here): the credential id is the one the browser itself just sent.
    const unknownCredential =
      outcome.reason === 'unknown_credential' ? asAuthentication(bodyField(request, 'response'))?.id : undefined;
    return { ok: false, status: 401, error: 'error.passkey', unknownCredential };
  }
  const attempt = { method: 'passkey' as const, clientId, user: outcome.user };
  if (accountDisabled(outcome.user)) {
    await signInRefused(kit, request, attempt, 'disabled');
    return { ok: false, status: 403, error: 'error.disabled' };
  }
  await signInSucceeded(kit, request);
  const amr = amrForPasskey(outcome);
  await signInAccepted(kit, request, attempt, amr);
  return { ok: true, user: outcome.user, amr, attested: outcome.attested, passkeyId: outcome.passkey.id };
}
