// Single logout's front channel: a chain of top-level redirects (or auto-posted forms) through the
// SAML SPs of an ended session. Each gets a signed LogoutRequest (its NameID and SessionIndex as
// recorded at sign-on) at its logout endpoint from its metadata; its LogoutResponse comes back to
// /saml2/idp/slo and is verified against what was sent before the chain moves on. At the end the
// SP that asked gets its LogoutResponse (PartialLogout when an SP could not be signed out), or an
// OpenID Connect logout continues to its redirect. The chain's state is a sealed cookie
// (logout-chain.ts); the session itself ended before the chain began, so a browser that leaves it
// is signed out of the identity provider all the same.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { buildRedirectQuery, childElements, NS, serialize, signEnveloped, type Element } from '../saml/xml/index.ts';
import { BINDING } from '../saml/metadata/index.ts';
import { samlKeys, type ServiceProvider } from '../service-providers/index.ts';
import { safeEqual } from '../crypto.ts';
import {
  checkDestination,
  checkIssueInstant,
  checkSchema,
  findIssuer,
  SamlRefusal,
  verifyRequest,
  type Received,
} from './requests.ts';
import { appendNameId, appendStatus, child, messageDocument, STATUS } from './response.ts';
import { sendFrontchannelFrames, sendPostForm } from './pages.ts';
import { countResponse } from './metrics.ts';
import { idpEntityId, type SsoDeps } from './sso.ts';
import { SLO_PATH } from './idp-metadata-document.ts';
import {
  boundChain,
  chainCookie,
  clearedChainCookie,
  readChain,
  type LogoutChain,
  type LogoutInitiator,
  type LogoutTarget,
} from './logout-chain.ts';

/** Where a browser goes on with a chain (after the signed-out page's iframes, or to skip an SP that never answered). */
export const SLO_CONTINUE_PATH = '/saml2/idp/slo/continue';

type Endpoint = { binding: 'redirect' | 'post'; url: string };

/** What the chain needs (not the authorization server: the session ended before the chain began). */
export type LogoutDeps = Omit<SsoDeps, 'provider'>;

/**
 * Step: an SP's logout endpoint from its metadata, HTTP-Redirect preferred, then HTTP-POST: its
 * Location for our LogoutRequests, its ResponseLocation (else Location) for our LogoutResponses.
 */
export function sloEndpoint(sp: ServiceProvider, use: 'request' | 'response'): Endpoint {
  const services = sp.descriptor.singleLogoutServices;
  for (const [binding, name] of [
    [BINDING.redirect, 'redirect'],
    [BINDING.post, 'post'],
  ] as const) {
    const service = services.find((s) => s.binding === binding);
    if (service)
      return {
        binding: name,
        url: use === 'response' ? (service.responseLocation ?? service.location) : service.location,
      };
  }
  throw new SamlRefusal('no-slo', 'the service provider has no logout endpoint');
}

const secure = (deps: LogoutDeps) => deps.config.publicUrl.startsWith('https:');

/** A message to an SP's endpoint: a signed Redirect query (303), or a signed document auto-posted. */
async function sendMessage(
  deps: LogoutDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  message: { document: ReturnType<typeof messageDocument>; parameter: 'SAMLRequest' | 'SAMLResponse' },
  endpoint: Endpoint,
  relayState: string | undefined,
) {
  const key = (await samlKeys(deps.store, deps.keys, deps.now())).signing;
  const { document, id } = message.document;
  if (endpoint.binding === 'redirect') {
    const query = buildRedirectQuery({
      parameter: message.parameter,
      xml: serialize(document),
      relayState,
      signingKey: key.privateKey,
    });
    const separator = endpoint.url.includes('?') ? '&' : '?';
    return reply.code(303).header('location', `${endpoint.url}${separator}${query}`).send();
  }
  const xml = signEnveloped(document, id, { privateKey: key.privateKey, certificate: key.certificate });
  const to = {
    url: endpoint.url,
    parameter: message.parameter,
    message: Buffer.from(xml, 'utf8').toString('base64'),
    relayState,
  };
  return sendPostForm(request, reply, to, message.parameter === 'SAMLRequest' ? 'saml.signing_out' : 'saml.sending');
}

