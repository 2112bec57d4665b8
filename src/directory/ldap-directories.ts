// An organization's LDAP directories (docs/ldap.md): every option checked before anything is
// stored, the service account's password sealed under IDP_SECRET (with the directory's id as
// associated data) and never shown again, each change one transaction with its audit record.
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import type { Keyring } from '../crypto.ts';
import { open, seal } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import { findOrganization } from '../store/directory.ts';
import { rolesOfUser } from '../store/roles.ts';
import * as repo from '../store/ldap.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, notFound } from '../errors.ts';
import { iso } from '../time.ts';
import {
  checkDirectoryPassword,
  DEFAULT_MAPPING,
  DirectoryUnavailable,
  filterProblem,
  type DirectorySettings,
  type Mapping,
} from './ldap-client.ts';
import { IMPORT_COLUMNS, type ImportColumn } from './user-import-file.ts';
import { createHashingQueue, type HashingLimits, type HashingQueue } from './hashing-queue.ts';

export const ON_MISSING = ['disable', 'remove', 'keep'] as const;
export type OnMissing = (typeof ON_MISSING)[number];

export interface LdapDirectoryInput {
  orgId: number;
  url: string;
  starttls?: boolean;
  /** the CA certificates, PEM */
  caPem?: string;
  bindDn: string;
  bindPassword: string;
  baseDn: string;
  filter?: string;
  /** `column=attribute` pairs */
  map?: string[];
  groupsBaseDn?: string;
  syncEveryMs?: number;
  onMissing?: string;
  passwordCheck?: boolean;
}

const CONTROL = /[\u0000-\u001f\u007f]/;
const ATTRIBUTE = /^(?:[A-Za-z][A-Za-z0-9-]{0,63}|\d+(?:\.\d+)+)$/;
const RDN_TYPE = /^\s*(?:[A-Za-z][A-Za-z0-9-]*|\d+(?:\.\d+)+)\s*=/;
export const MIN_SYNC_EVERY_MS = 60_000;
export const MAX_SYNC_EVERY_MS = 7 * 86_400_000;

/** Roughly RFC 4514: attribute=value pairs separated by commas (an escaped comma is a value's). */
export function dnProblem(dn: string): string | undefined {
  if (dn.length === 0 || dn.length > 1024 || CONTROL.test(dn)) return 'must be 1-1024 characters, one line';
  const parts = dn.split(/(?<!\\),/);
  const bad = parts.find((p) => !RDN_TYPE.test(p) || p.slice(p.indexOf('=') + 1).trim() === '');
  if (bad !== undefined) return `is not a distinguished name ('${bad.slice(0, 40)}' is not attribute=value)`;
  return undefined;
}

function checkDn(name: string, dn: string): string {
  const problem = dnProblem(dn.trim());
  if (problem) throw badRequest(`--${name} ${problem}`);
  return dn.trim();
}

const LOOPBACK = (host: string) => host === 'localhost' || host === '::1' || /^127\./.test(host);

/** ldaps://, or ldap:// with StartTLS; plain ldap:// only to a directory on this host. */
export function checkUrl(raw: string, starttls: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('--url must be an ldaps:// or ldap:// URL, e.g. ldaps://dc1.example.org');
  }
  if (url.protocol !== 'ldaps:' && url.protocol !== 'ldap:')
    throw badRequest(`--url must be ldaps:// or ldap:// (not ${url.protocol.replace(/:$/, '')})`);
  if (!url.hostname) throw badRequest('--url has no host');
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '' && url.pathname !== '/'))
    throw badRequest('--url is the scheme, host and port only (the base DN is --base-dn)');
  if (starttls && url.protocol === 'ldaps:')
    throw badRequest('--starttls is for ldap:// URLs (ldaps:// is TLS already)');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (url.protocol === 'ldap:' && !starttls && !LOOPBACK(host))
    throw badRequest(
      '--url ldap:// would send passwords in the clear: use ldaps://, or --starttls (plain ldap:// only to this host)',
    );
  if (!isIP(host) && !/^[a-z0-9.-]{1,253}$/i.test(host)) throw badRequest('--url has an invalid host name');
  return `${url.protocol}//${url.host}`;
}

