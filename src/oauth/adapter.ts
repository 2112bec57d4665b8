// oidc-provider storage adapter over the store. Clients come from the client registry; every
// other model is a JSON payload row with an expiry.
import Provider, { errors, type Adapter, type AdapterPayload, type Client } from 'oidc-provider';
import type { Store } from '../store/index.ts';
import * as payloads from '../store/oidc-payloads.ts';
import { findClient } from '../store/clients.ts';
import { recordProof } from '../store/dpop-proofs.ts';
import { keptLookup } from '../store/invalidation.ts';
import { INTROSPECTION_METADATA } from './introspection.ts';
import { FRONTCHANNEL_METADATA } from './frontchannel-logout.ts';
import { allowedScopes, clientSecretHashes, type ClientRow } from '../clients/index.ts';
import { SAML_CONTINUE_PATH } from '../service-providers/paths.ts';

/** The client's oidc-provider metadata; undefined for an unknown or disabled client. */
export async function clientMetadata(
  store: Store,
  clientId: string,
  publicUrl: string,
): Promise<AdapterPayload | undefined> {
  return (await clientEntry(store, clientId, publicUrl))?.metadata;
}

/** The metadata, and until when it holds: a previous secret stops working at the end of its overlap. */
async function clientEntry(
  store: Store,
  clientId: string,
  publicUrl: string,
): Promise<{ metadata: AdapterPayload; until: number } | undefined> {
  const row = await findClient(store.db, clientId);
  if (!row || row.disabled_at !== null) return undefined;
  const overlapEnd = row.previous_secret_expires_at ?? Infinity;
  const until = overlapEnd > Date.now() ? overlapEnd : Infinity;
  return { metadata: registration(row, publicUrl), until };
}

/**
 * Where the client's sign-ins may return. A SAML service provider's client returns to the
 * identity provider's own continuation endpoint, computed from PUBLIC_URL on every read, never
 * taken from the row.
 */
function redirectUris(row: ClientRow, publicUrl: string): string[] {
  if (row.protocol === 'saml') return [`${publicUrl}${SAML_CONTINUE_PATH}`];
  return JSON.parse(row.redirect_uris) as string[];
}

/** The registry row as oidc-provider client metadata. client_secret carries the keyed hashes
 * (during a rotation's overlap, two); the provider compares presented secrets through
 * secretMatches() (see provider.ts). A disabled client does not exist for the provider. */
function registration(row: ClientRow, publicUrl: string): AdapterPayload {
  const grantTypes = JSON.parse(row.grant_types) as string[];
  const secret = clientSecretHashes(row);
  const saml = row.protocol === 'saml';
  return {
    client_id: row.client_id,
    ...(secret === null || saml ? {} : { client_secret: secret }),
    client_name: row.name,
    redirect_uris: redirectUris(row, publicUrl),
    post_logout_redirect_uris: saml ? [] : (JSON.parse(row.post_logout_redirect_uris) as string[]),
    grant_types: grantTypes,
    // an SP's sign-ins end in the session (response_type=none, src/saml-idp/sso.ts): no code, no token
    response_types: saml ? ['none'] : grantTypes.includes('authorization_code') ? ['code'] : [],
    token_endpoint_auth_method: secret === null || saml ? 'none' : 'client_secret_basic',
    scope: [...allowedScopes(row)].join(' '),
    ...(row.userinfo_signed_response_alg ? { userinfo_signed_response_alg: row.userinfo_signed_response_alg } : {}),
    require_pushed_authorization_requests: row.require_par === 1,
    [INTROSPECTION_METADATA]: row.introspection === 1,
    // sid in ID tokens and logout tokens, so a relying party can end exactly the session it holds
    ...(row.backchannel_logout_uri
      ? { backchannel_logout_uri: row.backchannel_logout_uri, backchannel_logout_session_required: true }
      : {}),
    // sid in ID tokens for front-channel logout too (frontchannel-logout.ts)
    ...(row.frontchannel_logout_uri ? { [FRONTCHANNEL_METADATA]: row.frontchannel_logout_uri } : {}),
  } as AdapterPayload;
}