/** The signed LogoutResponse to the SP that asked. */
export async function sendLogoutResponse(
  deps: LogoutDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: { endpoint: Endpoint; inResponseTo: string; status: string[]; relayState?: string },
) {
  const envelope = {
    idpEntityId: idpEntityId(deps.config),
    destination: answer.endpoint.url,
    inResponseTo: answer.inResponseTo,
    now: deps.now(),
  };
  const document = messageDocument('LogoutResponse', envelope);
  appendStatus(document.document, document.root, answer.status);
  return sendMessage(deps, request, reply, { document, parameter: 'SAMLResponse' }, answer.endpoint, answer.relayState);
}

/** A signed LogoutRequest to the next SP of the chain, which then waits for its answer. */
async function sendLogoutRequest(
  deps: LogoutDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  to: { sp: ServiceProvider; endpoint: Endpoint; target: LogoutTarget },
  chain: LogoutChain,
) {
  const envelope = {
    idpEntityId: idpEntityId(deps.config),
    destination: to.endpoint.url,
    inResponseTo: undefined,
    now: deps.now(),
  };
  const document = messageDocument('LogoutRequest', envelope);
  const nameId = { value: to.target.nameId, format: to.target.format };
  appendNameId(document.document, document.root, nameId, envelope.idpEntityId, to.sp.entityId);
  child(document.document, document.root, NS.protocol, 'samlp:SessionIndex', to.target.sessionIndex);
  const waiting: LogoutChain = { ...chain, waiting: { sp: to.sp.entityId, id: document.id } };
  reply.header('set-cookie', chainCookie(deps.keys.samlState, waiting, secure(deps)));
  request.log.info({ entity_id: to.sp.entityId, binding: to.endpoint.binding }, 'saml logout request sent');
  return sendMessage(deps, request, reply, { document, parameter: 'SAMLRequest' }, to.endpoint, undefined);
}

/** The chain's next step: the next SP that can be sent a LogoutRequest, or the end. */
async function advance(deps: LogoutDeps, request: FastifyRequest, reply: FastifyReply, from: LogoutChain) {
  let chain: LogoutChain = { ...from, waiting: undefined };
  while (chain.queue.length > 0) {
    const [target, ...rest] = chain.queue;
    chain = { ...chain, queue: rest };
    const sp = await deps.findServiceProvider(target!.sp);
    let endpoint: Endpoint | undefined;
    try {
      endpoint = sp && !sp.disabled && target!.nameId ? sloEndpoint(sp, 'request') : undefined;
    } catch {
      endpoint = undefined;
    }
    if (sp && endpoint) return sendLogoutRequest(deps, request, reply, { sp, endpoint, target: target! }, chain);
    request.log.info({ entity_id: target!.sp }, 'saml logout: the service provider cannot be sent a logout request');
    chain = { ...chain, partial: true };
  }
  return finish(deps, request, reply, chain);
}

/** The end of the chain: the asking SP's LogoutResponse, or on to where an OpenID Connect logout goes. */
async function finish(deps: LogoutDeps, request: FastifyRequest, reply: FastifyReply, chain: LogoutChain) {
  reply.header('set-cookie', clearedChainCookie(secure(deps)));
  const initiator = chain.initiator;
  request.log.info({ partial: chain.partial, initiator: initiator.kind }, 'saml logout finished');
  if (initiator.kind === 'oidc') return reply.code(303).header('location', initiator.continueTo).send();
  const sp = await deps.findServiceProvider(initiator.sp);
  if (!sp || sp.disabled)
    throw new SamlRefusal('unknown-sp', 'the service provider is not known to this identity provider', 403);
  countResponse(chain.partial ? 'partial_logout' : 'logout', initiator.binding);
  return sendLogoutResponse(deps, request, reply, {
    endpoint: sloEndpoint(sp, 'response'),
    inResponseTo: initiator.id,
    status: chain.partial ? [STATUS.success, STATUS.partialLogout] : [STATUS.success],
    relayState: initiator.relayState,
  });
}