/** The PEM's certificates, each parsed: a file that is not certificates is refused now, not at the first sync. */
export function checkCaPem(pem: string): string {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw badRequest('--ca-file holds no PEM certificate');
  for (const block of blocks) {
    try {
      new X509Certificate(block);
    } catch {
      throw badRequest('--ca-file holds a certificate that cannot be read');
    }
  }
  return `${blocks.join('\n')}\n`;
}

/** `column=attribute` pairs over the default mapping; columns are the import's (docs/user-import.md). */
export function parseMapping(pairs: string[] = []): Mapping {
  const mapping: Mapping = { ...DEFAULT_MAPPING };
  const given = new Set<string>();
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    const column = pair.slice(0, at).trim().toLowerCase();
    const attribute = pair.slice(at + 1).trim();
    if (at < 1 || !(IMPORT_COLUMNS as readonly string[]).includes(column))
      throw badRequest(
        `--map '${pair.slice(0, 60)}' must be <column>=<ldap attribute>, a column of ${IMPORT_COLUMNS.join(', ')}`,
      );
    if (given.has(column)) throw badRequest(`--map ${column} is given twice`);
    if (!ATTRIBUTE.test(attribute))
      throw badRequest(`--map ${column}: '${attribute.slice(0, 60)}' is not an LDAP attribute name`);
    given.add(column);
    // A mapped given or family name without a mapped name composes the name from them.
    if ((column === 'given_name' || column === 'family_name') && !given.has('name')) delete mapping.name;
    mapping[column as ImportColumn] = attribute;
  }
  if (given.has('name') && !mapping.name) throw badRequest('--map name needs an attribute');
  return mapping;
}

function checkInput(input: LdapDirectoryInput) {
  const starttls = input.starttls === true;
  const filter = (input.filter ?? '(objectClass=person)').trim();
  const problem = filterProblem(filter);
  if (problem) throw badRequest(`--filter ${problem}`);
  if (filter.length > 2000) throw badRequest('--filter is too long (at most 2000 characters)');
  if (!input.bindPassword) throw badRequest('the bind password is empty (give it on standard input)');
  if (input.bindPassword.length > 1024 || /[\r\n]/.test(input.bindPassword))
    throw badRequest('the bind password must be one line of at most 1024 characters');
  const onMissing = input.onMissing ?? 'disable';
  if (!(ON_MISSING as readonly string[]).includes(onMissing))
    throw badRequest(`--on-missing must be one of ${ON_MISSING.join(', ')}`);
  const every = input.syncEveryMs;
  if (every !== undefined && (every < MIN_SYNC_EVERY_MS || every > MAX_SYNC_EVERY_MS))
    throw badRequest('--sync-every must be between 1m and 7d');
  return {
    url: checkUrl(input.url.trim(), starttls),
    starttls,
    caPem: input.caPem === undefined ? null : checkCaPem(input.caPem),
    bindDn: checkDn('bind-dn', input.bindDn),
    baseDn: checkDn('base-dn', input.baseDn),
    groupsBaseDn: input.groupsBaseDn === undefined ? null : checkDn('groups-base-dn', input.groupsBaseDn),
    filter,
    mapping: parseMapping(input.map),
    onMissing,
    syncEveryMs: every ?? null,
  };
}

export const bindPasswordAad = (id: number) => `ldap-bind-password:${id}`;
const aad = bindPasswordAad;

