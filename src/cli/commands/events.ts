// `webhook add|list|remove|test|rotate-secret`: an organization's event receivers; `events
// list|show|replay`: the deliveries of the outbox, to webhooks and Shared Signals streams.
import { badRequest, notFound } from '../../errors.ts';
import { EVENT_TYPES } from '../../audit/events.ts';
import * as webhooks from '../../events/webhooks.ts';
import { targetPolicy } from '../../events/targets.ts';
import {
  advanceOutboxIds,
  findDelivery,
  listDeliveries,
  replayDelivery,
  restoreIdFloor,
  type DeliveryView,
} from '../../store/events.ts';
import { iso } from '../../time.ts';
import {
  by,
  durationOption,
  intOption,
  optional,
  required,
  table,
  type ArgumentDef,
  type CommandDef,
} from '../command.ts';

const WEBHOOK_ID: ArgumentDef[] = [{ name: 'id', description: 'the webhook id (webhook list)' }];
const DELIVERY_ID: ArgumentDef[] = [{ name: 'id', description: 'the delivery id (events list)' }];
const STATES = ['pending', 'delivered', 'dead'];

function webhookId(value: string | undefined): number {
  if (value === undefined) throw badRequest('webhook id is required');
  return intOption(value, 'id');
}

function deliveryView(d: DeliveryView) {
  return {
    id: Number(d.id),
    event_id: Number(d.event_id),
    type: d.type,
    at: iso(Number(d.at)),
    destination: d.destination,
    subject: d.subject,
    state: d.state,
    attempts: d.attempts,
    next_attempt_at: d.next_attempt_at === null ? null : iso(Number(d.next_attempt_at)),
    last_attempt_at: d.last_attempt_at === null ? null : iso(Number(d.last_attempt_at)),
    last_status: d.last_status,
    last_error: d.last_error,
    delivered_at: d.delivered_at === null ? null : iso(Number(d.delivered_at)),
  };
}

