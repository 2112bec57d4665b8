// The passkey offered after a password sign-in (organizations turn it on with `org policy
// --passkey-upgrade on`). The sign-in is already recorded in the interaction; this page sits
// between it and the client: create a passkey (conditionally where the browser can, else with a
// button) or "Not now", which this browser remembers for PASSKEY_UPGRADE_SNOOZE_SECONDS.
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { InteractionResults } from 'oidc-provider';
import { findUserBySub, type User } from '../store/directory.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { loadPolicy } from '../webauthn/policy.ts';
import { countPasskeyUpgrade } from '../http/metrics.ts';
import { passkeyOfferPage } from './passkey-pages.ts';
import { bodyField, sendPage, type Kit } from './kit.ts';
import { withinCeremonyLimit } from './passkey-sign-in.ts';
import { registrationError } from './registration-errors.ts';
import { accountDisabled } from '../directory/account-state.ts';
import {
  checkCsrf,
  checkCsrfHeader,
  finish,
  loadInteraction,
  recordResult,
  requirePrompt,
  scopeOf,
  type Loaded,
  type Params,
  type Req,
} from './interaction.ts';

const SNOOZE_COOKIE = 'idp_passkey_offer';

/** The cookie names the user it was declined for, without naming them: a browser can be shared. */
const snoozeValue = (user: User) => createHash('sha256').update(`passkey-offer:${user.sub}`).digest('base64url');

/**
 * The user's organization offers passkeys, the user has none, and did not say "Not now" here lately.
 * ignorePolicy: after an upstream sign-in the offer is the way off the old identity provider, and made
 * whatever the organization's policy says of the offer after a password.
 */
export async function offerApplies(
  kit: Kit,
  request: FastifyRequest,
  user: User,
  { ignorePolicy = false }: { ignorePolicy?: boolean } = {},
): Promise<boolean> {
  if (request.cookies[SNOOZE_COOKIE] === snoozeValue(user)) return false;
  if (!ignorePolicy && !(await loadPolicy(kit.store.db, user.org_id)).passkeyUpgrade) return false;
  return (await listUserCredentials(kit.store.db, user.id)).length === 0;
}

export function renderOffer(
  kit: Kit,
  request: FastifyRequest,
  reply: FastifyReply,
  loaded: Loaded,
  { returnTo, error, status = 200 }: { returnTo: string; error?: string; status?: number },
) {
  const { uid } = loaded.interaction;
  if (!error) countPasskeyUpgrade('offered');
  const page = passkeyOfferPage(loaded.frame, {
    csrf: { field: kit.csrf.field, token: kit.csrf.token(request, reply, scopeOf(uid)) },
    optionsUrl: `/interaction/${uid}/offer/options`,
    action: `/interaction/${uid}/offer`,
    laterAction: `/interaction/${uid}/offer/later`,
    continueUrl: returnTo,
    error,
  });
  return sendPage(reply, status, page, { formTargets: loaded.formTargets });
}

/**
 * The sign-in this interaction recorded, to record again on the way out: the provider's merge
 * option merges with the previous interaction's result, not this one's.
 */
const signedInResult = (loaded: Loaded): InteractionResults => loaded.interaction.result ?? {};

/** The user this interaction signed in (its recorded result), or a page saying it is gone. */
async function signedInUser(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded): Promise<User | undefined> {
  const accountId = (loaded.interaction.result as { login?: { accountId?: string } } | undefined)?.login?.accountId;
  const user = accountId ? await findUserBySub(kit.store.db, accountId) : undefined;
  if (user && !accountDisabled(user)) return user;
  await finish(reply, loaded, { error: 'access_denied', error_description: 'account no longer exists' });
  return undefined;
}

async function loadOffer(kit: Kit, request: Req, reply: FastifyReply, csrf: 'form' | 'header') {
  const loaded = await loadInteraction(kit, request, reply);
  if (!loaded) return undefined;
  const csrfOk =
    csrf === 'form' ? checkCsrf(kit, request, reply, loaded) : checkCsrfHeader(kit, request, reply, loaded);
  if (!csrfOk || !requirePrompt(reply, loaded, 'login')) return undefined;
  const user = await signedInUser(kit, request, reply, loaded);
  return user ? { loaded, user } : undefined;
}

async function offerOptions(kit: Kit, request: Req, reply: FastifyReply) {
  const offer = await loadOffer(kit, request, reply, 'header');
  if (!offer || !(await withinCeremonyLimit(kit, request, reply))) return reply;
  const existing = await listUserCredentials(kit.store.db, offer.user.id);
  const binding = `offer:${offer.loaded.interaction.uid}`;
  return reply.send(await kit.webauthn.registrationOptions(offer.user, existing, binding));
}

async function createPasskey(kit: Kit, request: Req, reply: FastifyReply) {
  const offer = await loadOffer(kit, request, reply, 'form');
  if (!offer) return reply;
  const { loaded, user } = offer;
  const outcome = await kit.webauthn.verifyRegistration(
    user,
    bodyField(request, 'response'),
    `offer:${loaded.interaction.uid}`,
    {
      userAgent: request.headers['user-agent'],
      requestId: request.id,
      ip: request.ip,
    },
  );
  if (!outcome.ok) {
    request.log.info({ event: 'passkey.register_failed', reason: outcome.reason }, 'passkey registration refused');
    const returnTo = await recordResult(loaded, signedInResult(loaded));
    const error = loaded.frame.t(registrationError(outcome.reason, 'offer.failed'));
    return renderOffer(kit, request, reply, loaded, { returnTo, error, status: 400 });
  }
  countPasskeyUpgrade('created');
  return finish(reply, loaded, signedInResult(loaded));
}

async function notNow(kit: Kit, request: Req, reply: FastifyReply) {
  const offer = await loadOffer(kit, request, reply, 'form');
  if (!offer) return reply;
  countPasskeyUpgrade('declined');
  const maxAge = kit.config.passkeyUpgradeSnoozeSeconds;
  if (maxAge > 0)
    reply.setCookie(SNOOZE_COOKIE, snoozeValue(offer.user), {
      path: '/interaction',
      httpOnly: true,
      sameSite: 'lax',
      secure: kit.config.publicUrl.startsWith('https:'),
      maxAge,
    });
  return finish(reply, offer.loaded, signedInResult(offer.loaded));
}

export function offerRoutes(kit: Kit) {
  return async function passkeyOffer(app: FastifyInstance) {
    app.post<Params>('/interaction/:uid/offer/options', (request, reply) => offerOptions(kit, request, reply));
    app.post<Params>('/interaction/:uid/offer', (request, reply) => createPasskey(kit, request, reply));
    app.post<Params>('/interaction/:uid/offer/later', (request, reply) => notNow(kit, request, reply));
  };
}
