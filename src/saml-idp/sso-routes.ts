// The single sign-on routes, each a pipeline of named steps:
//   GET  /saml2/idp/sso          receiveRedirect -> checkSchema -> findIssuer -> verifyRequest ->
//                                checkDestination -> checkIssueInstant ->
//                                resolveAcs -> checkReplay -> readAuthnRequest -> answer
//   POST /saml2/idp/sso          receivePost -> (the same)
//   GET  /saml2/idp/continue     openPending -> redeem -> verifyIdToken -> sendAssertion (sso.ts)
//   GET  /saml2/idp/unsolicited  findAllowedSp -> defaultAcs -> answer
//   GET|POST /saml2/idp/slo      a LogoutRequest: receive -> checkSchema -> findIssuer -> verifyRequest
//                                (signed) -> checkDestination -> checkIssueInstant -> sloEndpoint ->
//                                checkReplay -> end the session -> propagate (slo.ts)
//                                a LogoutResponse: chainOf -> checkSchema -> findIssuer (the awaited SP)
//                                -> verifyRequest (signed) -> checkDestination -> checkIssueInstant ->
//                                InResponseTo -> next SP, or the end (logout-propagation.ts)
//   GET  /saml2/idp/slo/continue chainOf -> next SP, or the end
// Every refusal before the SP's return address is verified is the error page with the request id.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { childElements, NS, textOf, XmlSecurityError, type Element } from '../saml/xml/index.ts';
import {
  checkDestination,
  checkIssueInstant,
  checkReplay,
  checkSchema,
  findIssuer,
  receivePost,
  receiveRedirect,
  resolveAcs,
  SamlRefusal,
  verifyRequest,
  type Binding,
  type Received,
} from './requests.ts';
import { answer, continueSignIn, type SsoDeps } from './sso.ts';
import { sendRefusal, POST_SCRIPT, POST_SCRIPT_PATH } from './pages.ts';
import { countResponse } from './metrics.ts';
import type { Pending } from './pending.ts';
import { SAML_CONTINUE_PATH, type ServiceProvider } from '../service-providers/index.ts';
import { SLO_PATH, SSO_PATH } from './idp-metadata-document.ts';
import { logoutRequest } from './slo.ts';
import { continueLogout, logoutResponse, SLO_CONTINUE_PATH } from './logout-propagation.ts';

export const UNSOLICITED_PATH = '/saml2/idp/unsolicited';

/** Step: what the verified AuthnRequest asks of the sign-in. */
export function readAuthnRequest(
  request: Element,
  sp: ServiceProvider,
  acs: string,
  received: Received,
  id: string | null,
): Pending {
  const policy = childElements(request, NS.protocol, 'NameIDPolicy')[0];
  const context = childElements(request, NS.protocol, 'RequestedAuthnContext')[0];
  const comparison = context?.getAttribute('Comparison') || 'exact';
  if (context && comparison !== 'exact')
    throw new SamlRefusal('authn-context', 'only exact comparison of authentication contexts is offered');
  const acrs = context ? childElements(context, NS.assertion, 'AuthnContextClassRef').map((e) => textOf(e).trim()) : [];
  return {
    sp: sp.entityId,
    id,
    acs,
    relayState: received.relayState,
    force: request.getAttribute('ForceAuthn') === 'true' || request.getAttribute('ForceAuthn') === '1',
    passive: request.getAttribute('IsPassive') === 'true' || request.getAttribute('IsPassive') === '1',
    acrs,
    nameIdFormat: policy?.getAttribute('Format') || null,
    binding: received.binding,
    at: Date.now(),
  };
}

/** The pipeline both bindings share once the message is decoded. */
async function authnRequest(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply, received: Received) {
  const endpoint = `${deps.config.publicUrl}${SSO_PATH}`;
  await checkSchema(received, 'AuthnRequest');
  const sp = await findIssuer(received, (entityId) => deps.findServiceProvider(entityId));
  const verified = verifyRequest(received, sp, false);
  checkDestination(verified, endpoint);
  const now = deps.now();
  checkIssueInstant(verified, now);
  const acs = resolveAcs(verified.request, sp);
  const id = await checkReplay(deps.store, verified, sp, now);
  const pending = { ...readAuthnRequest(verified.request, sp, acs, received, id), at: now };
  request.log.info(
    { entity_id: sp.entityId, binding: received.binding, signed: verified.signed },
    'saml authn request accepted',
  );
  return answer(deps, request, reply, sp, pending);
}

