// A Keycloak realm export read into what this service has (docs/migrating.md, From Keycloak): its
// users as lines of the user import (src/directory/user-import.ts), their password credentials as
// hashes the import takes, its OpenID Connect clients as new clients (src/clients/), and a list
// of what has no place here. Nothing is written by this module: the `import keycloak` command
// hands the lines to importUsers() and the clients to createClient(), as the other commands do.
import { readFile, stat } from 'node:fs/promises';
import type { NewClient } from '../clients/index.ts';
import { badRequest } from '../errors.ts';
import { passwordHashProblem } from './passwords.ts';
import { IMPORT_COLUMNS, type ImportFields } from './user-import-file.ts';

/** The largest export read (it is parsed whole). */
export const MAX_EXPORT_BYTES = 512 * 1024 * 1024;

/** Something of the export that was not carried over, and why. */
export interface NotCarried {
  kind: string;
  /** the user's username or the client's clientId */
  subject: string;
  detail: string;
}

export interface KeycloakUser {
  username: string;
  fields: ImportFields;
  enabled: boolean;
}

export interface KeycloakClient {
  clientId: string;
  input: NewClient;
}

export interface KeycloakRealm {
  realm: string;
  users: KeycloakUser[];
  clients: KeycloakClient[];
  notCarried: NotCarried[];
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Keycloak's clients every realm has: nothing of an application's. */
const BUILT_IN_CLIENTS = new Set([
  'account',
  'account-console',
  'admin-cli',
  'broker',
  'realm-management',
  'security-admin-console',
]);
/** Roles every Keycloak user has: no decision of the organization's. */
const DEFAULT_ROLE = /^(default-roles-.*|offline_access|uma_authorization)$/;

/** The import's columns a user attribute may fill, by the attribute's name (snake_case or camelCase). */
const ATTRIBUTE_COLUMNS = new Map<string, (typeof IMPORT_COLUMNS)[number]>(
  IMPORT_COLUMNS.filter((c) => !['eppn', 'name', 'password_hash', 'external_id', 'email'].includes(c)).flatMap((c) => [
    [c, c],
    [c.replace(/_(.)/g, (_, ch: string) => ch.toUpperCase()), c],
  ]),
);
const MULTI = new Set(['affiliation', 'entitlement']);

function parseJson(text: unknown): Json | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** base64 (Keycloak's) as passlib's adapted base64: '.' for '+', no padding. */
const ab64 = (b64: string) => b64.replace(/=+$/, '').replace(/\+/g, '.');
const B64 = /^[A-Za-z0-9+/]+={0,2}$/;
const PBKDF2: Record<string, string> = {
  pbkdf2: '$pbkdf2$',
  'pbkdf2-sha1': '$pbkdf2$',
  'pbkdf2-sha256': '$pbkdf2-sha256$',
  'pbkdf2-sha512': '$pbkdf2-sha512$',
};

const first = (params: unknown, name: string): string | undefined => {
  const v = isObject(params) ? params[name] : undefined;
  return Array.isArray(v) ? str(v[0]) : str(v);
};

/** Keycloak's argon2 credential (additionalParameters type, version, memory, parallelism) as a PHC string. */
function argon2Hash(iterations: number, salt: string, value: string, params: unknown): string | undefined {
  const type = first(params, 'type') ?? 'id';
  const version = first(params, 'version') ?? '1.3';
  if (!['id', 'i'].includes(type) || version !== '1.3') return undefined;
  const memory = first(params, 'memory') ?? '7168';
  const parallelism = first(params, 'parallelism') ?? '1';
  if (!/^\d{1,7}$/.test(memory) || !/^\d{1,2}$/.test(parallelism)) return undefined;
  const unpadded = (s: string) => s.replace(/=+$/, '');
  return `$argon2${type}$v=19$m=${memory},t=${iterations},p=${parallelism}$${unpadded(salt)}$${unpadded(value)}`;
}

/**
 * A Keycloak password credential (secretData and credentialData, or the older hashedSaltedValue
 * form) as a hash string the import takes: PBKDF2 in passlib's form, argon2 as a PHC string. Or why
 * not, without the hash.
 */
export function keycloakPasswordHash(credential: Json): { hash: string } | { problem: string } {
  const secret = parseJson(credential.secretData) ?? {};
  const data = parseJson(credential.credentialData) ?? {};
  const value = str(secret.value) ?? str(credential.hashedSaltedValue);
  const salt = str(secret.salt) ?? str(credential.salt) ?? '';
  const algorithm = str(data.algorithm) ?? str(credential.algorithm) ?? 'pbkdf2-sha256';
  const iterations = data.hashIterations ?? credential.hashIterations;
  if (value === undefined) return { problem: 'the credential has no hash (secretData value)' };
  if (/^\$2[aby]\$/.test(value)) return checked(value);
  if (!Number.isSafeInteger(iterations) || !B64.test(value) || (salt !== '' && !B64.test(salt)))
    return { problem: `the ${algorithm} credential is malformed (hashIterations, salt or value)` };
  const prefix = PBKDF2[algorithm];
  if (prefix) return checked(`${prefix}${iterations as number}$${ab64(salt)}$${ab64(value)}`);
  if (algorithm === 'argon2') {
    const hash = argon2Hash(iterations as number, salt, value, data.additionalParameters);
    return hash ? checked(hash) : { problem: 'argon2 credential parameters not supported (type d, or version)' };
  }
  return { problem: `algorithm '${algorithm.slice(0, 40)}' is not supported` };
}

function checked(hash: string): { hash: string } | { problem: string } {
  const problem = passwordHashProblem(hash);
  return problem ? { problem } : { hash };
}

/** A username as an eppn of the realm: `alice` is `alice@<realm>`; one with an @ is kept (the import checks its realm). */
export const eppnOf = (username: string, realm: string) => (username.includes('@') ? username : `${username}@${realm}`);

function userAttributes(u: Json, username: string, fields: ImportFields, out: NotCarried[]): void {
  if (!isObject(u.attributes)) return;
  for (const [name, raw] of Object.entries(u.attributes)) {
    const column = ATTRIBUTE_COLUMNS.get(name);
    const values = list(raw).filter((v): v is string => typeof v === 'string');
    if (!column || values.length === 0) {
      out.push({ kind: 'attribute', subject: username, detail: `attribute '${name.slice(0, 60)}' has no column here` });
      continue;
    }
    if (!MULTI.has(column) && values.length > 1)
      out.push({ kind: 'attribute', subject: username, detail: `attribute '${name}': only the first value is kept` });
    fields[column] = MULTI.has(column) ? values : values[0]!;
  }
}

/** What a user has that this service does not take: other credentials, links, roles, groups. */
function userLeftovers(u: Json, username: string, out: NotCarried[]): void {
  for (const c of list(u.credentials).filter(isObject))
    if (c.type !== 'password')
      out.push({
        kind: 'credential',
        subject: username,
        detail: `${str(c.type) ?? 'unknown'} credential (enrol again here)`,
      });
  for (const link of list(u.federatedIdentities).filter(isObject))
    out.push({
      kind: 'identity_provider_link',
      subject: username,
      detail: `link to identity provider '${str(link.identityProvider) ?? '?'}'`,
    });
  const roles = list(u.realmRoles).filter((r): r is string => typeof r === 'string' && !DEFAULT_ROLE.test(r));
  if (roles.length) out.push({ kind: 'role', subject: username, detail: `realm roles: ${roles.join(', ')}` });
  if (isObject(u.clientRoles)) {
    const named = Object.entries(u.clientRoles)
      .filter(([client]) => !BUILT_IN_CLIENTS.has(client))
      .map(([client, r]) => `${client}: ${list(r).join(', ')}`);
    if (named.length) out.push({ kind: 'role', subject: username, detail: `client roles: ${named.join('; ')}` });
  }
  const groups = list(u.groups).filter((g): g is string => typeof g === 'string');
  if (groups.length) out.push({ kind: 'group', subject: username, detail: `groups: ${groups.join(', ')}` });
  const actions = list(u.requiredActions).filter((a): a is string => typeof a === 'string');
  if (actions.length) out.push({ kind: 'required_action', subject: username, detail: actions.join(', ') });
}

function readUser(u: Json, realm: string, out: NotCarried[]): KeycloakUser | undefined {
  const username = str(u.username);
  if (!username) {
    out.push({ kind: 'user', subject: '?', detail: 'a user without a username' });
    return undefined;
  }
  if (str(u.serviceAccountClientId)) {
    out.push({ kind: 'service_account', subject: username, detail: 'the user of a client service account' });
    return undefined;
  }
  const fields: ImportFields = { eppn: eppnOf(username, realm) };
  const given = str(u.firstName);
  const family = str(u.lastName);
  if (given) fields.given_name = given;
  if (family) fields.family_name = family;
  fields.name = [given, family].filter(Boolean).join(' ') || username;
  if (str(u.email)) fields.email = str(u.email)!;
  if (str(u.id)) fields.external_id = str(u.id)!;
  userAttributes(u, username, fields, out);
  const passwords = list(u.credentials).filter((c): c is Json => isObject(c) && c.type === 'password');
  if (passwords.length) {
    const carried = keycloakPasswordHash(passwords[0]!);
    if ('hash' in carried) fields.password_hash = carried.hash;
    else out.push({ kind: 'password', subject: username, detail: carried.problem });
  }
  userLeftovers(u, username, out);
  return { username, fields, enabled: u.enabled !== false };
}

/** Keycloak's redirect URIs this service can register: absolute, without wildcards. */
function redirectUris(values: unknown[], clientId: string, out: NotCarried[]): string[] {
  const kept: string[] = [];
  for (const v of values) {
    if (typeof v !== 'string') continue;
    if (v.includes('*') || !/^[a-z][a-z0-9+.-]*:/i.test(v) || v === '+')
      out.push({ kind: 'redirect_uri', subject: clientId, detail: `'${v.slice(0, 200)}' (wildcard or relative)` });
    else kept.push(v);
  }
  return kept;
}

function clientLeftovers(c: Json, clientId: string, out: NotCarried[]): void {
  const no = (detail: string) => out.push({ kind: 'client_setting', subject: clientId, detail });
  if (c.implicitFlowEnabled === true) no('implicit flow (not offered; use the authorization code flow)');
  if (c.directAccessGrantsEnabled === true) no('direct access grants (resource owner password; not offered)');
  if (c.serviceAccountsEnabled === true) no('service account (client_credentials is for this service’s APIs)');
  if (list(c.protocolMappers).length)
    no(`${list(c.protocolMappers).length} protocol mapper(s) (claims follow scopes here)`);
}

function readClient(c: Json, out: NotCarried[]): KeycloakClient | undefined {
  const clientId = str(c.clientId);
  if (!clientId || BUILT_IN_CLIENTS.has(clientId)) return undefined;
  const protocol = str(c.protocol) ?? 'openid-connect';
  const skip = (detail: string) => (out.push({ kind: 'client', subject: clientId, detail }), undefined);
  if (protocol !== 'openid-connect')
    return skip(`protocol '${protocol}' (register SAML service providers with saml sp add)`);
  if (c.bearerOnly === true) return skip('bearer-only (a resource server; nothing signs in to it)');
  if (c.enabled === false) return skip('disabled in Keycloak');
  if (c.standardFlowEnabled === false) return skip('no standard (authorization code) flow');
  const uris = redirectUris(list(c.redirectUris), clientId, out);
  const attributes = isObject(c.attributes) ? c.attributes : {};
  const logout = str(attributes['post.logout.redirect.uris']);
  const postLogout = logout ? redirectUris(logout.split('##'), clientId, out) : [];
  clientLeftovers(c, clientId, out);
  const name = str(c.name) && !str(c.name)!.startsWith('${') ? str(c.name)! : clientId;
  const isPublic = c.publicClient === true;
  // an export from the admin console masks secrets: the client then gets a new one
  const secret = !isPublic && str(c.secret) && !/^\*+$/.test(str(c.secret)!) ? str(c.secret) : undefined;
  const input: NewClient = {
    name,
    clientId,
    public: isPublic,
    ...(secret ? { secret } : {}),
    redirectUris: uris,
    postLogoutRedirectUris: postLogout,
    firstParty: c.consentRequired !== true,
    groups: ['userinfo-name', 'email'],
  };
  return { clientId, input };
}

/** Reads a realm export (`kc.sh export --realm <name>`, or the admin console's partial export). */
export async function readKeycloakExport(file: string, realm: string): Promise<KeycloakRealm> {
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch {
    throw badRequest(`cannot read '${file}'`);
  }
  if (size > MAX_EXPORT_BYTES) throw badRequest(`'${file}' is larger than ${MAX_EXPORT_BYTES} bytes`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    throw badRequest(`'${file}' is not a JSON document`);
  }
  if (!isObject(parsed) || (!Array.isArray(parsed.users) && !Array.isArray(parsed.clients)))
    throw badRequest(`'${file}' is not a Keycloak realm export (no users or clients)`);
  const notCarried: NotCarried[] = [];
  const users = list(parsed.users)
    .filter(isObject)
    .flatMap((u) => readUser(u, realm, notCarried) ?? []);
  const clients = list(parsed.clients)
    .filter(isObject)
    .flatMap((c) => readClient(c, notCarried) ?? []);
  const realmName = str(parsed.realm) ?? '?';
  const providers = list(parsed.identityProviders).filter(isObject);
  for (const p of providers)
    notCarried.push({
      kind: 'identity_provider',
      subject: realmName,
      detail: `identity provider '${str(p.alias) ?? '?'}' (${str(p.providerId) ?? '?'})`,
    });
  return { realm: realmName, users, clients, notCarried };
}
