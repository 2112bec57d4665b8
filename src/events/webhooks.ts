// Webhooks: an organization's event receivers, registered by operators (`webhook add`). Payloads
// are signed per the Standard Webhooks convention: `webhook-id`, `webhook-timestamp` and
// `webhook-signature` (`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` with the secret
// `whsec_<base64>`); during a rotation's overlap both secrets sign, space-separated.
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Keyring } from '../crypto.ts';
import { open, seal } from '../crypto.ts';
import { badRequest, notFound } from '../errors.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { EVENT_TYPES } from '../audit/events.ts';
import type { Store } from '../store/index.ts';
import { findOrganization } from '../store/directory.ts';
import * as repo from '../store/events.ts';
import { checkTargetUrl, post, type Answer, type TargetPolicy } from './targets.ts';

const SECRET_PREFIX = 'whsec_';

export interface WebhookView {
  id: number;
  org_id: number;
  url: string;
  /** empty: every event type */
  events: string[];
  created_at: string;
  /** until when the secret before the last rotation still signs too */
  previous_secret_until: string | null;
}

function view(row: repo.WebhookRow): WebhookView {
  return {
    id: Number(row.id),
    org_id: row.org_id,
    url: row.url,
    events: row.event_types.split(' ').filter(Boolean),
    created_at: new Date(Number(row.created_at)).toISOString(),
    previous_secret_until:
      row.previous_secret_expires_at === null ? null : new Date(Number(row.previous_secret_expires_at)).toISOString(),
  };
}

/** The additional data a webhook's secret is sealed with: its row, so it cannot be moved to another. */
export const webhookSecretAad = (id: number | 'new') => `webhook-secret:${id}`;

function sealSecret(keys: Keyring, id: number | 'new', secret: string): string {
  return seal(keys.eventSecrets, Buffer.from(secret), webhookSecretAad(id));
}

function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The event types a webhook asks for: known names, comma- or space-separated; empty for all. */
export function parseEventTypes(value: string | undefined): string[] {
  const types = [...new Set((value ?? '').split(/[\s,]+/).filter(Boolean))];
  const unknown = types.filter((t) => !EVENT_TYPES.includes(t as never));
  if (unknown.length) throw badRequest(`unknown event type '${unknown[0]}' (known: ${EVENT_TYPES.join(', ')})`);
  return types;
}

export async function addWebhook(
  store: Store,
  keys: Keyring,
  policy: TargetPolicy,
  input: { orgId: number; url: string; events?: string },
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<WebhookView & { secret: string }> {
  const url = checkTargetUrl(input.url, policy, 'url');
  const eventTypes = parseEventTypes(input.events);
  const secret = newSecret();
  return store.db.transaction().execute(async (trx) => {
    if (!(await findOrganization(trx, input.orgId))) throw notFound(`organization ${input.orgId} does not exist`);
    // The secret is sealed with the webhook's id as associated data, so it cannot be moved to another row.
    const row = await repo.insertWebhook(trx, { orgId: input.orgId, url, eventTypes, secret: 'pending', at: now });
    const id = Number(row.id);
    await repo.updateWebhookSecret(trx, id, sealSecret(keys, id, secret), null);
    const details = { webhook: id, url, events: eventTypes };
    await recordAudit(trx, { action: 'webhook.add', actor, at: now, subject: String(id), orgId: input.orgId, details });
    return { ...view(row), secret };
  });
}

export async function listWebhooks(store: Store, orgId?: number): Promise<WebhookView[]> {
  return (await repo.listWebhooks(store.db, orgId)).map(view);
}

async function webhookOrFail(store: Store, id: number): Promise<repo.WebhookRow> {
  const row = await repo.findWebhook(store.db, id);
  if (!row) throw notFound(`webhook ${id} does not exist`);
  return row;
}

export async function removeWebhook(store: Store, id: number, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findWebhook(trx, id);
    if (!row || !(await repo.deleteWebhook(trx, id))) throw notFound(`webhook ${id} does not exist`);
    const details = { webhook: id, url: row.url };
    await recordAudit(trx, {
      action: 'webhook.remove',
      actor,
      at: now,
      subject: String(id),
      orgId: row.org_id,
      details,
    });
    return view(row);
  });
}