/** Refusals of the protocol and of the XML layer become the error page; anything else is the error handler's. */
async function refusing(
  request: FastifyRequest,
  reply: FastifyReply,
  binding: Binding | 'unsolicited',
  run: () => Promise<unknown>,
) {
  try {
    return await run();
  } catch (err) {
    if (!(err instanceof SamlRefusal) && !(err instanceof XmlSecurityError)) throw err;
    const detail = err instanceof XmlSecurityError ? err.detail : undefined;
    request.log.warn({ reason: err.reason, message: err.message, detail }, 'saml request refused');
    countResponse('refused', binding);
    return sendRefusal(request, reply, err.status === 403 ? 403 : 400);
  }
}

/** The raw query string, exactly as received: the Redirect binding's signature covers its octets. */
const rawQuery = (request: FastifyRequest) => {
  const at = request.url.indexOf('?');
  return at === -1 ? '' : request.url.slice(at + 1);
};

export function registerSsoRoutes(app: FastifyInstance, deps: SsoDeps): void {
  app.get(SSO_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'redirect', () => authnRequest(deps, request, reply, receiveRedirect(rawQuery(request)))),
  );
  app.post(SSO_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'post', () => authnRequest(deps, request, reply, receivePost(request.body))),
  );
  app.get(SAML_CONTINUE_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'redirect', () => continueSignIn(deps, request, reply)),
  );
  app.get(UNSOLICITED_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'unsolicited', () => unsolicited(deps, request, reply)),
  );
  app.get(SLO_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'redirect', () => {
      const query = rawQuery(request);
      return /(^|&)SAMLResponse=/.test(query)
        ? logoutResponse(deps, request, reply, receiveRedirect(query, 'SAMLResponse'))
        : logoutRequest(deps, request, reply, receiveRedirect(query));
    }),
  );
  app.post(SLO_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'post', () => {
      const form = (request.body ?? {}) as Record<string, unknown>;
      return form.SAMLResponse !== undefined
        ? logoutResponse(deps, request, reply, receivePost(form, 'SAMLResponse'))
        : logoutRequest(deps, request, reply, receivePost(form));
    }),
  );
  app.get(SLO_CONTINUE_PATH, { schema: { hide: true } }, (request, reply) =>
    refusing(request, reply, 'redirect', () => continueLogout(deps, request, reply)),
  );
  app.get(POST_SCRIPT_PATH, { schema: { hide: true } }, (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').type('text/javascript; charset=utf-8').send(POST_SCRIPT),
  );
}

/** IdP-initiated SSO: only for an SP registered with allow-unsolicited; its default ACS. */
async function unsolicited(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply) {
  const query = request.query as Record<string, unknown>;
  const providerId = query.providerId;
  const target = query.target;
  if (typeof providerId !== 'string' || providerId.length > 1024)
    throw new SamlRefusal('unknown-sp', 'no service provider named', 400);
  if (target !== undefined && (typeof target !== 'string' || target.length > 320))
    throw new SamlRefusal('relay-state', 'the target is too long');
  const sp = await deps.findServiceProvider(providerId);
  if (!sp) throw new SamlRefusal('unknown-sp', 'the service provider is not known to this identity provider', 403);
  if (sp.disabled) throw new SamlRefusal('disabled-sp', 'the service provider is disabled', 403);
  if (!sp.allowUnsolicited)
    throw new SamlRefusal('unsolicited', 'the service provider does not accept unsolicited responses', 403);
  const pending: Pending = {
    sp: sp.entityId,
    id: null,
    acs: resolveAcs(undefined, sp),
    ...(typeof target === 'string' ? { relayState: target } : {}),
    force: false,
    passive: false,
    acrs: [],
    nameIdFormat: null,
    binding: 'unsolicited',
    at: deps.now(),
  };
  return answer(deps, request, reply, sp, pending);
}
