// The client registry: applications and API clients the operator registers.
import { hash, randomBytes, randomUUID } from 'node:crypto';
import { isUniqueViolation, type Store } from '../store/index.ts';
import * as repo from '../store/clients.ts';
import { findOrganization } from '../store/directory.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { hmac, safeEqual, type Keyring } from '../crypto.ts';
import { API_SCOPES, ATTRIBUTE_GROUPS, KNOWN_SCOPES, STANDARD_OIDC_SCOPES } from '../vocabulary.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { deleteClientArtifacts } from '../store/oidc-payloads.ts';
import { publish } from '../store/invalidation.ts';

export type { ClientRow, GrantKind } from '../store/clients.ts';

export interface Client {
  clientId: string;
  name: string;
  public: boolean;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  /** OIDC Back-Channel Logout 1.0: where logout tokens are POSTed */
  backchannelLogoutUri: string | null;
  /** OIDC Front-Channel Logout 1.0: loaded in an iframe of the signed-out page, with iss and sid */
  frontchannelLogoutUri: string | null;
  grantTypes: string[];
  scopes: string[];
  groups: string[];
  firstParty: boolean;
  userinfoSignedResponseAlg: string | null;
  /** authorization requests must be pushed first (RFC 9126) */
  requirePar: boolean;
  /** a resource server: may introspect its organizations' users' access tokens and the service's
   * JWT access tokens (docs/tokens.md) */
  introspection: boolean;
  adminOrgs: number[];
  checkuserOrgs: number[];
  createdAt: number;
  /** when an operator disabled it; null while it works */
  disabledAt: number | null;
  /** until when the secret before the last rotation is still accepted */
  previousSecretExpiresAt: number | null;
  /** 'saml': the client of a SAML service provider, changed through `saml sp ...` only */
  protocol: 'oidc' | 'saml';
}

export interface NewClient {
  name: string;
  scopes?: string[];
  groups?: string[];
  orgs?: number[];
  redirectUris?: string[];
  postLogoutRedirectUris?: string[];
  backchannelLogoutUri?: string;
  frontchannelLogoutUri?: string;
  firstParty?: boolean;
  public?: boolean;
  userinfoSignedResponseAlg?: string;
  /** refuse authorization requests that were not pushed to /oauth/par first */
  requirePar?: boolean;
  /** a resource server allowed to introspect tokens it was not issued (docs/tokens.md) */
  introspection?: boolean;
  /** grant types the operator asked for; empty or absent: the defaults of defaultGrantTypes() */
  grantTypes?: string[];
  /** carried over from another identity provider (docs/migrating.md): its client id, else a new UUID */
  clientId?: string;
  /** and the secret its relying party holds, else a new one (confidential clients only) */
  secret?: string;
}

/** A client id carried over: what OAuth's client_id may be and the service can put in a URL path. */
const CARRIED_CLIENT_ID = /^[A-Za-z0-9][A-Za-z0-9._:~-]{0,199}$/;
/** A secret carried over: printable ASCII, long enough not to be guessed. */
const CARRIED_SECRET = /^[\x21-\x7e]{16,512}$/;

async function carriedIdentity(store: Store, input: NewClient): Promise<{ clientId: string; secret: string | null }> {
  if (input.clientId !== undefined) {
    if (!CARRIED_CLIENT_ID.test(input.clientId))
      throw badRequest('a client id must be 1-200 letters, digits and . _ : ~ - (starting with a letter or digit)');
    if (await repo.findClient(store.db, input.clientId)) throw conflict(`client '${input.clientId}' already exists`);
  }
  if (input.secret !== undefined) {
    if (input.public) throw badRequest('a public client has no secret');
    if (!CARRIED_SECRET.test(input.secret))
      throw badRequest('a client secret must be 16-512 printable ASCII characters');
  }
  return {
    clientId: input.clientId ?? randomUUID(),
    secret: input.public ? null : (input.secret ?? newSecret()),
  };
}

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

export const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials', DEVICE_CODE_GRANT] as const;

/** Grants that sign a person in (and so may release the standard OpenID Connect scopes). */
export const SIGN_IN_GRANTS: readonly string[] = ['authorization_code', DEVICE_CODE_GRANT];

/** `device_code` is short for the device grant's URN (RFC 8628). */
function grantName(grant: string): string {
  return grant === 'device_code' ? DEVICE_CODE_GRANT : grant;
}

