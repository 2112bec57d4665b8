// Single sign-on: a verified AuthnRequest (or an IdP-initiated request) is answered from the
// browser's session when it already covers the SP (fast path), and otherwise goes through the
// service's own sign-in: an authorization request (response_type=none) for the SP's paired client,
// which signs the user in, asks for consent and records the authorization in the session; back at
// /saml2/idp/continue the Response is built from that session, as the fast path does.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KoaContextWithOIDC } from 'oidc-provider';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { ROUTES } from '../oauth/provider.ts';
import { ACR_VALUES } from '../oauth/authentication-context.ts';
import { releasedGroups } from '../directory/attribute-release.ts';
import { findUserBySub, type User, type UserAccount } from '../store/directory.ts';
import { recordSessionSp } from '../store/saml-sso.ts';
import { recordAudit, userActor } from '../audit/index.ts';
import {
  ensureServiceProviderClient,
  samlKeys,
  SAML_CONTINUE_PATH,
  type ServiceProvider,
} from '../service-providers/index.ts';
import { openPending, sealPending, type Pending } from './pending.ts';
import { finishResponse, statusResponse, STATUS, successResponse, type Envelope } from './response.ts';
import { nameIdFor, releasedAttributes, nameIdFormatAccepted, targetedIdAttribute } from './subject.ts';
import { sendPostForm } from './pages.ts';
import { countResponse, type Outcome } from './metrics.ts';
import { SamlRefusal } from './requests.ts';
import { SESSION_TTL } from '../oauth/provider.ts';
import { accountDisabled } from '../directory/account-state.ts';

export interface SsoDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  provider: ProviderHolder;
  now: () => number;
  findServiceProvider(entityId: string): Promise<ServiceProvider | undefined>;
}

export const idpEntityId = (config: Config) => `${config.publicUrl}/saml2/idp/metadata`;

interface BrowserSession {
  uid: string;
  accountId?: string;
  acr?: string;
  amr?: string[];
  loginTs?: number;
  authorizations?: Record<string, { sid?: string; grantId?: string }>;
}

/** oidc-provider's session of this browser (the one cookie both protocols share). */
async function browserSession(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply): Promise<BrowserSession> {
  const publicUrl = new URL(deps.config.publicUrl);
  request.raw.headers['x-forwarded-proto'] = publicUrl.protocol.replace(':', '');
  request.raw.headers['x-forwarded-host'] = publicUrl.host;
  const provider = deps.provider.current();
  const ctx: KoaContextWithOIDC = provider.createContext(request.raw, reply.raw) as KoaContextWithOIDC;
  const session = (await provider.Session.get(ctx)) as unknown as BrowserSession;
  const raw = reply.raw.getHeader('set-cookie');
  if (raw !== undefined) {
    reply.raw.removeHeader('set-cookie');
    for (const value of Array.isArray(raw) ? raw : [String(raw)]) reply.header('set-cookie', value);
  }
  return session;
}

/** What the sign-in proved, from the session (fast path) or the ID token (after the sign-in). */
interface SignIn {
  sub: string;
  acr: string;
  authTime: number;
  sid: string;
  sessionUid: string;
  scopes: string[];
  /** the user, when the sign-in was read with them (the fast path reads them to check the account) */
  user?: UserAccount;
}

/** The classes of ours an exact RequestedAuthnContext names; others cannot be met. */
export function exactClasses(acrs: string[]): { ours: string[]; unknown: boolean } {
  const ours = acrs.filter((a) => (ACR_VALUES as readonly string[]).includes(a));
  return { ours, unknown: ours.length < acrs.length && ours.length === 0 };
}

/** The session's sign-in to this SP's client, when it has one and the grant still covers the SP's groups. */
async function sessionGrant(deps: SsoDeps, session: BrowserSession, sp: ServiceProvider) {
  const auth = session.accountId ? session.authorizations?.[sp.clientId] : undefined;
  if (!auth?.grantId || !auth.sid) return undefined;
  const grant = await deps.provider.current().Grant.find(auth.grantId);
  if (!grant || grant.accountId !== session.accountId || grant.clientId !== sp.clientId) return undefined;
  const scopes = (grant.getOIDCScope() ?? '').split(' ').filter(Boolean);
  // groups added to the SP since the user agreed need their agreement first
  if (!sp.groups.every((g) => scopes.includes(g))) return undefined;
  const signIn: SignIn = {
    sub: session.accountId!,
    acr: session.acr ?? '',
    authTime: (session.loginTs ?? 0) * 1000,
    sid: auth.sid,
    sessionUid: session.uid,
    scopes,
  };
  return signIn;
}

