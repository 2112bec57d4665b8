// The device authorization grant (RFC 8628) through oidc-provider's deviceFlow feature: its
// settings, and the polling pace oidc-provider does not enforce itself (slow_down).
import { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import * as payloads from '../store/oidc-payloads.ts';
import { DEVICE_CODE_GRANT } from '../clients/index.ts';

type DeviceFlow = NonNullable<NonNullable<Configuration['features']>['deviceFlow']>;

/** The pages of the device flow, rendered by the sign-in feature. */
export type DeviceFlowSources = Pick<DeviceFlow, 'userCodeInputSource' | 'userCodeConfirmSource' | 'successSource'>;

/** Seconds a device waits between polls (RFC 8628 3.2; also its default when a response omits it). */
const POLL_INTERVAL = 5;

/** Consonants only (no vowels, so no words; no 0/O or 1/I to confuse), in two groups of four. */
export const USER_CODE = { charset: 'base-20', mask: '****-****' } as const;

export function deviceFlowFeature(sources: DeviceFlowSources | undefined): DeviceFlow {
  return { enabled: true, charset: USER_CODE.charset, mask: USER_CODE.mask, ...(sources ?? {}) };
}

/** Where the last poll of a device code is kept: a row beside the code, swept when it expires. */
const POLL_TYPE = 'DevicePoll';

interface LastPoll {
  at: number;
  /** the interval the device has to keep, raised by 5 s at every slow_down (RFC 8628 3.5) */
  interval: number;
}

async function lastPoll(store: Store, id: string): Promise<LastPoll | undefined> {
  const row = await payloads.findPayload(store.db, POLL_TYPE, 'id', id);
  return row && (row.expires_at === null || row.expires_at > Date.now())
    ? (JSON.parse(row.payload) as LastPoll)
    : undefined;
}

async function recordPoll(store: Store, id: string, poll: LastPoll, ttlSeconds: number): Promise<void> {
  await payloads.upsertPayload(store.db, {
    type: POLL_TYPE,
    id,
    payload: JSON.stringify(poll),
    grant_id: null,
    user_code: null,
    uid: null,
    expires_at: poll.at + ttlSeconds * 1000,
  });
}

function isPendingDevicePoll(ctx: KoaContextWithOIDC): boolean {
  const body = ctx.body as { error?: unknown } | undefined;
  return (
    ctx.oidc?.route === 'token' &&
    ctx.oidc.params?.grant_type === DEVICE_CODE_GRANT &&
    typeof ctx.oidc.params.device_code === 'string' &&
    body?.error === 'authorization_pending'
  );
}

/** The grant a request to the device authorization or token endpoint uses. */
function requestedGrant(ctx: KoaContextWithOIDC): unknown {
  if (ctx.oidc?.route === 'device_authorization') return DEVICE_CODE_GRANT;
  return ctx.oidc?.route === 'token' ? ctx.oidc.params?.grant_type : undefined;
}

/** oidc-provider refuses a client a grant type it is not registered for with invalid_request;
 * RFC 6749 5.2 (and RFC 8628 3.2 for the device authorization endpoint) name it unauthorized_client. */
function refuseUnauthorizedClient(ctx: KoaContextWithOIDC): void {
  const body = ctx.body as { error?: unknown; error_description?: unknown } | undefined;
  const client = ctx.oidc?.client;
  const grant = requestedGrant(ctx);
  if (body?.error !== 'invalid_request' || !client || typeof grant !== 'string') return;
  if (client.grantTypes?.includes(grant)) return;
  ctx.body = { ...body, error: 'unauthorized_client' };
}

/**
 * oidc-provider answers every poll of a pending device code with authorization_pending, however
 * often it comes. A poll sooner than the interval after the previous one gets slow_down instead,
 * and the interval grows by 5 seconds. Only pending polls are paced: nothing is issued to them,
 * and an approved or refused code answers the next poll whenever it comes.
 */
export function devicePollPace(store: Store, ttlSeconds: number) {
  return async function pace(ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
    await next();
    if (ctx.oidc?.route === 'device_authorization' && ctx.status === 200 && ctx.body && typeof ctx.body === 'object')
      (ctx.body as Record<string, unknown>).interval = POLL_INTERVAL;
    refuseUnauthorizedClient(ctx);
    if (!isPendingDevicePoll(ctx)) return;
    const id = String(ctx.oidc.params!.device_code);
    const now = Date.now();
    const previous = await lastPoll(store, id);
    const interval = previous?.interval ?? POLL_INTERVAL;
    if (!previous || now - previous.at >= interval * 1000) {
      await recordPoll(store, id, { at: now, interval }, ttlSeconds);
      return;
    }
    await recordPoll(store, id, { at: now, interval: interval + 5 }, ttlSeconds);
    const slowDown = new errors.SlowDown();
    ctx.body = { error: slowDown.error, error_description: slowDown.error_description };
  };
}