/**
 * The scopes a client may be granted: its allowed scopes and its attribute groups (each group is
 * a scope), plus the standard OpenID Connect scopes for sign-in clients. The authorization server
 * and the consent logic both use this, so they never disagree.
 */
export function allowedScopes(row: repo.ClientRow): Set<string> {
  const scopes = new Set([...row.scopes.split(' '), ...row.groups.split(' ')].filter(Boolean));
  if ((JSON.parse(row.grant_types) as string[]).some((g) => SIGN_IN_GRANTS.includes(g)))
    for (const s of STANDARD_OIDC_SCOPES) scopes.add(s);
  // Registered for refresh tokens: may ask for them the standard way (the user agrees on the consent page).
  if ((JSON.parse(row.grant_types) as string[]).includes('refresh_token')) scopes.add('offline_access');
  return scopes;
}

export function hashSecret(keys: Keyring, secret: string): string {
  return hmac(keys.clientSecret, secret);
}

/**
 * Constant-time check of a presented secret against the stored keyed hashes: the current one and,
 * during a rotation's overlap, the previous one (space-separated, see clientSecretHashes()).
 * Every hash is compared, so the time does not tell which one matched.
 */
export function secretMatches(keys: Keyring, storedHashes: string | null, presented: string): boolean {
  return matchedHash(keys, storedHashes, presented) !== undefined;
}

/** The presented secret's keyed hash when it matches one of the stored hashes (each compared in constant time). */
function matchedHash(keys: Keyring, storedHashes: string | null, presented: string): string | undefined {
  if (!storedHashes || typeof presented !== 'string' || presented.length > 512) return undefined;
  const actual = hashSecret(keys, presented);
  let matched = false;
  for (const stored of storedHashes.split(' ')) matched = safeEqual(actual, stored) || matched;
  return matched ? actual : undefined;
}

/**
 * secretMatches() that remembers what matched: the keyed hash is most of a client_credentials
 * request's own work, and a client presents the same secret on every request. Per owner (the
 * authorization server's Client object, rebuilt whenever the client changes), the SHA-256 of each
 * presented secret that matched is kept with the stored hash it matched (at most two: a rotation's
 * overlap); a presented secret with a remembered digest is accepted while that stored hash is still
 * among the owner's, without the keyed hash. Nothing that did not match is remembered, so a wrong
 * secret always costs the full check, and the secrets themselves are never kept.
 */
export function rememberingSecretCheck(keys: Keyring) {
  const matched = new WeakMap<object, Map<string, string>>();
  return (owner: object, storedHashes: string | null, presented: string): boolean => {
    if (!storedHashes || typeof presented !== 'string' || presented.length > 512) return false;
    const digest = hash('sha256', presented, 'base64url');
    const known = matched.get(owner);
    const hashOfKnown = known?.get(digest);
    if (hashOfKnown !== undefined && storedHashes.split(' ').includes(hashOfKnown)) return true;
    const actual = matchedHash(keys, storedHashes, presented);
    if (actual === undefined) return false;
    const remembered = known ?? new Map<string, string>();
    if (remembered.size >= 2) remembered.clear();
    remembered.set(digest, actual);
    matched.set(owner, remembered);
    return true;
  };
}

/** The hashes a presented secret may match now: the current one, and the previous one until its overlap ends. */
export function clientSecretHashes(row: repo.ClientRow, now = Date.now()): string | null {
  if (row.secret_hash === null) return null;
  const previousValid =
    row.previous_secret_hash !== null &&
    row.previous_secret_expires_at !== null &&
    row.previous_secret_expires_at > now;
  return previousValid ? `${row.secret_hash} ${row.previous_secret_hash}` : row.secret_hash;
}

function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function parseList(value: string | undefined): string[] {
  return (value ?? '').split(/[\s,]+/).filter(Boolean);
}

function checkRedirectUri(uri: string, what: string): string {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw badRequest(`${what} '${uri}' is not an absolute URL`);
  }
  if (url.hash) throw badRequest(`${what} '${uri}' must not contain a fragment`);
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw badRequest(`${what} '${uri}' must use https (http is allowed for localhost only)`);
  }
  return uri;
}