/** The fast path: the session already signed the user in to this SP's client, as the request asks. */
async function sessionSignIn(deps: SsoDeps, session: BrowserSession, sp: ServiceProvider, pending: Pending) {
  if (pending.force) return undefined;
  if (pending.acrs.length > 0 && !pending.acrs.includes(session.acr ?? '')) return undefined;
  const signIn = await sessionGrant(deps, session, sp);
  if (!signIn) return undefined;
  // The session of a user who may no longer sign in (their organization disabled since) is no
  // sign-in: on to the sign-in pages, which say why.
  const user = await findUserBySub(deps.store.db, signIn.sub);
  return user && !accountDisabled(user) ? { ...signIn, user } : undefined;
}

/**
 * Answers a verified request: at once from the session when it covers the SP, a NoPassive status
 * when passive and there is no session, otherwise through the sign-in pages.
 */
export async function answer(
  deps: SsoDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  sp: ServiceProvider,
  pending: Pending,
) {
  if (!nameIdFormatAccepted(sp, pending.nameIdFormat)) {
    return sendStatus(
      deps,
      request,
      reply,
      sp,
      pending,
      [STATUS.requester, STATUS.invalidNameIdPolicy],
      'invalid_nameid_policy',
    );
  }
  if (exactClasses(pending.acrs).unknown) {
    return sendStatus(deps, request, reply, sp, pending, [STATUS.responder, STATUS.noAuthnContext], 'no_authn_context');
  }
  const session = await browserSession(deps, request, reply);
  const signIn = await sessionSignIn(deps, session, sp, pending);
  if (signIn) return sendAssertion(deps, request, reply, sp, pending, signIn);
  if (pending.passive && !session.accountId) {
    return sendStatus(deps, request, reply, sp, pending, [STATUS.responder, STATUS.noPassive], 'no_passive');
  }
  await ensureServiceProviderClient(deps.store, sp);
  return reply
    .code(303)
    .header('location', authorizationUrl(deps, sp, pending))
    .send();
}

function authorizationUrl(deps: SsoDeps, sp: ServiceProvider, pending: Pending): string {
  // response_type=none: the sign-in's result is the session itself, read at /saml2/idp/continue;
  // no code or token is issued for an SP's client.
  const params = new URLSearchParams({
    client_id: sp.clientId,
    response_type: 'none',
    scope: ['openid', ...sp.groups].join(' '),
    redirect_uri: `${deps.config.publicUrl}${SAML_CONTINUE_PATH}`,
    state: sealPending(deps.keys.samlState, pending),
  });
  if (pending.force) params.set('prompt', 'login');
  else if (pending.passive) params.set('prompt', 'none');
  // the sign-in pages step up for acr_values as they do for an OpenID Connect client
  const { ours } = exactClasses(pending.acrs);
  if (ours.length) params.set('acr_values', ours.join(' '));
  return `${ROUTES.authorization}?${params.toString()}`;
}

/** The authorization server's error, as the SAML status the SP understands. */
function statusForError(error: string, pending: Pending): { codes: string[]; outcome: Outcome } {
  if (['login_required', 'interaction_required', 'consent_required', 'account_selection_required'].includes(error)) {
    if (pending.passive) return { codes: [STATUS.responder, STATUS.noPassive], outcome: 'no_passive' };
  }
  if (error === 'unmet_authentication_requirements')
    return { codes: [STATUS.responder, STATUS.noAuthnContext], outcome: 'no_authn_context' };
  return { codes: [STATUS.responder, STATUS.requestDenied], outcome: 'request_denied' };
}