/**
 * The chain's start, once the session has ended: the signed-out page with the OpenID Connect
 * front-channel iframes first when there are any (it continues at SLO_CONTINUE_PATH), otherwise at
 * once the first LogoutRequest (or the end).
 */
export async function startPropagation(
  deps: LogoutDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  start: { initiator: LogoutInitiator; targets: LogoutTarget[]; frames: string[] },
) {
  const chain = boundChain(deps.keys.samlState, {
    initiator: start.initiator,
    queue: start.targets,
    partial: false,
    at: deps.now(),
  });
  if (start.frames.length === 0) return advance(deps, request, reply, chain);
  reply.header('set-cookie', chainCookie(deps.keys.samlState, chain, secure(deps)));
  return sendFrontchannelFrames(request, reply, start.frames, `${deps.config.publicUrl}${SLO_CONTINUE_PATH}`);
}

/** The chain of this browser, or the error page. */
function chainOf(deps: LogoutDeps, request: FastifyRequest): LogoutChain {
  const chain = readChain(deps.keys.samlState, request.headers.cookie, deps.now());
  if (!chain) throw new SamlRefusal('logout-unmatched', 'no logout is in progress in this browser (or it expired)');
  return chain;
}

/** The top-level status code and the second-level one, if any. */
function statusOf(response: Element): [string | null, string | null] {
  const top = childElements(childElements(response, NS.protocol, 'Status')[0]!, NS.protocol, 'StatusCode')[0]!;
  const second = childElements(top, NS.protocol, 'StatusCode')[0];
  return [top.getAttribute('Value'), second?.getAttribute('Value') ?? null];
}

/**
 * An SP's LogoutResponse: the one the chain waits for (its issuer, signed with its metadata's keys,
 * to this endpoint, in time, InResponseTo the LogoutRequest sent), then the chain moves on. An SP
 * that answers other than a plain Success was not (fully) signed out: the logout is partial.
 */
export async function logoutResponse(
  deps: LogoutDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  received: Received,
) {
  const chain = chainOf(deps, request);
  const waiting = chain.waiting;
  if (!waiting) throw new SamlRefusal('logout-unmatched', 'no logout response is awaited');
  await checkSchema(received, 'LogoutResponse');
  const sp = await findIssuer(received, (entityId) => deps.findServiceProvider(entityId));
  if (sp.entityId !== waiting.sp)
    throw new SamlRefusal('logout-unmatched', 'the logout response comes from another service provider');
  const verified = verifyRequest(received, sp, true);
  checkDestination(verified, `${deps.config.publicUrl}${SLO_PATH}`);
  checkIssueInstant(verified, deps.now());
  if (!safeEqual(verified.request.getAttribute('InResponseTo') ?? '', waiting.id))
    throw new SamlRefusal('in-response-to', 'the logout response answers another request');
  const [top, second] = statusOf(verified.request);
  const success = top === STATUS.success && second === null;
  countResponse(success ? 'logout_propagated' : 'logout_not_propagated', received.binding);
  request.log.info({ entity_id: sp.entityId, status: top, detail: second }, 'saml logout response received');
  return advance(deps, request, reply, { ...chain, partial: chain.partial || !success });
}

/**
 * GET /saml2/idp/slo/continue: on from the signed-out page; or back from an SP that never answered
 * (the browser returned here): that SP counts as not signed out and the chain goes on.
 */
export async function continueLogout(deps: LogoutDeps, request: FastifyRequest, reply: FastifyReply) {
  const chain = chainOf(deps, request);
  if (chain.waiting) request.log.info({ entity_id: chain.waiting.sp }, 'saml logout: no answer, going on');
  return advance(deps, request, reply, { ...chain, partial: chain.partial || chain.waiting !== undefined });
}

/** Where an OpenID Connect logout of a session with SAML SPs goes first: the chain, with its cookie. */
export function chainStart(deps: LogoutDeps, initiator: LogoutInitiator, targets: LogoutTarget[]) {
  const chain = boundChain(deps.keys.samlState, { initiator, queue: targets, partial: false, at: deps.now() });
  return {
    location: `${deps.config.publicUrl}${SLO_CONTINUE_PATH}`,
    cookies: [chainCookie(deps.keys.samlState, chain, secure(deps))],
  };
}
