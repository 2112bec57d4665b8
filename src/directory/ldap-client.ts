// Talking to an organization's LDAP directory (docs/ldap.md) with ldapts: a connection that
// verifies the directory's certificate (ldaps:// or StartTLS; the CA given, never "don't verify"),
// bounded by a timeout on the connection and on every operation; entries read into what the
// directory says of a user; and a user's password checked by a bind as their entry.
import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import {
  AndFilter,
  Client,
  EqualityFilter,
  FilterParser,
  InvalidCredentialsError,
  OrFilter,
  type Entry,
  type Filter,
} from 'ldapts';
import { AppError } from '../errors.ts';
import { normalizeEppn } from './index.ts';
import type { DirectoryAttributes } from './directory-attributes.ts';
import { attributesOf } from './user-import.ts';
import { IMPORT_COLUMNS, MULTI_VALUED, type ImportColumn, type ImportFields } from './user-import-file.ts';

/** What a connection needs: the stored directory with its bind password opened. */
export interface DirectorySettings {
  url: string;
  starttls: boolean;
  caPem: string | null;
  bindDn: string;
  bindPassword: string;
  baseDn: string;
  filter: string;
  /** the import's column names to LDAP attribute names */
  mapping: Mapping;
}

export type Mapping = Partial<Record<ImportColumn, string>>;

/** Connecting and each operation (bind, a search page) must finish within these. */
export const CONNECT_TIMEOUT_MS = 5_000;
export const OPERATION_TIMEOUT_MS = 15_000;
/** A sign-in waits at most this long for the directory, then gets the usual error. */
export const SIGN_IN_TIMEOUT_MS = 5_000;

/** The default mapping: OpenLDAP's inetOrgPerson (Active Directory: map eppn=userPrincipalName). */
export const DEFAULT_MAPPING: Mapping = {
  eppn: 'uid',
  name: 'cn',
  given_name: 'givenName',
  family_name: 'sn',
  display_name: 'displayName',
  email: 'mail',
};

/** A failure to reach or use the directory, said without anything secret. */
export class DirectoryUnavailable extends AppError {
  /** a password check: the bind with the user's password had been sent when it failed */
  readonly bindSent: boolean;
  constructor(message: string, bindSent = false) {
    super(502, message);
    this.bindSent = bindSent;
  }
}

const TLS_CODES = /CERT|SELF_SIGNED|UNABLE_TO|ALTNAME|HOSTNAME|ISSUER|EXPIRED|SIGNATURE/;

/** The directory's failure in words an operator can act on; never its arguments (a password). */
export function describeLdapError(err: unknown): string {
  const e = err as { code?: string; name?: string; message?: string };
  if (err instanceof InvalidCredentialsError) return 'the directory refused the credentials (invalid credentials)';
  if (typeof e.code === 'string' && TLS_CODES.test(e.code))
    return `the directory's certificate is not trusted (${e.code}); give its CA with --ca-file`;
  if (e.code === 'ECONNREFUSED') return 'the directory refused the connection';
  if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN') return "the directory's host name does not resolve";
  if (e.code === 'ECONNRESET' || e.code === 'EPIPE') return 'the directory closed the connection';
  if (e.name === 'TimeoutError' || /timeout|timed out/i.test(e.message ?? ''))
    return 'the directory did not answer in time';
  if (/socket|connection|closed/i.test(e.message ?? '')) return 'the connection to the directory was lost';
  const name = e.name && e.name !== 'Error' ? `${e.name}: ` : '';
  return `the directory answered with an error (${name}${(e.message ?? String(err)).split('\n')[0]!.slice(0, 200)})`;
}

function tlsOptions(settings: Pick<DirectorySettings, 'url' | 'caPem'>): ConnectionOptions {
  const host = new URL(settings.url).hostname.replace(/^\[|\]$/g, '');
  return {
    minVersion: 'TLSv1.2',
    ...(settings.caPem ? { ca: [settings.caPem] } : {}),
    ...(isIP(host) ? {} : { servername: host }),
  };
}

/** A connection, over TLS (ldaps:// or StartTLS), not yet bound. */
export async function openConnection(
  settings: Pick<DirectorySettings, 'url' | 'starttls' | 'caPem'>,
  timeoutMs = OPERATION_TIMEOUT_MS,
): Promise<Client> {
  const tls = tlsOptions(settings);
  // ldapts speaks TLS from the start whenever it is given TLS options: only for ldaps://.
  const client = new Client({
    url: settings.url,
    timeout: timeoutMs,
    connectTimeout: Math.min(CONNECT_TIMEOUT_MS, timeoutMs),
    ...(settings.url.startsWith('ldaps:') ? { tlsOptions: tls } : {}),
    strictDN: true,
  });
  if (settings.starttls) {
    try {
      await client.startTLS(tls);
    } catch (err) {
      await close(client);
      throw err;
    }
  }
  return client;
}

