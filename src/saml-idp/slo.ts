// Single logout at /saml2/idp/slo (HTTP-Redirect and HTTP-POST). An SP's LogoutRequest is verified
// like an AuthnRequest (and must be signed); the session its NameID and SessionIndex name is ended
// with the service's own session end (the OpenID Connect clients hear it through back-channel
// logout), then the logout is propagated over the front channel (logout-propagation.ts): the
// session's OpenID Connect clients with a front-channel logout URI, each other SAML SP of the
// session a signed LogoutRequest in turn, and at the end the asking SP its signed LogoutResponse,
// PartialLogout when an SP could not be signed out.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { childElements, NS, textOf, type Element } from '../saml/xml/index.ts';
import type { ServiceProvider } from '../service-providers/index.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';
import { frontchannelFrames } from '../oauth/frontchannel-logout.ts';
import { findUserById } from '../store/directory.ts';
import { deleteSessionSps, findSessionSp, listSessionSps, type SessionSp } from '../store/saml-sso.ts';
import { recordAudit, type Actor } from '../audit/index.ts';
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
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
import { STATUS } from './response.ts';
import type { SsoDeps } from './sso.ts';
import { SLO_PATH } from './idp-metadata-document.ts';
import {
  chainStart,
  sloEndpoint,
  startPropagation,
  sendLogoutResponse,
  type LogoutDeps,
} from './logout-propagation.ts';
import type { SessionLogoutHook } from '../oauth/frontchannel-logout.ts';
import type { LogoutInitiator, LogoutTarget } from './logout-chain.ts';
import { countResponse } from './metrics.ts';

/** Step: the NameID and SessionIndex the verified request names. */
function logoutSubject(request: Element): { nameId: string; sessionIndexes: string[] } {
  const nameIds = childElements(request, NS.assertion, 'NameID');
  if (nameIds.length !== 1) throw new SamlRefusal('name-id', 'the logout request names no subject');
  const sessionIndexes = childElements(request, NS.protocol, 'SessionIndex').map((e) => textOf(e).trim());
  return { nameId: textOf(nameIds[0]!).trim(), sessionIndexes };
}

/** Step: the sessions of the SP the request names (its NameID and one of its SessionIndexes). */
async function sessionsNamed(deps: SsoDeps, sp: ServiceProvider, subject: ReturnType<typeof logoutSubject>) {
  const now = deps.now();
  const rows = await Promise.all(
    subject.sessionIndexes.map((index) => findSessionSp(deps.store.db, sp.entityId, index, now)),
  );
  const found = new Map<string, SessionSp>();
  for (const row of rows) if (row && row.name_id === subject.nameId) found.set(row.session_uid, row);
  return [...found.values()];
}

/** What ending a session leaves to the front channel: the other SAML SPs, the OIDC front-channel URIs. */
interface Ended {
  targets: LogoutTarget[];
  frames: string[];
}

/**
 * Ends one session that SAML SPs were signed in to: the user's sessions, grants and tokens, the
 * session's record of SPs, and an audit record `saml.logout` for each of those SPs, all in one
 * transaction. Returns the SPs other than `initiator` (the one asking, if an SP) to be told.
 */