export const eventsCommands: CommandDef[] = [
  {
    group: 'webhook',
    name: 'add',
    summary: "register an organization's webhook; prints its signing secret once (Standard Webhooks, docs/events.md)",
    options: {
      org: { type: 'string', value: '<org_id>', required: true, description: 'the organization whose events it gets' },
      url: {
        type: 'string',
        value: '<url>',
        required: true,
        description: 'https receiver URL (http only to loopback while PUBLIC_URL is on localhost)',
      },
      events: {
        type: 'string',
        value: '<type,...>',
        description: `only these event types (default: all): ${EVENT_TYPES.join(', ')}`,
      },
    },
    async run(ctx, v) {
      const created = await webhooks.addWebhook(
        ctx.store,
        ctx.keys,
        targetPolicy(ctx.config),
        { orgId: intOption(required(v, 'org'), 'org'), url: required(v, 'url'), events: optional(v, 'events') },
        by(ctx),
      );
      return ctx.json
        ? created
        : `webhook ${created.id} for organization ${created.org_id}: ${created.url}\nsigning secret (shown once): ${created.secret}`;
    },
  },
  {
    group: 'webhook',
    name: 'list',
    summary: 'the webhooks, of one organization or all (secrets are never shown again)',
    options: { org: { type: 'string', value: '<org_id>', description: 'only this organization' } },
    async run(ctx, v) {
      const list = await webhooks.listWebhooks(
        ctx.store,
        v.org === undefined ? undefined : intOption(required(v, 'org'), 'org'),
      );
      if (ctx.json) return list;
      return table(
        list.map((w) => ({ ...w, events: w.events.length ? w.events.join(',') : 'all' })),
        ['id', 'org_id', 'url', 'events', 'created_at'],
      );
    },
  },
  {
    group: 'webhook',
    name: 'remove',
    summary: 'remove a webhook; its undelivered events are dropped',
    args: WEBHOOK_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const removed = await webhooks.removeWebhook(ctx.store, webhookId(id), by(ctx));
      return ctx.json ? removed : `removed webhook ${removed.id} (${removed.url})`;
    },
  },
  {
    group: 'webhook',
    name: 'test',
    summary: 'send a webhook.test message now and show the answer (not stored, not retried)',
    args: WEBHOOK_ID,
    options: {},
    async run(ctx, _v, [id]) {
      const result = await webhooks.testWebhook(ctx.store, ctx.keys, targetPolicy(ctx.config), webhookId(id));
      if (!result.ok && !ctx.json)
        throw badRequest(`webhook ${id} did not accept the test message: ${result.error ?? `HTTP ${result.status}`}`);
      return ctx.json ? result : `webhook ${id} answered HTTP ${result.status} to ${result.id}`;
    },
  },
  {
    group: 'webhook',
    name: 'rotate-secret',
    summary: 'a new signing secret; the old one signs beside it until --overlap ends (default 24h)',
    args: WEBHOOK_ID,
    options: {
      overlap: {
        type: 'string',
        value: '<duration>',
        description: 'how long the old secret also signs: 0, 90m, 24h, 7d',
      },
    },
    async run(ctx, v, [id]) {
      const overlap = v.overlap === undefined ? 24 * 3600 * 1000 : durationOption(required(v, 'overlap'), 'overlap');
      const rotated = await webhooks.rotateWebhookSecret(ctx.store, ctx.keys, webhookId(id), overlap, by(ctx));
      return ctx.json
        ? rotated
        : `webhook ${rotated.id}: new signing secret (shown once): ${rotated.secret}${rotated.previous_secret_until ? `\nthe previous secret also signs until ${rotated.previous_secret_until}` : ''}`;
    },
  },
  {
    group: 'events',
    name: 'after-restore',
    summary:
      'after restoring the database to an earlier moment (pg_restore, a point-in-time recovery): new event and delivery ids start above every id issued before',
    options: {},
    async run(ctx) {
      await advanceOutboxIds(ctx.store.db, ctx.store.dialect, restoreIdFloor(Date.now()));
      return ctx.json
        ? { advanced: true }
        : 'New events and deliveries get ids above every id issued before the restore; webhook-id, jti and txn values are never given twice.';
    },
  },
  {
    group: 'events',
    name: 'list',
    summary: 'event deliveries, newest first (webhooks and Shared Signals streams)',
    options: {
      state: { type: 'string', value: '<state>', description: `only ${STATES.join(', ')}` },
      webhook: { type: 'string', value: '<id>', description: 'only deliveries to this webhook' },
      stream: { type: 'string', value: '<stream_id>', description: 'only deliveries to this stream' },
      before: { type: 'string', value: '<id>', description: 'only deliveries older than this one (next page)' },
      limit: { type: 'string', value: '<n>', description: 'at most n (default 100, at most 1000)' },
    },
    async run(ctx, v) {
      const state = optional(v, 'state');
      if (state !== undefined && !STATES.includes(state))
        throw badRequest(`--state must be one of ${STATES.join(', ')}`);
      if (v.webhook !== undefined && v.stream !== undefined) throw badRequest('give --webhook or --stream, not both');
      const destination =
        v.webhook !== undefined
          ? `webhook:${intOption(v.webhook, 'webhook')}`
          : v.stream !== undefined
            ? `stream:${required(v, 'stream')}`
            : undefined;
      const limit = v.limit === undefined ? 100 : intOption(v.limit, 'limit');
      if (limit > 1000) throw badRequest('--limit must be at most 1000');
      const rows = await listDeliveries(ctx.store.db, {
        state,
        destination,
        before: v.before === undefined ? undefined : intOption(v.before, 'before'),
        limit,
      });
      const list = rows.map(deliveryView);
      return ctx.json
        ? list
        : table(list, ['id', 'type', 'at', 'destination', 'subject', 'state', 'attempts', 'last_status']);
    },
  },
  {
    group: 'events',
    name: 'show',
    summary: 'one delivery: its event, state, attempts and the last error',
    args: DELIVERY_ID,
    options: {},
    async run(ctx, _v, [id]) {
      if (id === undefined) throw badRequest('delivery id is required');
      const row = await findDelivery(ctx.store.db, intOption(id, 'id'));
      if (!row) throw notFound(`delivery ${id} does not exist`);
      const view = { ...deliveryView(row), data: JSON.parse(row.data) as unknown };
      return ctx.json
        ? view
        : Object.entries(view)
            .map(
              ([k, value]) =>
                `${k}: ${typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)}`,
            )
            .join('\n');
    },
  },
  {
    group: 'events',
    name: 'replay',
    summary:
      'send a delivery again (delivered or given up): pending and due now, attempts from zero; refused when its webhook or stream is gone or disabled',
    args: DELIVERY_ID,
    options: {},
    async run(ctx, _v, [id]) {
      if (id === undefined) throw badRequest('delivery id is required');
      const delivery = intOption(id, 'id');
      const replayed = await replayDelivery(ctx.store.db, delivery, Date.now());
      if (!replayed) throw notFound(`delivery ${id} does not exist`);
      if (!replayed.replayed) {
        const [kind, name] = [
          replayed.destination.split(':', 1)[0],
          replayed.destination.slice(replayed.destination.indexOf(':') + 1),
        ];
        if (replayed.reason === 'removed')
          throw notFound(`delivery ${id} cannot be sent again: its ${kind} ${name} no longer exists`);
        throw badRequest(
          `delivery ${id} cannot be sent again: its stream ${name} is disabled (its receiver enables it)`,
        );
      }
      const { earlierMadeDue } = replayed;
      if (ctx.json) return { id: delivery, state: 'pending', earlier_made_due: earlierMadeDue };
      return earlierMadeDue === 0
        ? `delivery ${id} is pending again; the service sends it`
        : `delivery ${id} is pending again; the service sends it after the ${earlierMadeDue} earlier deliveries ` +
            'to its destination about the same user that were waiting to be retried, which are due now too';
    },
  },
];
