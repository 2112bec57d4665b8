// OpenID Shared Signals Framework 1.0 transmitter: the configuration metadata, the stream
// management API for receivers (clients with a client-credentials token of scope ssf.manage),
// and poll delivery (RFC 8936). Push delivery (RFC 8935) is the delivery job's (delivery.ts).
// A receiver's streams hear about the users of the organizations it administers (its passkey API
// grants): all of them, or only the subjects it added.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import { badRequest, forbidden, notFound, tooManyRequests } from '../errors.ts';
import { authenticate, requireScopes, tokenNoLongerValid, type TokenVerifier } from '../http/bearer.ts';
import { recordAudit, clientActor } from '../audit/index.ts';
import { SSF_EVENT_TYPES } from '../audit/events.ts';
import type { Store } from '../store/index.ts';
import * as repo from '../store/events.ts';
import { findClient } from '../store/clients.ts';
import { findUserByEmailIn, findUserBySub, type User } from '../store/directory.ts';
import { checkTargetUrl, type TargetPolicy } from './targets.ts';
import { sealAuthorization } from './delivery.ts';
import { setForDelivery, type SetSigner } from './sets.ts';
import * as schemas from './ssf-schemas.ts';

const SCOPE = 'ssf.manage';
export const SUPPORTED_EVENTS = Object.values(SSF_EVENT_TYPES);
const STATUSES = ['enabled', 'paused', 'disabled'];
const MIN_VERIFICATION_INTERVAL = 60;
const MAX_POLL_EVENTS = 100;
const MAX_DESCRIPTION = 500;
const MAX_AUTHORIZATION = 2048;

export interface SsfOptions {
  config: Config;
  store: Store;
  keys: Keyring;
  verifier: TokenVerifier;
  policy: TargetPolicy;
  signSet: SetSigner;
  now: () => number;
}

export function ssfPaths(publicUrl: string) {
  return {
    configuration: `${publicUrl}/ssf/streams`,
    status: `${publicUrl}/ssf/status`,
    addSubject: `${publicUrl}/ssf/subjects/add`,
    removeSubject: `${publicUrl}/ssf/subjects/remove`,
    verification: `${publicUrl}/ssf/verify`,
    poll: (streamId: string) => `${publicUrl}/ssf/poll/${streamId}`,
    audience: `${publicUrl}/ssf`,
  };
}

type Body = Record<string, unknown>;

function objectBody(request: FastifyRequest): Body {
  const body = request.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw badRequest('Body must be a JSON object');
  return body as Body;
}

function streamIdOf(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) throw badRequest('stream_id is required');
  return value;
}

function eventsRequested(value: unknown): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== 'string'))
    throw badRequest('events_requested must be an array of event type URIs');
  const unknown = (value as string[]).filter((v) => !SUPPORTED_EVENTS.includes(v as never));
  if (unknown.length) throw badRequest(`events_requested: unsupported event type '${unknown[0]}'`);
  return [...new Set(value as string[])];
}

function description(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || value.length > MAX_DESCRIPTION)
    throw badRequest(`description must be a string of at most ${MAX_DESCRIPTION} characters`);
  return value;
}

interface Ctx extends SsfOptions {
  paths: ReturnType<typeof ssfPaths>;
  issuer: string;
}

/** The receiver: a verified token with scope ssf.manage, from a client that still works. */
async function receiver(c: Ctx, request: FastifyRequest): Promise<string> {
  const token = await authenticate(request, c.verifier, c.paths.audience);
  requireScopes(token, [SCOPE]);
  const client = await findClient(c.store.db, token.clientId);
  if (!client || client.disabled_at !== null)
    throw tokenNoLongerValid(request, c.verifier, 'Client is disabled or no longer exists');
  return token.clientId;
}

async function ownStream(c: Ctx, clientId: string, id: unknown): Promise<repo.StreamRow> {
  const stream = await repo.findStream(c.store.db, clientId, streamIdOf(id));
  if (!stream) throw notFound('Stream not found');
  return stream;
}

function view(c: Ctx, s: repo.StreamRow) {
  const requested = JSON.parse(s.events_requested) as string[];
  return {
    stream_id: s.id,
    iss: c.issuer,
    aud: s.client_id,
    delivery: {
      method: s.delivery_method,
      endpoint_url: s.delivery_method === repo.POLL ? c.paths.poll(s.id) : s.endpoint_url,
    },
    events_supported: SUPPORTED_EVENTS,
    events_requested: requested,
    // every requested type was checked to be supported when it was stored
    events_delivered: requested,
    min_verification_interval: MIN_VERIFICATION_INTERVAL,
    ...(s.description === null ? {} : { description: s.description }),
  };
}