export async function endSamlSession(
  deps: LogoutDeps & { provider?: SsoDeps['provider'] },
  sessionUid: string,
  actorOf: (user: { eppn: string }) => Actor,
  initiator: { entityId?: string; binding?: string },
): Promise<Ended> {
  const now = deps.now();
  const sps = await listSessionSps(deps.store.db, sessionUid, now);
  if (sps.length === 0) return { targets: [], frames: [] };
  const userId = sps[0]?.user_id;
  const user = userId === undefined ? undefined : await findUserById(deps.store.db, userId);
  const clients = new Map(
    await Promise.all(
      sps.map(async (row) => [row.entity_id, (await deps.findServiceProvider(row.entity_id))?.clientId] as const),
    ),
  );
  const within = async (trx: Transaction<DB>) => {
    await deleteSessionSps(trx, sessionUid);
    if (!user) return;
    for (const row of sps) {
      await recordAudit(trx, {
        action: 'saml.logout',
        actor: actorOf(user),
        at: now,
        clientId: clients.get(row.entity_id) ?? null,
        eppn: user.eppn,
        orgId: user.org_id,
        sub: user.sub,
        details: {
          entity_id: row.entity_id,
          initiated_by: initiator.entityId ?? 'openid',
          ...(row.entity_id === initiator.entityId ? { binding: initiator.binding } : {}),
        },
      });
    }
  };
  let frames: string[] = [];
  if (user && deps.provider) {
    const { ended } = await endUserSessions(deps.store, deps.provider.current(), user.sub, deps.now, within);
    const session = ended.find((s) => s.uid === sessionUid);
    frames = await frontchannelFrames(deps.store, deps.config.publicUrl, session?.authorizations);
  } else {
    await deps.store.db.transaction().execute(within);
  }
  const targets = sps
    .filter((row) => row.entity_id !== initiator.entityId)
    .map((row) => ({
      sp: row.entity_id,
      nameId: row.name_id,
      format: row.name_id_format,
      sessionIndex: row.session_index,
    }));
  return { targets, frames };
}

/**
 * An OpenID Connect logout (/openid/endsession) ended a browser session: the SAML SPs it signed in
 * to are sent LogoutRequests the same way before the browser continues to where that logout goes.
 * The authorization server has ended the session itself; this ends the session's SAML records.
 */
export function samlSessionLogout(deps: LogoutDeps): SessionLogoutHook {
  return async (session, continueTo) => {
    const { targets } = await endSamlSession(
      deps,
      session.uid,
      (user) => ({ type: 'user', id: user.eppn, requestId: session.requestId, ip: session.ip }),
      {},
    );
    return targets.length === 0 ? undefined : chainStart(deps, { kind: 'oidc', continueTo }, targets);
  };
}

/** The LogoutRequest pipeline, then the session's end and its propagation. */
export async function logoutRequest(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply, received: Received) {
  await checkSchema(received, 'LogoutRequest');
  const sp = await findIssuer(received, (entityId) => deps.findServiceProvider(entityId));
  // Front-channel LogoutRequests must be signed (SAML profiles 4.4.4.1): anyone can send a browser here.
  const verified = verifyRequest(received, sp, true);
  checkDestination(verified, `${deps.config.publicUrl}${SLO_PATH}`);
  const now = deps.now();
  checkIssueInstant(verified, now);
  const endpoint = sloEndpoint(sp, 'response');
  const id = await checkReplay(deps.store, verified, sp, now);
  const sessions = await sessionsNamed(deps, sp, logoutSubject(verified.request));
  if (sessions.length === 0) {
    countResponse('logout', received.binding);
    return sendLogoutResponse(deps, request, reply, {
      endpoint,
      inResponseTo: id,
      status: [STATUS.requester, STATUS.unknownPrincipal],
      relayState: received.relayState,
    });
  }
  const ended: Ended = { targets: [], frames: [] };
  for (const session of sessions) {
    const { targets, frames } = await endSamlSession(
      deps,
      session.session_uid,
      (user) => ({ type: 'user', id: user.eppn, requestId: request.id, ip: request.ip }),
      { entityId: sp.entityId, binding: received.binding },
    );
    ended.targets.push(...targets);
    ended.frames.push(...frames);
  }
  request.log.info(
    { entity_id: sp.entityId, binding: received.binding, others: ended.targets.length },
    'saml logout request accepted',
  );
  const initiator: LogoutInitiator = {
    kind: 'saml',
    sp: sp.entityId,
    id,
    binding: received.binding,
    ...(received.relayState === undefined ? {} : { relayState: received.relayState }),
  };
  return startPropagation(deps, request, reply, { initiator, targets: ended.targets, frames: ended.frames });
}