/** Logout URIs follow the redirect URI rules; they serve sign-in clients only. */
function checkLogoutUris(input: NewClient): { backchannel: string | null; frontchannel: string | null } {
  const backchannel =
    input.backchannelLogoutUri === undefined
      ? null
      : checkRedirectUri(input.backchannelLogoutUri, 'back-channel logout URI');
  const frontchannel =
    input.frontchannelLogoutUri === undefined
      ? null
      : checkRedirectUri(input.frontchannelLogoutUri, 'front-channel logout URI');
  if ((backchannel || frontchannel) && (input.redirectUris ?? []).length === 0)
    throw badRequest('logout URIs are for clients that sign users in: add a --redirect-uri');
  return { backchannel, frontchannel };
}

export function checkScopes(scopes: string[]): string[] {
  for (const s of scopes)
    if (!KNOWN_SCOPES.has(s)) throw badRequest(`unknown scope '${s}' (known: ${[...KNOWN_SCOPES].join(' ')})`);
  return [...new Set(scopes)];
}

export function checkGroups(groups: string[]): string[] {
  for (const g of groups)
    if (!(ATTRIBUTE_GROUPS as readonly string[]).includes(g))
      throw badRequest(`unknown attribute group '${g}' (known: ${ATTRIBUTE_GROUPS.join(' ')})`);
  return [...new Set(groups)];
}

/**
 * Without --grant: a client with redirect URIs signs users in (authorization_code, refresh_token);
 * a confidential client gets client_credentials when it has API scopes or nothing else to do.
 */
function defaultGrantTypes(isPublic: boolean, redirectUris: string[], scopes: string[]): string[] {
  const grants = redirectUris.length ? ['authorization_code', 'refresh_token'] : [];
  const wantsApi = scopes.some((s) => (API_SCOPES as readonly string[]).includes(s));
  if (!isPublic && (wantsApi || grants.length === 0)) grants.push('client_credentials');
  return grants;
}

function checkGrantTypes(input: NewClient, redirectUris: string[], scopes: string[]): string[] {
  const asked = [...new Set((input.grantTypes ?? []).map(grantName))];
  if (asked.length === 0) return defaultGrantTypes(Boolean(input.public), redirectUris, scopes);
  for (const g of asked)
    if (!(GRANT_TYPES as readonly string[]).includes(g))
      throw badRequest(`unknown grant type '${g}' (known: ${GRANT_TYPES.join(' ')}; device_code for short)`);
  if (input.public && asked.includes('client_credentials'))
    throw badRequest('a public client cannot use client_credentials: it has no secret to authenticate with');
  if (asked.includes('authorization_code') && redirectUris.length === 0)
    throw badRequest('the authorization_code grant needs at least one --redirect-uri');
  if (!asked.includes('authorization_code') && redirectUris.length > 0)
    throw badRequest(
      '--redirect-uri is used only by the authorization_code grant; add --grant authorization_code or drop the redirect URIs',
    );
  if (asked.includes('refresh_token') && !asked.some((g) => SIGN_IN_GRANTS.includes(g)))
    throw badRequest('the refresh_token grant needs the authorization_code or device_code grant');
  return GRANT_TYPES.filter((g) => asked.includes(g));
}

async function checkOrganizations(store: Store, orgIds: number[]): Promise<number[]> {
  for (const id of orgIds) {
    if (!Number.isSafeInteger(id) || id < 1) throw badRequest(`organization id '${id}' is not a positive integer`);
    if (!(await findOrganization(store.db, id))) throw notFound(`organization ${id} does not exist`);
  }
  return [...new Set(orgIds)];
}

function toClient(row: repo.ClientRow, adminOrgs: number[], checkuserOrgs: number[]): Client {
  return {
    clientId: row.client_id,
    name: row.name,
    public: row.secret_hash === null,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    postLogoutRedirectUris: JSON.parse(row.post_logout_redirect_uris) as string[],
    backchannelLogoutUri: row.backchannel_logout_uri,
    frontchannelLogoutUri: row.frontchannel_logout_uri,
    grantTypes: JSON.parse(row.grant_types) as string[],
    scopes: row.scopes.split(' ').filter(Boolean),
    groups: row.groups.split(' ').filter(Boolean),
    firstParty: row.first_party === 1,
    userinfoSignedResponseAlg: row.userinfo_signed_response_alg,
    requirePar: row.require_par === 1,
    introspection: row.introspection === 1,
    adminOrgs,
    checkuserOrgs,
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
    previousSecretExpiresAt:
      row.previous_secret_hash !== null && row.previous_secret_expires_at !== null
        ? row.previous_secret_expires_at
        : null,
    protocol: row.protocol === 'saml' ? 'saml' : 'oidc',
  };
}