/** The delivery part of a create or replace request. */
function delivery(c: Ctx, value: unknown, streamId: string) {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw badRequest('delivery must be an object with a method');
  const d = value as Body;
  if (d.method === repo.POLL) return { delivery_method: repo.POLL, endpoint_url: null, authorization_header: null };
  if (d.method !== repo.PUSH) throw badRequest(`delivery.method must be ${repo.PUSH} or ${repo.POLL}`);
  if (typeof d.endpoint_url !== 'string') throw badRequest('delivery.endpoint_url is required for push delivery');
  const endpoint = checkTargetUrl(d.endpoint_url, c.policy, 'delivery.endpoint_url');
  let authorization: string | null = null;
  if (d.authorization_header !== undefined) {
    if (typeof d.authorization_header !== 'string' || d.authorization_header.length > MAX_AUTHORIZATION)
      throw badRequest('delivery.authorization_header must be a string');
    authorization = sealAuthorization(c.keys, streamId, d.authorization_header);
  }
  return { delivery_method: repo.PUSH, endpoint_url: endpoint, authorization_header: authorization };
}

/** The audit record of a change to a stream, in the change's transaction. */
function recordStreamChange(
  c: Ctx,
  trx: Parameters<typeof recordAudit>[0],
  change: { clientId: string; request: FastifyRequest; action: 'stream.create' | 'stream.update' | 'stream.delete' },
  stream: string,
  details = {},
) {
  const { clientId, request, action } = change;
  return recordAudit(trx, {
    action,
    actor: clientActor(clientId, request),
    at: c.now(),
    clientId,
    subject: stream,
    details,
  });
}

async function create(c: Ctx, request: FastifyRequest, reply: { code(n: number): unknown }) {
  const clientId = await receiver(c, request);
  const body = objectBody(request);
  const orgs = await repo.streamOrganizations(c.store.db, clientId);
  if (orgs.length === 0) throw forbidden('Client not authorized for any organization');
  const id = randomUUID();
  const now = c.now();
  const row: repo.StreamRow = {
    id,
    client_id: clientId,
    ...delivery(c, body.delivery, id),
    events_requested: JSON.stringify(eventsRequested(body.events_requested ?? [])),
    description: description(body.description),
    status: 'enabled',
    reason: null,
    all_subjects: 1,
    created_at: now,
    updated_at: now,
    verification_requested_at: null,
  };
  await c.store.db.transaction().execute(async (trx) => {
    await repo.insertStream(trx, row);
    await recordStreamChange(c, trx, { clientId, request, action: 'stream.create' }, id, {
      method: row.delivery_method,
    });
  });
  reply.code(201);
  return view(c, row);
}

async function read(c: Ctx, request: FastifyRequest<{ Querystring: { stream_id?: string } }>) {
  const clientId = await receiver(c, request);
  if (request.query.stream_id === undefined)
    return (await repo.listStreams(c.store.db, clientId)).map((s) => view(c, s));
  return view(c, await ownStream(c, clientId, request.query.stream_id));
}

/** PATCH changes what it names; PUT replaces the receiver-supplied properties. */
async function update(c: Ctx, request: FastifyRequest, replace: boolean) {
  const clientId = await receiver(c, request);
  const body = objectBody(request);
  const stream = await ownStream(c, clientId, body.stream_id);
  const now = c.now();
  const changes: Partial<repo.StreamRow> = { updated_at: now };
  if (replace || body.events_requested !== undefined)
    changes.events_requested = JSON.stringify(eventsRequested(body.events_requested ?? []));
  if (replace || body.description !== undefined) changes.description = description(body.description);
  if (replace || body.delivery !== undefined) Object.assign(changes, delivery(c, body.delivery, stream.id));
  await c.store.db.transaction().execute(async (trx) => {
    // a new delivery method re-schedules the stream's pending deliveries, in this transaction
    await repo.updateStream(trx, stream.id, changes, now);
    await recordStreamChange(c, trx, { clientId, request, action: 'stream.update' }, stream.id);
  });
  return view(c, { ...stream, ...changes });
}

async function remove(
  c: Ctx,
  request: FastifyRequest<{ Querystring: { stream_id?: string } }>,
  reply: { code(n: number): unknown },
) {
  const clientId = await receiver(c, request);
  const stream = await ownStream(c, clientId, request.query.stream_id);
  await c.store.db.transaction().execute(async (trx) => {
    await repo.deleteStream(trx, stream.id);
    await recordStreamChange(c, trx, { clientId, request, action: 'stream.delete' }, stream.id);
  });
  reply.code(204);
  return null;
}