/** A new secret; the old one keeps signing beside it for `overlapMs` (receivers switch meanwhile). */
export async function rotateWebhookSecret(
  store: Store,
  keys: Keyring,
  id: number,
  overlapMs: number,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<WebhookView & { secret: string }> {
  const secret = newSecret();
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findWebhook(trx, id);
    if (!row) throw notFound(`webhook ${id} does not exist`);
    const previous = overlapMs > 0 ? { secret: row.secret, expiresAt: now + overlapMs } : null;
    await repo.updateWebhookSecret(trx, id, sealSecret(keys, id, secret), previous);
    const details = { webhook: id, overlap_seconds: Math.round(overlapMs / 1000) };
    await recordAudit(trx, {
      action: 'webhook.secret_rotate',
      actor,
      at: now,
      subject: String(id),
      orgId: row.org_id,
      details,
    });
    return { ...view((await repo.findWebhook(trx, id))!), secret };
  });
}

/** Opened secrets by their sealed form (which changes with every rotation), so each is opened once. */
const opened = new Map<string, Buffer>();

function openSecret(keys: Keyring, id: number, sealed: string): Buffer {
  const cached = opened.get(sealed);
  if (cached) return cached;
  const secret = open(keys.eventSecrets, sealed, webhookSecretAad(id));
  if (!secret) throw new Error(`webhook ${id}: its secret cannot be opened with this IDP_SECRET`);
  const key = Buffer.from(secret.toString('utf8').slice(SECRET_PREFIX.length), 'base64');
  if (opened.size >= 1000) opened.clear();
  opened.set(sealed, key);
  return key;
}

/** The signing keys in force: the current secret, and the previous one during its overlap. */
export function signingKeys(keys: Keyring, row: repo.WebhookRow, now: number): Buffer[] {
  const id = Number(row.id);
  const list = [openSecret(keys, id, row.secret)];
  if (row.previous_secret && row.previous_secret_expires_at !== null && Number(row.previous_secret_expires_at) > now)
    list.push(openSecret(keys, id, row.previous_secret));
  return list;
}

/** The Standard Webhooks headers of one message. */
export function signedHeaders(secrets: Buffer[], id: string, timestamp: number, body: string): Record<string, string> {
  const content = `${id}.${timestamp}.${body}`;
  const signatures = secrets.map((key) => `v1,${createHmac('sha256', key).update(content).digest('base64')}`);
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatures.join(' '),
  };
}

/** The payload of an event. */
export function webhookBody(event: { type: string; at: number; data: string }): string {
  return `{"type":${JSON.stringify(event.type)},"timestamp":${JSON.stringify(new Date(event.at).toISOString())},"data":${event.data}}`;
}

/** Sends one message to a webhook now. */
export function sendToWebhook(
  keys: Keyring,
  policy: TargetPolicy,
  row: repo.WebhookRow,
  message: { id: string; body: string },
  now: number,
): Promise<Answer> {
  const headers = signedHeaders(signingKeys(keys, row, now), message.id, Math.floor(now / 1000), message.body);
  return post(row.url, message.body, headers, policy);
}

/** `webhook test`: a `webhook.test` message sent at once (not stored, not retried); the receiver's answer. */
export async function testWebhook(store: Store, keys: Keyring, policy: TargetPolicy, id: number, now = Date.now()) {
  const row = await webhookOrFail(store, id);
  const body = webhookBody({
    type: 'webhook.test',
    at: now,
    data: JSON.stringify({ webhook: id, org_id: row.org_id }),
  });
  const messageId = `msg_test_${randomUUID()}`;
  try {
    const answer = await sendToWebhook(keys, policy, row, { id: messageId, body }, now);
    return { id: messageId, status: answer.status, ok: answer.status >= 200 && answer.status < 300, error: null };
  } catch (err) {
    return { id: messageId, status: null, ok: false, error: (err as Error).message };
  }
}