/** GET /saml2/idp/continue: back from the sign-in with a code (or an error) and the sealed request. */
export async function continueSignIn(deps: SsoDeps, request: FastifyRequest, reply: FastifyReply) {
  const query = request.query as Record<string, unknown>;
  const pending = openPending(deps.keys.samlState, query.state, deps.now());
  if (!pending) throw new SamlRefusal('state', 'the sign-in could not be matched to a request');
  const sp = await deps.findServiceProvider(pending.sp);
  if (!sp || sp.disabled)
    throw new SamlRefusal('unknown-sp', 'the service provider is not known to this identity provider', 403);
  if (typeof query.error === 'string') {
    const { codes, outcome } = statusForError(query.error, pending);
    return sendStatus(deps, request, reply, sp, pending, codes, outcome);
  }
  // The authorization request ended in the session: it now holds this SP's client, signed in as asked.
  const session = await browserSession(deps, request, reply);
  const signIn = await sessionGrant(deps, session, sp);
  if (!signIn) throw new SamlRefusal('session', 'the sign-in is not this browser’s');
  // ForceAuthn: the sign-in happened after the request (login times are whole seconds)
  if (pending.force && signIn.authTime < Math.floor(pending.at / 1000) * 1000)
    throw new SamlRefusal('session', 'the sign-in the request asked for did not happen');
  if (pending.acrs.length > 0 && !pending.acrs.includes(signIn.acr)) {
    return sendStatus(deps, request, reply, sp, pending, [STATUS.responder, STATUS.noAuthnContext], 'no_authn_context');
  }
  return sendAssertion(deps, request, reply, sp, pending, signIn);
}

function envelope(deps: SsoDeps, pending: Pending): Envelope {
  return {
    idpEntityId: idpEntityId(deps.config),
    destination: pending.acs,
    inResponseTo: pending.id ?? undefined,
    now: deps.now(),
  };
}

async function deliver(
  deps: SsoDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  sp: ServiceProvider,
  pending: Pending,
  built: Parameters<typeof finishResponse>[0],
) {
  const keys = await samlKeys(deps.store, deps.keys, deps.now());
  const xml = await finishResponse(built, sp, keys.signing);
  return sendPostForm(request, reply, {
    url: pending.acs,
    parameter: 'SAMLResponse',
    message: Buffer.from(xml, 'utf8').toString('base64'),
    relayState: pending.relayState,
  });
}

/** A Response with a status and no assertion, to the verified ACS only. */
async function sendStatus(
  deps: SsoDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  sp: ServiceProvider,
  pending: Pending,
  codes: string[],
  outcome: Outcome,
) {
  countResponse(outcome, pending.binding);
  request.log.info({ entity_id: sp.entityId, outcome }, 'saml sso answered with a status');
  return deliver(deps, request, reply, sp, pending, statusResponse(envelope(deps, pending), codes));
}

/** The assertion: the user, what the SP's groups release, how and when they signed in. */
async function sendAssertion(
  deps: SsoDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  sp: ServiceProvider,
  pending: Pending,
  signIn: SignIn,
) {
  const user = signIn.user ?? (await findUserBySub(deps.store.db, signIn.sub));
  if (!user || accountDisabled(user)) throw new SamlRefusal('user', 'the account cannot sign in', 403);
  const now = deps.now();
  const nameId = await nameIdFor(deps.store, sp, user, now);
  const groups = releasedGroups(sp.groups, signIn.scopes);
  const targetedId = await targetedIdAttribute(deps.store, sp, groups, user, nameId, idpEntityId(deps.config), now);
  const built = successResponse(envelope(deps, pending), {
    audience: sp.entityId,
    nameId,
    authnInstant: signIn.authTime,
    sessionIndex: signIn.sid,
    classRef: signIn.acr,
    attributes: releasedAttributes(sp, groups, user, deps.keys.samlPairwise, targetedId),
  });
  await recordSso(deps, request, sp, pending, user, signIn, nameId, now);
  countResponse('success', pending.binding);
  return deliver(deps, request, reply, sp, pending, built);
}

async function recordSso(
  deps: SsoDeps,
  request: FastifyRequest,
  sp: ServiceProvider,
  pending: Pending,
  user: User,
  signIn: SignIn,
  nameId: Awaited<ReturnType<typeof nameIdFor>>,
  now: number,
): Promise<void> {
  await deps.store.db.transaction().execute(async (trx) => {
    await recordSessionSp(trx, {
      session_uid: signIn.sessionUid,
      entity_id: sp.entityId,
      user_id: user.id,
      name_id: nameId?.value ?? '',
      name_id_format: nameId?.format ?? '',
      session_index: signIn.sid,
      created_at: now,
      expires_at: now + SESSION_TTL * 1000,
    });
    await recordAudit(trx, {
      action: 'saml.sso',
      actor: userActor(user, request),
      at: now,
      clientId: sp.clientId,
      eppn: user.eppn,
      orgId: user.org_id,
      sub: user.sub,
      details: {
        entity_id: sp.entityId,
        binding: pending.binding,
        acr: signIn.acr,
        nameid_format: nameId?.format ?? null,
      },
    });
  });
}