/**
 * Ids come from requests (tokens, codes, uids). Ours are short printable strings; anything else
 * (a NUL byte, which PostgreSQL refuses in text, or an absurd length) cannot name a stored row.
 */
function storable(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= 512 && !/[\u0000-\u001f]/.test(value);
}

/** Device codes outlive their expiry by this much (seconds), so a device polling late is told
 * expired_token by oidc-provider (which checks the expiry itself) instead of invalid_grant. */
const DEVICE_CODE_GRACE = 3600;

function expiresAt(expiresIn: number | undefined, name?: string): number | null {
  if (!expiresIn) return null;
  return Date.now() + (expiresIn + (name === 'DeviceCode' ? DEVICE_CODE_GRACE : 0)) * 1000;
}

function live(row: payloads.PayloadRow | undefined): AdapterPayload | undefined {
  if (!row) return undefined;
  if (row.expires_at !== null && row.expires_at <= Date.now()) return undefined;
  const payload = JSON.parse(row.payload) as AdapterPayload;
  if (row.consumed_at !== null) payload.consumed = Math.floor(row.consumed_at / 1000);
  return payload;
}

// Every token request looks its client up; the metadata is kept until the client changes (every
// change to a client publishes a 'client' invalidation, src/clients/index.ts), or until a previous
// secret's overlap ends. Unknown and disabled ids are not kept.
const CLIENT_KEEP_MS = 60_000;
const CLIENT_CACHE_ENTRIES = 1000;

type ClientLookup = (id: string) => Promise<AdapterPayload | undefined>;

/** One cache (and one subscription) per store and PUBLIC_URL, shared by the providers built on it over key rotations. */
const clientCaches = new WeakMap<Store, Map<string, ClientLookup>>();

function cachedClients(store: Store, publicUrl: string): ClientLookup {
  let byUrl = clientCaches.get(store);
  if (!byUrl) clientCaches.set(store, (byUrl = new Map<string, ClientLookup>()));
  let lookup = byUrl.get(publicUrl);
  if (!lookup) byUrl.set(publicUrl, (lookup = newClientCache(store, publicUrl)));
  return lookup;
}

function newClientCache(store: Store, publicUrl: string): ClientLookup {
  const entries = keptLookup(store.invalidations, {
    topic: 'client',
    max: CLIENT_CACHE_ENTRIES,
    keepMs: CLIENT_KEEP_MS,
    load: (id) => clientEntry(store, id, publicUrl),
    until: (entry) => entry.until,
  });
  return async (id) => (await entries(id))?.metadata;
}

/** What oidc-provider answers when it finds an artifact already used (its grant handlers and
 * authorization endpoint), so a request that loses the race gets the same answer. */
function alreadyUsed(name: string): Error {
  switch (name) {
    case 'AuthorizationCode':
      return new errors.InvalidGrant('authorization code already consumed');
    case 'RefreshToken':
      return new errors.InvalidGrant('refresh token already used');
    case 'PushedAuthorizationRequest':
      return new errors.InvalidRequestUri('request_uri is invalid, expired, or was already used');
    default:
      return new errors.InvalidGrant(`${name} already consumed`);
  }
}

/**
 * consume() of one-time artifacts (codes, rotating refresh tokens, device codes, PAR). oidc-provider
 * checks `consumed` on the artifact it loaded and then calls consume(); requests arriving together
 * all load it unconsumed. The conditional update lets exactly one through. The others are replays:
 * like oidc-provider on a replay it sees (RFC 6749 4.1.2), revoke the grant, so tokens the winning
 * request issued die too, and fail the request (the contract's consume() returns nothing, so
 * failing means throwing the error oidc-provider would answer with).
 */