async function readStatus(c: Ctx, request: FastifyRequest<{ Querystring: { stream_id?: string } }>) {
  const clientId = await receiver(c, request);
  const stream = await ownStream(c, clientId, request.query.stream_id);
  return { stream_id: stream.id, status: stream.status, ...(stream.reason ? { reason: stream.reason } : {}) };
}

async function updateStatus(c: Ctx, request: FastifyRequest) {
  const clientId = await receiver(c, request);
  const body = objectBody(request);
  const stream = await ownStream(c, clientId, body.stream_id);
  if (typeof body.status !== 'string' || !STATUSES.includes(body.status))
    throw badRequest(`status must be one of ${STATUSES.join(', ')}`);
  const reason = body.reason === undefined ? null : description(body.reason);
  await c.store.db.transaction().execute(async (trx) => {
    await repo.updateStream(trx, stream.id, { status: body.status as string, reason, updated_at: c.now() });
    await recordStreamChange(c, trx, { clientId, request, action: 'stream.update' }, stream.id, {
      status: body.status,
    });
  });
  return { stream_id: stream.id, status: body.status, ...(reason ? { reason } : {}) };
}

/** The user a subject names, if it is one of the receiver's organizations; else a 400 that says no more. */
async function subjectUser(c: Ctx, clientId: string, value: unknown): Promise<User> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw badRequest('subject must be an object');
  const s = value as Body;
  const orgs = await repo.streamOrganizations(c.store.db, clientId);
  let user: User | undefined;
  if (s.format === 'iss_sub') {
    if (s.iss !== c.issuer) throw badRequest(`subject.iss must be ${c.issuer}`);
    if (typeof s.sub === 'string') user = await findUserBySub(c.store.db, s.sub);
  } else if (s.format === 'opaque') {
    if (typeof s.id === 'string') user = await findUserBySub(c.store.db, s.id);
  } else if (s.format === 'email') {
    if (typeof s.email === 'string') user = await findUserByEmailIn(c.store.db, orgs, s.email);
  } else {
    throw badRequest('subject.format must be iss_sub, email or opaque');
  }
  if (!user || !orgs.includes(user.org_id))
    throw badRequest('subject is not a user of an organization this client administers');
  return user;
}

/** Adds (or removes) a subject; from then on the stream hears only about the subjects added. */
async function changeSubject(c: Ctx, request: FastifyRequest, reply: { code(n: number): unknown }, add: boolean) {
  const clientId = await receiver(c, request);
  const body = objectBody(request);
  const stream = await ownStream(c, clientId, body.stream_id);
  const user = await subjectUser(c, clientId, body.subject);
  await c.store.db.transaction().execute(async (trx) => {
    if (add) await repo.addStreamSubject(trx, stream.id, user.sub);
    else await repo.removeStreamSubject(trx, stream.id, user.sub);
    if (stream.all_subjects === 1) await repo.updateStream(trx, stream.id, { all_subjects: 0, updated_at: c.now() });
    const details = add ? { subject_added: user.sub } : { subject_removed: user.sub };
    await recordStreamChange(c, trx, { clientId, request, action: 'stream.update' }, stream.id, details);
  });
  reply.code(add ? 200 : 204);
  return null;
}

async function verify(c: Ctx, request: FastifyRequest, reply: { code(n: number): unknown }) {
  const clientId = await receiver(c, request);
  const body = objectBody(request);
  const stream = await ownStream(c, clientId, body.stream_id);
  if (body.state !== undefined && (typeof body.state !== 'string' || body.state.length > 256))
    throw badRequest('state must be a string of at most 256 characters');
  const data = body.state === undefined ? {} : { state: body.state };
  const now = c.now();
  const interval = MIN_VERIFICATION_INTERVAL * 1000;
  const sent = await c.store.db.transaction().execute(async (trx) => {
    if (!(await repo.recordVerificationRequest(trx, stream.id, now, interval))) return false;
    await repo.insertStreamEvent(trx, stream, { at: now, type: 'ssf.verification', data });
    return true;
  });
  if (!sent) {
    // SSF 1.0 (Verification): a request inside min_verification_interval is refused with 429
    const last = (await repo.findStreamById(c.store.db, stream.id))?.verification_requested_at ?? now;
    throw tooManyRequests(
      `A verification event was requested less than ${MIN_VERIFICATION_INTERVAL} seconds ago (min_verification_interval)`,
      (Number(last) + interval - now) / 1000,
    );
  }
  reply.code(204);
  return null;
}