export async function close(client: Client): Promise<void> {
  try {
    await client.unbind();
  } catch {
    // the connection is gone already
  }
}

/** A connection bound as the service account. */
export async function serviceConnection(settings: DirectorySettings, timeoutMs = OPERATION_TIMEOUT_MS) {
  const client = await openConnection(settings, timeoutMs);
  try {
    await client.bind(settings.bindDn, settings.bindPassword);
  } catch (err) {
    await close(client);
    throw err;
  }
  return client;
}

/** The configured filter as a filter object (it was checked when the directory was added). */
export function userFilter(filter: string): Filter {
  return FilterParser.parseString(filter);
}

/** Parses an LDAP filter (RFC 4515); a message when it is not one. */
export function filterProblem(filter: string): string | undefined {
  if (!filter.startsWith('(') || !filter.endsWith(')')) return 'must be in parentheses, e.g. (objectClass=person)';
  // A parenthesis in a value is escaped (\28, \29): every one is structure, and the filter is one whole.
  let depth = 0;
  for (let i = 0; i < filter.length; i++) {
    depth += filter[i] === '(' ? 1 : filter[i] === ')' ? -1 : 0;
    if (depth < 0 || (depth === 0 && i < filter.length - 1)) return 'has unbalanced parentheses';
  }
  if (depth !== 0) return 'has unbalanced parentheses';
  try {
    FilterParser.parseString(filter);
    return undefined;
  } catch (err) {
    return `is not a valid LDAP filter (${(err as Error).message.split('\n')[0]!.slice(0, 100)})`;
  }
}

// ---- entries -----------------------------------------------------------------------------------

/** Active Directory's objectGUID (16 bytes, the first three fields little-endian) as the usual GUID string. */
export function formatGuid(bytes: Buffer): string {
  if (bytes.length !== 16) throw new Error('objectGUID must be 16 bytes');
  const hex = (from: number, to: number, reverse = false) => {
    const part = [...bytes.subarray(from, to)];
    return (reverse ? part.reverse() : part).map((b) => b.toString(16).padStart(2, '0')).join('');
  };
  return `${hex(0, 4, true)}-${hex(4, 6, true)}-${hex(6, 8, true)}-${hex(8, 10)}-${hex(10, 16)}`;
}

/** Active Directory's userAccountControl: ACCOUNTDISABLE. */
const ACCOUNT_DISABLED = 0x2;

/** What the directory says of one user. */
export interface DirectoryRecord {
  dn: string;
  externalId: string;
  eppn: string;
  attributes: DirectoryAttributes;
  disabled: boolean;
  /** modifyTimestamp or uSNChanged, for the high-water mark */
  changed?: string;
}

/** The attributes a sync asks for. */
export function requestedAttributes(mapping: Mapping): string[] {
  const mapped = Object.values(mapping).filter((a): a is string => typeof a === 'string');
  return [...new Set([...mapped, 'objectGUID', 'entryUUID', 'userAccountControl', 'modifyTimestamp', 'uSNChanged'])];
}

function values(entry: Entry, attribute: string): (string | Buffer)[] {
  const key = Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase());
  if (key === undefined) return [];
  const v = entry[key]!;
  return Array.isArray(v) ? v : [v];
}

function first(entry: Entry, attribute: string): string | undefined {
  const v = values(entry, attribute)[0];
  return v === undefined ? undefined : Buffer.isBuffer(v) ? v.toString('utf8') : v;
}

/** The entry's stable id: the mapped external_id, else objectGUID (Active Directory), else entryUUID (OpenLDAP). */
function externalIdOf(entry: Entry, mapping: Mapping): string | undefined {
  if (mapping.external_id) return first(entry, mapping.external_id)?.trim() || undefined;
  const guid = values(entry, 'objectGUID')[0];
  if (guid !== undefined) {
    const bytes = Buffer.isBuffer(guid) ? guid : Buffer.from(guid, 'binary');
    return bytes.length === 16 ? formatGuid(bytes) : undefined;
  }
  return first(entry, 'entryUUID')?.toLowerCase();
}

/** An eppn from the mapped attribute: the value as is when it has a realm, else with the organization's. */
export function eppnOf(value: string, realm: string): string {
  const v = value.trim();
  return normalizeEppn(v.includes('@') ? v : `${v}@${realm}`);
}