/** Adds a directory to the organization; its bind password is sealed and never shown. */
export async function addLdapDirectory(
  store: Store,
  keys: Keyring,
  input: LdapDirectoryInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<LdapDirectoryView> {
  const checked = checkInput(input);
  return store.db.transaction().execute(async (trx) => {
    if (!(await findOrganization(trx, input.orgId))) throw notFound(`organization ${input.orgId} does not exist`);
    const id = await repo.insertLdapDirectory(trx, {
      org_id: input.orgId,
      url: checked.url,
      starttls: checked.starttls ? 1 : 0,
      ca_pem: checked.caPem,
      bind_dn: checked.bindDn,
      bind_password: '',
      base_dn: checked.baseDn,
      filter: checked.filter,
      mapping: JSON.stringify(checked.mapping),
      groups_base_dn: checked.groupsBaseDn,
      sync_every_ms: checked.syncEveryMs,
      on_missing: checked.onMissing,
      password_check: input.passwordCheck ? 1 : 0,
      created_at: now,
      created_by: `${actor.type}:${actor.id ?? ''}`,
      runs_since_full: 0,
    });
    await repo.setLdapBindPassword(trx, id, seal(keys.directorySecrets, Buffer.from(input.bindPassword), aad(id)));
    const details = { id, url: checked.url, base_dn: checked.baseDn, password_check: input.passwordCheck === true };
    await recordAudit(trx, { action: 'ldap.add', actor, at: now, subject: `ldap:${id}`, orgId: input.orgId, details });
    return directoryView((await repo.findLdapDirectory(trx, id))!);
  });
}

export interface LdapDirectoryView extends Record<string, unknown> {
  id: number;
  org_id: number;
  url: string;
  starttls: boolean;
  ca: boolean;
  bind_dn: string;
  base_dn: string;
  filter: string;
  mapping: Mapping;
  groups_base_dn: string | null;
  sync_every: string | null;
  on_missing: string;
  password_check: boolean;
  created_at: string;
  last_sync_at: string | null;
  last_sync_status: string | null;
  last_sync: unknown;
  last_full_at: string | null;
}

function duration(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const)
    if (ms % size === 0) return `${ms / size}${unit}`;
  return `${Math.round(ms / 1000)}s`;
}

/** What an operator sees of a directory: never its bind password. */
export function directoryView(d: repo.LdapDirectory): LdapDirectoryView {
  return {
    id: Number(d.id),
    org_id: Number(d.org_id),
    url: d.url,
    starttls: d.starttls === 1,
    ca: d.ca_pem !== null,
    bind_dn: d.bind_dn,
    base_dn: d.base_dn,
    filter: d.filter,
    mapping: JSON.parse(d.mapping) as Mapping,
    groups_base_dn: d.groups_base_dn,
    sync_every: d.sync_every_ms === null ? null : duration(Number(d.sync_every_ms)),
    on_missing: d.on_missing,
    password_check: d.password_check === 1,
    created_at: iso(Number(d.created_at)),
    last_sync_at: d.last_sync_at === null ? null : iso(Number(d.last_sync_at)),
    last_sync_status: d.last_sync_status,
    last_sync: d.last_sync_summary === null ? null : (JSON.parse(d.last_sync_summary) as unknown),
    last_full_at: d.last_full_at === null ? null : iso(Number(d.last_full_at)),
  };
}

export async function loadLdapDirectory(store: Store, id: number): Promise<repo.LdapDirectory> {
  const d = await repo.findLdapDirectory(store.db, id);
  if (!d) throw notFound(`LDAP directory ${id} does not exist`);
  return d;
}

export async function listLdapDirectories(store: Store, orgId?: number): Promise<LdapDirectoryView[]> {
  if (orgId !== undefined && !(await findOrganization(store.db, orgId)))
    throw notFound(`organization ${orgId} does not exist`);
  return (await repo.listLdapDirectories(store.db, orgId)).map(directoryView);
}

/** The stored directory with its bind password opened, for a connection. */
export function directorySettings(keys: Keyring, d: repo.LdapDirectory): DirectorySettings {
  const password = open(keys.directorySecrets, d.bind_password, aad(Number(d.id)));
  if (!password) throw badRequest(`LDAP directory ${d.id}: its bind password cannot be opened (another IDP_SECRET?)`);
  return {
    url: d.url,
    starttls: d.starttls === 1,
    caPem: d.ca_pem,
    bindDn: d.bind_dn,
    bindPassword: password.toString('utf8'),
    baseDn: d.base_dn,
    filter: d.filter,
    mapping: JSON.parse(d.mapping) as Mapping,
  };
}

