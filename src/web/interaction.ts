// What every step of an oidc-provider interaction (/interaction/<uid>) starts with: the
// interaction this browser holds, its CSRF token, the prompt it waits for, and how it ends.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Interaction, InteractionResults } from 'oidc-provider';
import { errors as oidcErrors } from 'oidc-provider';
import { sendError } from '../http/errors.ts';
import { adoptRawCookies } from './session.ts';
import { originOf } from '../ui/html.ts';
import type { Frame } from './pages.ts';
import { bodyField, frameFor, sendMessage, type Kit } from './kit.ts';

export type Params = { Params: { uid: string } };
export type Req = FastifyRequest<Params>;

const UID = /^[A-Za-z0-9_-]{1,64}$/;

export interface Loaded {
  interaction: Interaction;
  frame: Frame;
  /** where the browser is sent once the interaction ends: forms must be allowed to go there */
  formTargets: string[];
}

export const scopeOf = (uid: string) => `interaction:${uid}`;

/** The interaction this browser holds for uid, or a page saying it is gone. */
export async function loadInteraction(kit: Kit, request: Req, reply: FastifyReply): Promise<Loaded | undefined> {
  const fallback = frameFor(request);
  if (!UID.test(request.params.uid)) {
    sendMessage(reply, fallback, 400, 'error.expired');
    return undefined;
  }
  kit.sessions.prepare(request);
  let interaction: Interaction;
  try {
    interaction = await kit.provider.current().interactionDetails(request.raw, reply.raw);
  } catch (err) {
    adoptRawCookies(reply);
    if (err instanceof oidcErrors.SessionNotFound) {
      sendMessage(reply, fallback, 400, 'error.expired');
      return undefined;
    }
    throw err;
  }
  adoptRawCookies(reply);
  if (interaction.uid !== request.params.uid) {
    sendMessage(reply, fallback, 400, 'error.expired');
    return undefined;
  }
  const redirect = originOf(interaction.params.redirect_uri);
  return {
    interaction,
    frame: frameFor(request, interaction.params.ui_locales),
    formTargets: redirect ? [redirect] : [],
  };
}

/** The form carries this interaction's CSRF token. */
export function checkCsrf(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded): boolean {
  if (kit.csrf.verify(request, scopeOf(loaded.interaction.uid), bodyField(request, kit.csrf.field))) return true;
  sendMessage(reply, loaded.frame, 403, 'error.csrf');
  return false;
}

/** The provider is waiting for this prompt (a sign-in form posted after it moved on is stale). */
export function requirePrompt(reply: FastifyReply, loaded: Loaded, prompt: 'login' | 'consent'): boolean {
  if (loaded.interaction.prompt.name === prompt) return true;
  sendMessage(reply, loaded.frame, 400, 'error.expired');
  return false;
}

/** The browser script's challenge request carries the token in a header and gets JSON back. */
export function checkCsrfHeader(kit: Kit, request: Req, reply: FastifyReply, loaded: Loaded): boolean {
  if (kit.csrf.verify(request, scopeOf(loaded.interaction.uid), request.headers[kit.csrf.header])) return true;
  sendError(reply, 403, 'CSRF token missing or invalid');
  return false;
}

/**
 * Records the result and sends the browser back to the provider. The result is merged with the
 * previous step's (the sign-in before a consent page): without it the provider would see a
 * consent without a login, and prompt=login would ask for the password again. This is what the
 * provider's interactionResult() does, on the interaction this request has already loaded rather
 * than reading it again.
 */
export async function recordResult(loaded: Loaded, result: InteractionResults): Promise<string> {
  const { interaction } = loaded;
  interaction.result = 'error' in result ? result : { ...interaction.lastSubmission, ...result };
  await interaction.save(interaction.exp - Math.floor(Date.now() / 1000));
  return interaction.returnTo;
}

export async function finish(reply: FastifyReply, loaded: Loaded, result: InteractionResults) {
  return reply
    .code(303)
    .header('location', await recordResult(loaded, result))
    .send();
}