/** Reads one entry; a string says why it cannot be a user. */
export function readEntry(entry: Entry, mapping: Mapping, realm: string): DirectoryRecord | string {
  const externalId = externalIdOf(entry, mapping);
  if (!externalId) return 'the entry has no objectGUID, entryUUID or mapped external_id';
  const login = first(entry, mapping.eppn ?? 'uid');
  if (!login) return `the entry has no ${mapping.eppn ?? 'uid'} (mapped to eppn)`;
  const fields: ImportFields = {};
  for (const column of IMPORT_COLUMNS) {
    const attribute = mapping[column];
    if (!attribute || column === 'eppn' || column === 'external_id') continue;
    const all = values(entry, attribute).map((v) => (Buffer.isBuffer(v) ? v.toString('utf8') : v));
    // The directory is the source: an attribute the entry lacks clears the user's.
    fields[column] = MULTI_VALUED.includes(column) ? all : (all[0] ?? null);
  }
  const attributes = { ...attributesOf(fields), externalId };
  const control = Number(first(entry, 'userAccountControl') ?? '0');
  const disabled = Number.isSafeInteger(control) && (control & ACCOUNT_DISABLED) !== 0;
  const changed = first(entry, 'uSNChanged') ?? first(entry, 'modifyTimestamp');
  return { dn: entry.dn, externalId, eppn: eppnOf(login, realm), attributes, disabled, changed };
}

// ---- passwords ---------------------------------------------------------------------------------

/**
 * The entry of the person who signs in as `eppn`: searched as the service account by the mapped
 * login attribute, with the value as typed and without the realm, every value escaped by the
 * filter objects (RFC 4515), within the configured filter. Exactly one entry, or none.
 */
export async function findLoginEntry(
  client: Client,
  settings: DirectorySettings,
  eppn: string,
): Promise<DirectoryRecord | undefined> {
  const attribute = settings.mapping.eppn ?? 'uid';
  const local = eppn.slice(0, eppn.lastIndexOf('@'));
  const filter = new AndFilter({
    filters: [
      userFilter(settings.filter),
      new OrFilter({
        filters: [new EqualityFilter({ attribute, value: eppn }), new EqualityFilter({ attribute, value: local })],
      }),
    ],
  });
  const { searchEntries } = await client.search(settings.baseDn, {
    scope: 'sub',
    filter,
    sizeLimit: 2,
    attributes: requestedAttributes(settings.mapping),
    explicitBufferAttributes: ['objectGUID'],
  });
  if (searchEntries.length !== 1) return undefined;
  const realm = eppn.slice(eppn.lastIndexOf('@') + 1);
  const record = readEntry(searchEntries[0]!, settings.mapping, realm);
  return typeof record === 'string' || record.eppn !== eppn ? undefined : record;
}

export type PasswordCheck = 'valid' | 'invalid';

/**
 * Checks a password against the directory: the user's entry found by the service account, then a
 * bind as that entry with the password on a connection of its own. An empty password is refused
 * before anything is sent (a directory takes it for an anonymous bind, which succeeds). The entry
 * must be the one the user was provisioned from (`externalId`). Bounded by `timeoutMs` in all.
 */
export async function checkDirectoryPassword(
  settings: DirectorySettings,
  user: { eppn: string; externalId: string },
  password: string,
  timeoutMs = SIGN_IN_TIMEOUT_MS,
): Promise<PasswordCheck> {
  if (typeof password !== 'string' || password.length === 0) return 'invalid';
  let timer: NodeJS.Timeout | undefined;
  let finished = false;
  let bindSent = false;
  const clients: Client[] = [];
  // A connection made after the deadline passed is closed at once.
  const keep = async (client: Client) => {
    clients.push(client);
    if (finished) await close(client);
    return client;
  };
  const check = async (): Promise<PasswordCheck> => {
    const service = await keep(await serviceConnection(settings, timeoutMs));
    const entry = await findLoginEntry(service, settings, user.eppn);
    if (!entry || entry.externalId !== user.externalId || entry.disabled) return 'invalid';
    const own = await keep(await openConnection(settings, timeoutMs));
    try {
      bindSent = true;
      await own.bind(entry.dn, password);
      return 'valid';
    } catch (err) {
      if (err instanceof InvalidCredentialsError) return 'invalid';
      throw err;
    }
  };
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), timeoutMs);
  });
  try {
    return await Promise.race([check(), deadline]);
  } catch (err) {
    throw new DirectoryUnavailable(describeLdapError(err), bindSent);
  } finally {
    finished = true;
    clearTimeout(timer);
    await Promise.all(clients.map((c) => close(c)));
  }
}