/** A SAML service provider's client changes with its SP (src/service-providers), never on its own. */
function refuseSamlClient(row: repo.ClientRow): void {
  if (row.protocol === 'saml') {
    throw badRequest(
      `client '${row.client_id}' belongs to a SAML service provider: use saml sp update|disable|enable|remove`,
    );
  }
}

export async function getClient(store: Store, clientId: string): Promise<Client> {
  const row = await repo.findClient(store.db, clientId);
  if (!row) throw notFound(`client '${clientId}' does not exist`);
  return toClient(
    row,
    await repo.listGrantedOrganizations(store.db, clientId, 'admin'),
    await repo.listGrantedOrganizations(store.db, clientId, 'checkuser'),
  );
}

export async function listClients(store: Store): Promise<Client[]> {
  const rows = await repo.listClients(store.db);
  return Promise.all(rows.map((r) => getClient(store, r.client_id)));
}

export async function createClient(
  store: Store,
  keys: Keyring,
  input: NewClient,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ client: Client; secret: string | null }> {
  const name = input.name.trim();
  if (!name || name.length > 200) throw badRequest('client name must be 1-200 characters');
  const scopes = checkScopes(input.scopes ?? []);
  const groups = checkGroups(input.groups ?? []);
  const redirectUris = (input.redirectUris ?? []).map((u) => checkRedirectUri(u, 'redirect URI'));
  const postLogout = (input.postLogoutRedirectUris ?? []).map((u) => checkRedirectUri(u, 'post-logout redirect URI'));
  const logoutUris = checkLogoutUris(input);
  const orgs = await checkOrganizations(store, input.orgs ?? []);
  // A device client signs people in without a redirect (RFC 8628): it needs no redirect URI.
  const deviceClient = (input.grantTypes ?? []).map(grantName).includes(DEVICE_CODE_GRANT);
  if (input.public && redirectUris.length === 0 && !deviceClient)
    throw badRequest('a public client needs at least one --redirect-uri (or --grant device_code)');
  if (input.userinfoSignedResponseAlg !== undefined && !['RS256', 'ES256'].includes(input.userinfoSignedResponseAlg)) {
    throw badRequest('userinfo signing alg must be RS256 or ES256');
  }
  const grantTypes = checkGrantTypes(input, redirectUris, scopes);
  if (input.requirePar && !grantTypes.includes('authorization_code'))
    throw badRequest('--require-par concerns authorization requests; the client needs the authorization_code grant');
  if (input.introspection && input.public) throw badRequest(PUBLIC_INTROSPECTION);
  const { clientId, secret } = await carriedIdentity(store, input);
  const insert = store.db.transaction().execute(async (trx) => {
    await repo.insertClient(trx, {
      client_id: clientId,
      secret_hash: secret === null ? null : hashSecret(keys, secret),
      name,
      redirect_uris: JSON.stringify(redirectUris),
      post_logout_redirect_uris: JSON.stringify(postLogout),
      backchannel_logout_uri: logoutUris.backchannel,
      frontchannel_logout_uri: logoutUris.frontchannel,
      grant_types: JSON.stringify(grantTypes),
      scopes: scopes.join(' '),
      groups: groups.join(' '),
      first_party: input.firstParty ? 1 : 0,
      userinfo_signed_response_alg: input.userinfoSignedResponseAlg ?? null,
      require_par: input.requirePar ? 1 : 0,
      introspection: input.introspection ? 1 : 0,
      created_at: now,
      updated_at: now,
    });
    await repo.grantOrganizations(trx, clientId, orgs, 'admin');
    // a lookup of the new id that raced the insert may have found nothing
    await publish(trx, 'client', clientId);
    const details = {
      name,
      grant_types: grantTypes,
      scopes,
      groups,
      orgs,
      introspection: Boolean(input.introspection),
    };
    await recordAudit(trx, { action: 'client.add', actor, at: now, subject: clientId, clientId, details });
  });
  // a carried-over client id taken meanwhile by another process
  await insert.catch((err: unknown) => {
    throw isUniqueViolation(err) ? conflict(`client '${clientId}' already exists`) : err;
  });
  return { client: await getClient(store, clientId), secret };
}