/** RFC 8936: acknowledges what the receiver names, then returns what is still pending. */
async function poll(c: Ctx, request: FastifyRequest<{ Params: { stream_id: string } }>) {
  const clientId = await receiver(c, request);
  const stream = await ownStream(c, clientId, request.params.stream_id);
  if (stream.delivery_method !== repo.POLL) throw badRequest('Stream does not use poll delivery');
  const body = request.body === undefined || request.body === null ? {} : objectBody(request);
  const ids = (value: unknown) =>
    (Array.isArray(value) ? value : [])
      .map((jti) => (typeof jti === 'string' ? /^set-(\d{1,15})$/.exec(jti)?.[1] : undefined))
      .filter((id): id is string => id !== undefined)
      .map(Number);
  if (body.ack !== undefined && !Array.isArray(body.ack)) throw badRequest('ack must be an array of jti values');
  const errs = body.setErrs ?? {};
  if (errs === null || typeof errs !== 'object' || Array.isArray(errs)) throw badRequest('setErrs must be an object');
  const max = body.maxEvents === undefined ? MAX_POLL_EVENTS : body.maxEvents;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 0)
    throw badRequest('maxEvents must be a non-negative integer');
  const now = c.now();
  await c.store.db.transaction().execute(async (trx) => {
    await repo.settleStreamDeliveries(trx, stream.id, ids(body.ack), 'delivered', now);
    for (const [jti, err] of Object.entries(errs as Body)) {
      const error = JSON.stringify(err).slice(0, 500);
      await repo.settleStreamDeliveries(trx, stream.id, ids([jti]), 'dead', now, error);
    }
  });
  const limit = Math.min(max, MAX_POLL_EVENTS);
  const pending = limit === 0 ? [] : await repo.pendingForStream(c.store.db, stream.id, limit + 1);
  const sets: Record<string, string> = {};
  for (const d of pending.slice(0, limit)) {
    const set = await setForDelivery(c.signSet, c.issuer, stream, { ...d, at: Number(d.at) }, now);
    if (set) sets[set.jti] = set.token;
  }
  return { sets, moreAvailable: pending.length > limit };
}

function metadata(c: Ctx) {
  return {
    spec_version: '1_0',
    issuer: c.issuer,
    jwks_uri: `${c.issuer}/openid/jwks`,
    delivery_methods_supported: [repo.PUSH, repo.POLL],
    configuration_endpoint: c.paths.configuration,
    status_endpoint: c.paths.status,
    add_subject_endpoint: c.paths.addSubject,
    remove_subject_endpoint: c.paths.removeSubject,
    verification_endpoint: c.paths.verification,
    critical_subject_members: ['sub_id'],
    authorization_schemes: [{ spec_urn: 'urn:ietf:rfc:6749' }],
    default_subjects: 'ALL',
  };
}

export function ssfRoutes(o: SsfOptions) {
  const c: Ctx = { ...o, paths: ssfPaths(o.config.publicUrl), issuer: o.config.publicUrl };
  return async function ssf(app: FastifyInstance) {
    app.get('/.well-known/ssf-configuration', { schema: schemas.metadata }, () => metadata(c));
    app.post('/ssf/streams', { schema: schemas.createStream }, (request, reply) => create(c, request as never, reply));
    app.get('/ssf/streams', { schema: schemas.readStream }, (request) => read(c, request as never));
    app.patch('/ssf/streams', { schema: schemas.updateStream }, (request) => update(c, request, false));
    app.put('/ssf/streams', { schema: schemas.replaceStream }, (request) => update(c, request, true));
    app.delete('/ssf/streams', { schema: schemas.deleteStream }, (request, reply) =>
      remove(c, request as never, reply),
    );
    app.get('/ssf/status', { schema: schemas.readStatus }, (request) => readStatus(c, request as never));
    app.post('/ssf/status', { schema: schemas.updateStatus }, (request) => updateStatus(c, request as never));
    app.post('/ssf/subjects/add', { schema: schemas.addSubject }, (request, reply) =>
      changeSubject(c, request, reply, true),
    );
    app.post('/ssf/subjects/remove', { schema: schemas.removeSubject }, (request, reply) =>
      changeSubject(c, request, reply, false),
    );
    app.post('/ssf/verify', { schema: schemas.verify }, (request, reply) => verify(c, request as never, reply));
    app.post('/ssf/poll/:stream_id', { schema: schemas.poll }, (request) => poll(c, request as never));
  };
}
