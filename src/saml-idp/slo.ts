// SP-initiated single logout at /saml2/idp/slo (HTTP-Redirect and HTTP-POST): the LogoutRequest is
// verified like an AuthnRequest (and must be signed), the session its NameID and SessionIndex name
// is ended with the service's own session end (the OpenID Connect clients of the user's sessions
// hear it through back-channel logout), and a signed LogoutResponse goes to the SP's logout
// endpoint from its metadata. SAML SPs of the session other than the one asking are not sent
// LogoutRequests yet: when there were any, the answer says PartialLogout.
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  buildRedirectQuery,
  childElements,
  NS,
  serialize,
  signEnveloped,
  textOf,
  type Element,
} from '../saml/xml/index.ts';
import { BINDING } from '../saml/metadata/index.ts';
import { samlKeys, type ServiceProvider } from '../service-providers/index.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';
import { findUserById } from '../store/directory.ts';
import { deleteSessionSps, findSessionSp, listSessionSps } from '../store/saml-sso.ts';
import { recordAudit, userActor } from '../audit/index.ts';
import {
  checkDestination,
  checkIssueInstant,
  checkReplay,
  checkSchema,
  findIssuer,
  SamlRefusal,
  verifyRequest,
  type Received,
} from './requests.ts';
import { appendStatus, messageDocument, STATUS } from './response.ts';
import { sendPostForm } from './pages.ts';
import { countResponse } from './metrics.ts';
import { idpEntityId, type SsoDeps } from './sso.ts';
import { SLO_PATH } from './idp-metadata-document.ts';

/** Step: where the LogoutResponse goes: the SP's logout endpoint (Redirect preferred, then POST). */
export function sloEndpoint(sp: ServiceProvider): { binding: 'redirect' | 'post'; url: string } {
  const services = sp.descriptor.singleLogoutServices;
  const redirect = services.find((s) => s.binding === BINDING.redirect);
  if (redirect) return { binding: 'redirect', url: redirect.responseLocation ?? redirect.location };
  const post = services.find((s) => s.binding === BINDING.post);
  if (post) return { binding: 'post', url: post.responseLocation ?? post.location };
  throw new SamlRefusal('no-slo', 'the service provider has no logout endpoint');
}

/** Step: the NameID and SessionIndex the verified request names. */
function logoutSubject(request: Element): { nameId: string; sessionIndexes: string[] } {
  const nameIds = childElements(request, NS.assertion, 'NameID');
  if (nameIds.length !== 1) throw new SamlRefusal('name-id', 'the logout request names no subject');
  const sessionIndexes = childElements(request, NS.protocol, 'SessionIndex').map((e) => textOf(e).trim());
  return { nameId: textOf(nameIds[0]!).trim(), sessionIndexes };
}

/** The LogoutRequest pipeline, then the session's end and the answer. */
export async function logoutRequest(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply, received: Received) {
  await checkSchema(received, 'LogoutRequest');
  const sp = await findIssuer(received, (entityId) => deps.findServiceProvider(entityId));
  // Front-channel LogoutRequests must be signed (SAML profiles 4.4.4.1): anyone can send a browser here.
  const verified = verifyRequest(received, sp, true);
  checkDestination(verified, `${deps.config.publicUrl}${SLO_PATH}`);
  const now = deps.now();
  checkIssueInstant(verified, now);
  const endpoint = sloEndpoint(sp);
  const id = await checkReplay(deps.store, verified, sp, now);
  const subject = logoutSubject(verified.request);
  const rows = (
    await Promise.all(subject.sessionIndexes.map((index) => findSessionSp(deps.store.db, sp.entityId, index, now)))
  ).filter((row) => row !== undefined && row.name_id === subject.nameId);
  let status: string[] = [STATUS.success];
  if (rows.length === 0) status = [STATUS.requester, STATUS.unknownPrincipal];
  for (const row of rows) {
    const others = (await listSessionSps(deps.store.db, row!.session_uid, now)).filter(
      (o) => o.entity_id !== sp.entityId,
    );
    if (others.length > 0) status = [STATUS.success, STATUS.partialLogout];
    const user = await findUserById(deps.store.db, row!.user_id);
    await deleteSessionSps(deps.store.db, row!.session_uid);
    if (!user) continue;
    await endUserSessions(deps.store, deps.provider.current(), user.sub, deps.now);
    await recordAudit(deps.store.db, {
      action: 'saml.logout',
      actor: userActor(user, request),
      at: now,
      clientId: sp.clientId,
      eppn: user.eppn,
      orgId: user.org_id,
      sub: user.sub,
      details: { entity_id: sp.entityId, binding: received.binding, partial: others.length > 0 },
    });
  }
  countResponse(status[1] === STATUS.partialLogout ? 'partial_logout' : 'logout', received.binding);
  return sendLogoutResponse(deps, request, reply, {
    endpoint,
    inResponseTo: id,
    status,
    relayState: received.relayState,
  });
}

async function sendLogoutResponse(
  deps: SsoDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: {
    endpoint: { binding: 'redirect' | 'post'; url: string };
    inResponseTo: string;
    status: string[];
    relayState?: string;
  },
) {
  const envelope = {
    idpEntityId: idpEntityId(deps.config),
    destination: answer.endpoint.url,
    inResponseTo: answer.inResponseTo,
    now: deps.now(),
  };
  const { document, root, id } = messageDocument('LogoutResponse', envelope);
  appendStatus(document, root, answer.status);
  const key = (await samlKeys(deps.store, deps.keys, deps.now())).signing;
  if (answer.endpoint.binding === 'redirect') {
    const query = buildRedirectQuery({
      parameter: 'SAMLResponse',
      xml: serialize(document),
      relayState: answer.relayState,
      signingKey: key.privateKey,
    });
    const separator = answer.endpoint.url.includes('?') ? '&' : '?';
    return reply.code(303).header('location', `${answer.endpoint.url}${separator}${query}`).send();
  }
  const xml = signEnveloped(document, id, { privateKey: key.privateKey, certificate: key.certificate });
  return sendPostForm(request, reply, {
    url: answer.endpoint.url,
    parameter: 'SAMLResponse',
    message: Buffer.from(xml, 'utf8').toString('base64'),
    relayState: answer.relayState,
  });
}