/** Default overlap of a secret rotation: both secrets work for a day, time to roll the new one out. */
export const DEFAULT_SECRET_OVERLAP_MS = 24 * 3600 * 1000;

/**
 * A new secret. The previous one keeps working for `overlapMs` (0: stops at once), so a client
 * spread over several servers can be updated without an outage.
 */
export async function rotateSecret(
  store: Store,
  keys: Keyring,
  clientId: string,
  { actor = SYSTEM, now = Date.now(), overlapMs = DEFAULT_SECRET_OVERLAP_MS }: Change & { overlapMs?: number } = {},
): Promise<{ secret: string; previousValidUntil: number | null }> {
  const secret = newSecret();
  const previousValidUntil = overlapMs > 0 ? now + overlapMs : null;
  await store.db.transaction().execute(async (trx) => {
    const row = await repo.findClient(trx, clientId);
    if (!row) throw notFound(`client '${clientId}' does not exist`);
    refuseSamlClient(row);
    if (row.secret_hash === null) throw badRequest(`client '${clientId}' is public and has no secret`);
    await repo.updateClient(trx, clientId, {
      secret_hash: hashSecret(keys, secret),
      previous_secret_hash: previousValidUntil === null ? null : row.secret_hash,
      previous_secret_expires_at: previousValidUntil,
      updated_at: now,
    });
    await publish(trx, 'client', clientId);
    const details = { overlap_seconds: Math.round(overlapMs / 1000) };
    await recordAudit(trx, { action: 'client.secret_rotate', actor, at: now, subject: clientId, clientId, details });
  });
  return { secret, previousValidUntil };
}

export interface ClientUpdate {
  name?: string;
  redirectUris?: string[];
  postLogoutRedirectUris?: string[];
  groups?: string[];
  scopes?: string[];
  grantTypes?: string[];
  /** allow (true) or stop (false) introspecting tokens issued to other clients */
  introspection?: boolean;
}

const PUBLIC_INTROSPECTION =
  '--introspection is for resource servers, which authenticate with a secret; a public client cannot';

/** The columns an update changes, each checked with the rules of createClient(). */
function clientChanges(row: repo.ClientRow, input: ClientUpdate): Partial<repo.ClientRow> {
  const changes: Partial<repo.ClientRow> = {};
  if (input.name !== undefined) {
    const name = input.name.trim();
    if (!name || name.length > 200) throw badRequest('client name must be 1-200 characters');
    changes.name = name;
  }
  if (input.groups !== undefined) changes.groups = checkGroups(input.groups).join(' ');
  if (input.scopes !== undefined) changes.scopes = checkScopes(input.scopes).join(' ');
  if (input.postLogoutRedirectUris !== undefined)
    changes.post_logout_redirect_uris = JSON.stringify(
      input.postLogoutRedirectUris.map((u) => checkRedirectUri(u, 'post-logout redirect URI')),
    );
  if (input.redirectUris !== undefined || input.grantTypes !== undefined) {
    const redirectUris = (input.redirectUris ?? (JSON.parse(row.redirect_uris) as string[])).map((u) =>
      checkRedirectUri(u, 'redirect URI'),
    );
    const asked = input.grantTypes ?? (JSON.parse(row.grant_types) as string[]);
    const scopes = (changes.scopes ?? row.scopes).split(' ').filter(Boolean);
    const isPublic = row.secret_hash === null;
    const grantTypes = checkGrantTypes({ name: row.name, public: isPublic, grantTypes: asked }, redirectUris, scopes);
    changes.redirect_uris = JSON.stringify(redirectUris);
    changes.grant_types = JSON.stringify(grantTypes);
  }
  if (input.introspection !== undefined) {
    if (input.introspection && row.secret_hash === null) throw badRequest(PUBLIC_INTROSPECTION);
    changes.introspection = input.introspection ? 1 : 0;
  }
  if (Object.keys(changes).length === 0)
    throw badRequest(
      'nothing to change: give --name, --redirect-uri, --post-logout-redirect-uri, --groups, --scopes, --grant or --introspection',
    );
  return changes;
}

/** Changes a client's registration; the authorization server and userinfo see it at once here, and
 * within a fraction of a second on every other instance (the change publishes an invalidation). */
