// The steps every organization-scoped API shares (the passkey API, the recovery link API): the
// organization named in the path together with the calling client's grant, then the checks in the
// documented order — the client still active, granted this organization, the eppn of its realm.
//
// What these checks read is kept per (organization, client): every call of these APIs needs it, and
// it changes only when an operator grants or revokes an organization, disables or removes the
// client, or removes the organization. Each of those changes publishes an invalidation (topics
// `client` and `organization`) that drops the kept entries at once on the instance that made it and
// within a second on the others (src/store/invalidation.ts); the entries also expire after
// ACCESS_CACHE_MS, a bound for the case a change is ever missed. An organization that does not
// exist is not kept (it may be created next).
import type { FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import type { Store } from '../store/index.ts';
import { findOrganizationWithGrant } from '../store/clients.ts';
import { badRequest, forbidden, notFound } from '../errors.ts';
import { tokenNoLongerValid, type AccessToken, type TokenVerifier } from './bearer.ts';

export interface GrantedOrganization {
  id: number;
  realm: string;
  /** whether the calling client may administer it */
  granted: boolean;
  /** false when an operator disabled the calling client after the token was issued */
  clientActive: boolean;
}

/** A path id: digits only, positive; anything else names no organization (or passkey, or link). */
export function positiveId(raw: string): number | undefined {
  if (!/^[0-9]{1,15}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n > 0 ? n : undefined;
}

export function requireOrganization(org: GrantedOrganization | undefined): GrantedOrganization {
  if (!org) throw notFound('Organization does not exist');
  return org;
}

const ACCESS_CACHE_ENTRIES = 10_000;
const ACCESS_CACHE_MS = 60_000;
/** without invalidations (a store that receives none), entries live only this long */
const UNINVALIDATED_ACCESS_CACHE_MS = 1000;

/** The kept organizations with a client's access to them, of one store. */
export interface OrganizationAccessCache {
  get(clientId: string, orgId: number): GrantedOrganization | undefined;
  /** what to pass to remember(): the store's invalidation count before the lookup */
  mark(): number | undefined;
  /** keeps what a lookup that started at `mark` found, unless an invalidation came meanwhile */
  remember(clientId: string, org: GrantedOrganization | undefined, mark: number | undefined): void;
}

const accessCaches = new WeakMap<Store, OrganizationAccessCache>();

/** The store's organization access cache (one per store, subscribed to its invalidations). */
export function organizationAccessCache(store: Store): OrganizationAccessCache {
  let cache = accessCaches.get(store);
  if (!cache) accessCaches.set(store, (cache = newAccessCache(store)));
  return cache;
}

function newAccessCache(store: Store): OrganizationAccessCache {
  // keyed `<org id> <client id>`: the id is digits, so the first space ends it
  const entries = new LRUCache<string, GrantedOrganization>({
    max: ACCESS_CACHE_ENTRIES,
    ttl: store.invalidations ? ACCESS_CACHE_MS : UNINVALIDATED_ACCESS_CACHE_MS,
  });
  const drop = (matches: (orgId: string, clientId: string) => boolean) => {
    for (const key of [...entries.keys()]) {
      const at = key.indexOf(' ');
      if (matches(key.slice(0, at), key.slice(at + 1))) entries.delete(key);
    }
  };
  store.invalidations?.subscribe((invalidation) => {
    if (invalidation === null) entries.clear();
    else if (invalidation.topic === 'client') drop((_, clientId) => clientId === invalidation.key);
    else if (invalidation.topic === 'organization') drop((orgId) => orgId === invalidation.key);
  });
  return {
    get: (clientId, orgId) => entries.get(`${orgId} ${clientId}`),
    mark: () => store.invalidations?.sequence,
    remember(clientId, org, mark) {
      if (org && store.invalidations?.sequence === mark) entries.set(`${org.id} ${clientId}`, org);
    },
  };
}

/** Loads the organization together with the caller's grant (kept, or one query), checked in the next steps. */
export async function loadOrganization(
  store: Store,
  token: AccessToken,
  rawOrgId: string,
): Promise<GrantedOrganization> {
  const id = positiveId(rawOrgId);
  if (id === undefined) throw notFound('Organization does not exist');
  const cache = organizationAccessCache(store);
  const kept = cache.get(token.clientId, id);
  if (kept) return kept;
  const mark = cache.mark();
  const org = await findOrganizationWithGrant(store.db, id, token.clientId, 'admin');
  cache.remember(token.clientId, org, mark);
  return requireOrganization(org);
}

export function checkClientGrant(org: GrantedOrganization): void {
  if (!org.granted) throw forbidden('Client not authorized for organization');
}

/** A disabled client's tokens stop working at once, though they still verify. */
export function checkClientActive(request: FastifyRequest, verifier: TokenVerifier, org: GrantedOrganization): void {
  if (!org.clientActive) throw tokenNoLongerValid(request, verifier, 'The client of this token is disabled');
}

export function checkRealm(eppn: string | null, org: GrantedOrganization): void {
  if (eppn === null) return;
  const realm = eppn.slice(eppn.lastIndexOf('@') + 1);
  if (realm !== org.realm) throw forbidden(`eppn realm '${realm}' does not match organization`);
}

/** The raw query string, split by hand: unknown and repeated parameters are errors, not guesses. */
export function parseQuery<Name extends string>(
  request: FastifyRequest,
  allowed: readonly Name[],
): Partial<Record<Name, string>> {
  const at = request.url.indexOf('?');
  const query: Partial<Record<Name, string>> = {};
  if (at < 0) return query;
  for (const [name, value] of new URLSearchParams(request.url.slice(at + 1))) {
    if (!(allowed as readonly string[]).includes(name))
      throw badRequest(`Unknown query parameter '${name.slice(0, 40)}'`);
    if (query[name as Name] !== undefined)
      throw badRequest(`Invalid '${name}' query parameter -- given more than once`);
    query[name as Name] = value;
  }
  return query;
}