async function consumeOnce(store: Store, name: string, id: string): Promise<void> {
  if (storable(id) && (await payloads.consumePayload(store.db, name, id, Date.now()))) return;
  const grantId = storable(id) ? await payloads.payloadGrantId(store.db, name, id) : undefined;
  if (grantId) {
    await payloads.revokeGrant(store.db, grantId);
    const ctx = Provider.ctx;
    if (ctx) ctx.oidc.provider.emit('grant.revoked', ctx, grantId);
  }
  throw alreadyUsed(name);
}

/**
 * DPoP proof ids the provider has accepted (its ReplayDetection model), in the table the resource
 * APIs share. The save is an insert that does nothing on a conflict, so of requests presenting one
 * proof, at the same moment or later, exactly one goes on.
 */
function replayDetection(store: Store): Adapter {
  const none = async () => undefined;
  return {
    // The insert below decides; a replay is refused there, as invalid_dpop_proof, at every endpoint.
    find: async () => undefined,
    async upsert(id, _payload, expiresIn) {
      const now = Date.now();
      if (!(await recordProof(store.db, id, now + (expiresIn ?? 0) * 1000, now)))
        throw new errors.InvalidDpopProof('DPoP proof JWT Replay detected');
    },
    findByUid: none,
    findByUserCode: none,
    consume: async () => {},
    destroy: async () => {},
    revokeByGrantId: async () => {},
  };
}

/**
 * oidc-provider turns a stored client's metadata into its Client object on every lookup, after
 * hashing the metadata (JSON and SHA-256) to find one it built before. The metadata object the
 * cache above hands out stays the same until the client changes, so the Client built from it is
 * kept with it and found again without the hashing; a change brings new metadata and a new Client.
 */
export function keepClientInstances(provider: Provider, store: Store, publicUrl: string): void {
  const lookup = cachedClients(store, publicUrl);
  const instances = new WeakMap<AdapterPayload, Client>();
  const find = provider.Client.find.bind(provider.Client);
  provider.Client.find = async (id: string) => {
    const metadata = storable(id) ? await lookup(id) : undefined;
    if (!metadata) return find(id);
    const kept = instances.get(metadata);
    if (kept) return kept;
    const client = await find(id);
    if (client) instances.set(metadata, client);
    return client;
  };
}

export function adapterFactory(store: Store, publicUrl: string) {
  const findClientMetadata = cachedClients(store, publicUrl);
  return (name: string): Adapter => {
    if (name === 'ReplayDetection') return replayDetection(store);
    if (name === 'Client') {
      return {
        upsert: async () => {},
        // client_id comes from the request (query, form, Basic credentials)
        find: async (id) => (storable(id) ? findClientMetadata(id) : undefined),
        findByUserCode: async () => undefined,
        findByUid: async () => undefined,
        consume: async () => {},
        destroy: async () => {},
        revokeByGrantId: async () => {},
      };
    }
    return {
      async upsert(id, payload, expiresIn) {
        await payloads.upsertPayload(store.db, {
          type: name,
          id,
          payload: JSON.stringify(payload),
          grant_id: payload.grantId ?? null,
          user_code: payload.userCode ?? null,
          uid: payload.uid ?? null,
          expires_at: expiresAt(expiresIn, name),
          account_id: typeof payload.accountId === 'string' ? payload.accountId : null,
        });
      },
      find: async (id) => (storable(id) ? live(await payloads.findPayload(store.db, name, 'id', id)) : undefined),
      findByUid: async (uid) =>
        storable(uid) ? live(await payloads.findPayload(store.db, name, 'uid', uid)) : undefined,
      findByUserCode: async (code) =>
        storable(code) ? live(await payloads.findPayload(store.db, name, 'user_code', code)) : undefined,
      consume: (id) => consumeOnce(store, name, id),
      destroy: async (id) => void (storable(id) && (await payloads.destroyPayload(store.db, name, id))),
      revokeByGrantId: async (grantId) =>
        void (storable(grantId) && (await payloads.revokePayloadsByGrant(store.db, grantId))),
    };
  };
}