export async function updateClient(
  store: Store,
  clientId: string,
  input: ClientUpdate,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<Client> {
  await store.db.transaction().execute(async (trx) => {
    const row = await repo.findClient(trx, clientId);
    if (!row) throw notFound(`client '${clientId}' does not exist`);
    refuseSamlClient(row);
    const changes = clientChanges(row, input);
    await repo.updateClient(trx, clientId, { ...changes, updated_at: now });
    await publish(trx, 'client', clientId);
    const details = {
      fields: Object.keys(changes),
      ...(changes.introspection === undefined ? {} : { introspection: changes.introspection === 1 }),
    };
    await recordAudit(trx, { action: 'client.update', actor, at: now, subject: clientId, clientId, details });
  });
  return getClient(store, clientId);
}

/**
 * Disables or re-enables a client. While disabled the authorization server does not know it (no
 * sign-in, no token, no refresh), its grants and stored tokens are deleted, and its self-contained
 * (JWT) access tokens are refused by every endpoint that accepts them.
 */
export async function setClientEnabled(
  store: Store,
  clientId: string,
  enabled: boolean,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ client: Client; changed: boolean }> {
  const changed = await store.db.transaction().execute(async (trx) => {
    const row = await repo.findClient(trx, clientId);
    if (!row) throw notFound(`client '${clientId}' does not exist`);
    refuseSamlClient(row);
    if ((row.disabled_at === null) === enabled) return false;
    await repo.updateClient(trx, clientId, { disabled_at: enabled ? null : now, updated_at: now });
    await publish(trx, 'client', clientId);
    // Its grants and tokens go: re-enabling does not bring back what was issued before.
    const artifacts = enabled ? 0 : await deleteClientArtifacts(trx, clientId, store.dialect);
    const action = enabled ? 'client.enable' : 'client.disable';
    const details = enabled ? {} : { artifacts };
    await recordAudit(trx, { action, actor, at: now, subject: clientId, clientId, details });
    return true;
  });
  return { client: await getClient(store, clientId), changed };
}

/** Removes a client with its grants, tokens, organization grants and users' consents. */
export async function removeClient(
  store: Store,
  clientId: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ artifacts: number }> {
  return store.db.transaction().execute(async (trx) => {
    const row = await repo.findClient(trx, clientId);
    if (!row) throw notFound(`client '${clientId}' does not exist`);
    refuseSamlClient(row);
    const artifacts = await deleteClientArtifacts(trx, clientId, store.dialect);
    await repo.deleteClient(trx, clientId);
    await publish(trx, 'client', clientId);
    const details = { name: row.name, artifacts };
    await recordAudit(trx, { action: 'client.remove', actor, at: now, subject: clientId, clientId, details });
    return { artifacts };
  });
}

export async function setGroups(
  store: Store,
  clientId: string,
  groups: string[],
  change: Change = {},
): Promise<Client> {
  return updateClient(store, clientId, { groups }, change);
}

export async function setScopes(
  store: Store,
  clientId: string,
  scopes: string[],
  change: Change = {},
): Promise<Client> {
  return updateClient(store, clientId, { scopes }, change);
}

async function changeOrganizations(
  store: Store,
  clientId: string,
  orgIds: number[],
  kind: repo.GrantKind,
  grant: boolean,
  { actor = SYSTEM, now = Date.now() }: Change,
): Promise<Client> {
  const client = await getClient(store, clientId);
  if (client.protocol === 'saml') {
    throw badRequest(`client '${clientId}' belongs to a SAML service provider: it takes no organization grants`);
  }
  const orgs = grant ? await checkOrganizations(store, orgIds) : orgIds;
  await store.db.transaction().execute(async (trx) => {
    if (grant) await repo.grantOrganizations(trx, clientId, orgs, kind);
    else await repo.revokeOrganizations(trx, clientId, orgs, kind);
    await publish(trx, 'client', clientId);
    const action = grant ? 'client.grant' : 'client.revoke';
    await recordAudit(trx, { action, actor, at: now, subject: clientId, clientId, details: { kind, orgs } });
  });
  return getClient(store, clientId);
}

export function grantOrganizations(
  store: Store,
  clientId: string,
  orgIds: number[],
  kind: repo.GrantKind,
  change: Change = {},
): Promise<Client> {
  return changeOrganizations(store, clientId, orgIds, kind, true, change);
}

export function revokeOrganizations(
  store: Store,
  clientId: string,
  orgIds: number[],
  kind: repo.GrantKind,
  change: Change = {},
): Promise<Client> {
  return changeOrganizations(store, clientId, orgIds, kind, false, change);
}