/**
 * Removes a directory: its users stay as they are (they are the organization's), no longer synced,
 * and sign in with their directory password no more.
 */
export async function removeLdapDirectory(store: Store, id: number, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  return store.db.transaction().execute(async (trx) => {
    const d = await repo.findLdapDirectory(trx, id);
    if (!d) throw notFound(`LDAP directory ${id} does not exist`);
    const users = await repo.countLdapEntries(trx, id);
    await repo.deleteLdapDirectory(trx, id);
    const details = { id, url: d.url, users };
    const orgId = Number(d.org_id);
    await recordAudit(trx, { action: 'ldap.remove', actor, at: now, subject: `ldap:${id}`, orgId, details });
    return { id, org_id: orgId, url: d.url, users };
  });
}

/**
 * `unavailable`: the directory failed before the bind with the password was sent (nothing was
 * tried); `unanswered`: the bind was sent and no answer came in time (the directory may have
 * checked it).
 */
export type DirectoryPasswordVerdict = 'valid' | 'invalid' | 'unavailable' | 'unanswered' | 'not-applicable';

/** Per directory and process: checks at once, checks that may wait, and for how long. */
const DEFAULT_CHECK_LIMITS: HashingLimits = { concurrency: 8, maxWaiting: 16, maxWaitMs: 2_000 };
let checkLimits = DEFAULT_CHECK_LIMITS;
const gates = new Map<number, HashingQueue>();

/** Sets the bound on password checks at once per directory (LDAP_PASSWORD_CHECK_CONCURRENCY, _QUEUE). */
export function limitDirectoryPasswordChecks(limits: Partial<HashingLimits>): void {
  checkLimits = { ...DEFAULT_CHECK_LIMITS, ...limits };
  gates.clear();
}

function gateOf(directoryId: number): HashingQueue {
  let gate = gates.get(directoryId);
  if (!gate) gates.set(directoryId, (gate = createHashingQueue(checkLimits)));
  return gate;
}

/**
 * A sign-in's password checked against the directory the user came from, when they have no
 * password of their own and that directory checks passwords (docs/ldap.md). The password is
 * never stored: it goes to the directory in a bind and nowhere else. An empty one is refused
 * here, before any connection (a directory takes it for an anonymous bind, which succeeds).
 */
export async function checkPasswordWithDirectory(
  store: Store,
  keys: Keyring,
  user: { id: number; eppn: string; org_id: number; password_hash: string | null },
  password: string,
): Promise<DirectoryPasswordVerdict> {
  if (user.password_hash !== null) return 'not-applicable';
  const entry = await repo.findLdapEntryOfUser(store.db, Number(user.id));
  if (!entry) return 'not-applicable';
  const d = await repo.findLdapDirectory(store.db, Number(entry.directory_id));
  if (!d || d.password_check !== 1 || Number(d.org_id) !== Number(user.org_id)) return 'not-applicable';
  // staff sign in with what the service itself holds: whoever controls a directory entry (a
  // directory administrator, a password reset there) must not get a staff account's sign-in
  if ((await rolesOfUser(store.db, Number(user.id))).length > 0) return 'not-applicable';
  if (typeof password !== 'string' || password.length === 0) return 'invalid';
  const settings = directorySettings(keys, d);
  // a bounded number at once per directory, a few more waiting a short while; beyond, 503 (busy())
  return gateOf(Number(d.id)).run(async () => {
    try {
      return await checkDirectoryPassword(settings, { eppn: user.eppn, externalId: entry.external_id }, password);
    } catch (err) {
      if (err instanceof DirectoryUnavailable) return err.bindSent ? 'unanswered' : 'unavailable';
      throw err;
    }
  });
}
