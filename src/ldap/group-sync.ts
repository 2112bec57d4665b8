// The groups of an LDAP directory (docs/ldap.md, "Groups"): every group entry under the directory's
// groups base DN (groupOfNames, groupOfUniqueNames, posixGroup; Active Directory's group) becomes
// a group of the organization, with the members the directory names that are users it provides.
// Groups are created, changed and removed through the functions SCIM uses (addGroup, replaceGroup,
// removeGroup), each its own transaction with its audit record; a group is known by its entry's
// objectGUID or entryUUID, so a renamed group stays the same group.
import type { Client, Entry } from 'ldapts';
import { OrFilter, EqualityFilter } from 'ldapts';
import type { Store } from '../store/index.ts';
import * as repo from '../store/ldap.ts';
import * as prov from '../store/provisioning.ts';
import { AppError } from '../errors.ts';
import type { Change } from '../audit/index.ts';
import { addGroup, MAX_GROUP_MEMBERS, removeGroup, replaceGroup } from '../directory/provisioning.ts';
import { eppnOf, formatGuid } from '../directory/ldap-client.ts';

export const GROUP_CLASSES = ['groupOfNames', 'groupOfUniqueNames', 'posixGroup', 'group'] as const;
const GROUP_ATTRIBUTES = ['cn', 'displayName', 'member', 'uniqueMember', 'memberUid', 'objectGUID', 'entryUUID'];
const PAGE_SIZE = 500;

export interface GroupCounts {
  /** group entries read */
  entries: number;
  created: number;
  updated: number;
  removed: number;
  unchanged: number;
  /** groups whose entries are gone, left as they are (--on-missing keep) */
  kept: number;
  /** member values that name no user this directory provides (another group, an entry outside the users' base DN or filter) */
  unresolved: number;
}

export const emptyGroupCounts = (): GroupCounts => ({
  ...{ entries: 0, created: 0, updated: 0, removed: 0, unchanged: 0, kept: 0, unresolved: 0 },
});

export interface GroupRun {
  directory: repo.LdapDirectory;
  orgId: number;
  realm: string;
  write: boolean;
  change: Required<Change>;
  counts: GroupCounts;
  reject(dn: string, error: string): void;
  warn(message: string): void;
}

/** What the directory says of one group. */
interface GroupRecord {
  dn: string;
  externalId: string;
  name: string;
  /** member DNs (member, uniqueMember), normalized */
  dns: string[];
  /** posixGroup's memberUid values */
  uids: string[];
}

function values(entry: Entry, attribute: string): (string | Buffer)[] {
  const key = Object.keys(entry).find((k) => k.toLowerCase() === attribute.toLowerCase());
  if (key === undefined) return [];
  const v = entry[key]!;
  return Array.isArray(v) ? v : [v];
}

const text = (v: string | Buffer) => (Buffer.isBuffer(v) ? v.toString('utf8') : v);

/** A DN as this sync compares them: attribute names and values in lower case, no spaces around separators. */
export function normalizeDn(dn: string): string {
  return dn
    .split(/(?<!\\),/)
    .map((rdn) =>
      rdn
        .split(/(?<!\\)=/)
        .map((p) => p.trim())
        .join('='),
    )
    .join(',')
    .toLowerCase();
}

function readGroup(entry: Entry): GroupRecord | string {
  const guid = values(entry, 'objectGUID')[0];
  const uuid = values(entry, 'entryUUID')[0];
  const bytes = guid === undefined ? undefined : Buffer.isBuffer(guid) ? guid : Buffer.from(guid, 'binary');
  const externalId =
    bytes?.length === 16 ? formatGuid(bytes) : uuid === undefined ? undefined : text(uuid).toLowerCase();
  if (!externalId) return 'the group entry has no objectGUID or entryUUID';
  const name = text(values(entry, 'displayName')[0] ?? values(entry, 'cn')[0] ?? '').trim();
  if (!name) return 'the group entry has no cn or displayName';
  if (name.length > 200) return 'the group name is longer than 200 characters';
  // uniqueMember may carry an optional UID after '#' (RFC 4519's nameAndOptionalUID)
  const dns = [...values(entry, 'member'), ...values(entry, 'uniqueMember')].map((v) =>
    normalizeDn(text(v).replace(/#'[01]*'B$/, '')),
  );
  const uids = values(entry, 'memberUid').map((v) => text(v).trim());
  return { dn: entry.dn, externalId, name, dns, uids };
}

/** Every group entry under the groups base DN, page by page. */
async function* groupEntries(client: Client, baseDn: string, lease: () => Promise<void>) {
  const filter = new OrFilter({
    filters: GROUP_CLASSES.map((c) => new EqualityFilter({ attribute: 'objectClass', value: c })),
  });
  const pages = client.searchPaginated(baseDn, {
    scope: 'sub',
    filter,
    attributes: GROUP_ATTRIBUTES,
    explicitBufferAttributes: ['objectGUID'],
    paged: { pageSize: PAGE_SIZE },
  });
  for await (const page of pages) {
    await lease();
    yield* page.searchEntries;
  }
}

/** The directory's users by what a group names them by: their entry's DN, their uid (eppn). */
async function memberIndex(store: Store, directoryId: number) {
  const byDn = new Map<string, string>();
  const byEppn = new Map<string, string>();
  for (const m of await repo.listLdapMembers(store.db, directoryId)) {
    byDn.set(normalizeDn(m.dn), m.sub);
    byEppn.set(m.eppn, m.sub);
  }
  return { byDn, byEppn };
}

type Linked = Awaited<ReturnType<typeof repo.listLdapGroups>>[number];

/** The group's members as subs; what names no user of this directory is counted. */
function resolve(run: GroupRun, record: GroupRecord, index: Awaited<ReturnType<typeof memberIndex>>): Set<string> {
  const subs = new Set<string>();
  for (const dn of record.dns) {
    const sub = index.byDn.get(dn);
    if (sub) subs.add(sub);
    else run.counts.unresolved++;
  }
  for (const uid of record.uids) {
    let sub: string | undefined;
    try {
      sub = index.byEppn.get(eppnOf(uid, run.realm));
    } catch {
      sub = undefined;
    }
    if (sub) subs.add(sub);
    else run.counts.unresolved++;
  }
  return subs;
}

async function syncGroup(
  store: Store,
  run: GroupRun,
  record: GroupRecord,
  subs: Set<string>,
  linked: Linked | undefined,
): Promise<void> {
  if (subs.size > MAX_GROUP_MEMBERS)
    throw new AppError(400, `the group has more than ${MAX_GROUP_MEMBERS} members this directory provides`);
  const directoryId = Number(run.directory.id);
  let group: prov.Group | undefined = linked;
  if (!group) {
    // a group with this entry's id not (or no longer) linked: a run that stopped between creating and linking it
    const existing = await prov.findGroupByExternalId(store.db, run.orgId, record.externalId);
    if (existing && (await repo.findLdapGroupOfGroup(store.db, existing.id)))
      throw new AppError(409, `a group of another directory has the external id ${record.externalId}`);
    group = existing;
  }
  if (!group) {
    run.counts.created++;
    if (!run.write) return;
    const members = [...subs].map((sub) => ({ sub, role: 'member' }));
    const input = { displayName: record.name, externalId: record.externalId, type: 'other', members };
    const added = await addGroup(store, run.orgId, input, run.change);
    await repo.saveLdapGroup(store.db, {
      directory_id: directoryId,
      external_id: record.externalId,
      group_id: added.id,
      dn: record.dn,
    });
    return;
  }
  const current = await prov.listMembers(store.db, [group.id]);
  const roles = new Map(current.map((m) => [m.sub, m.role]));
  const same =
    group.display_name === record.name &&
    group.external_id === record.externalId &&
    current.length === subs.size &&
    current.every((m) => subs.has(m.sub));
  if (same) run.counts.unchanged++;
  else {
    run.counts.updated++;
    if (run.write) {
      // who stays keeps the role they have (SCIM may have given one); who comes is a member
      const members = [...subs].map((sub) => ({ sub, role: roles.get(sub) ?? 'member' }));
      const input = { displayName: record.name, externalId: record.externalId, type: group.type, members };
      await replaceGroup(store, group, undefined, input, run.change);
    }
  }
  if (run.write && (!linked || linked.ldap_dn !== record.dn))
    await repo.saveLdapGroup(store.db, {
      directory_id: directoryId,
      external_id: record.externalId,
      group_id: group.id,
      dn: record.dn,
    });
}

/** Groups of this directory whose entries the read did not find: removed, or kept as --on-missing says. */
async function handleMissingGroups(store: Store, run: GroupRun, linked: Linked[], seen: Set<string>) {
  const missing = linked.filter((g) => !seen.has(g.ldap_external_id));
  if (missing.length === 0) return;
  if (seen.size === 0) {
    run.warn(
      `the directory returned no groups: the ${missing.length} group(s) it provided were left as they are (check --groups-base-dn)`,
    );
    return;
  }
  for (const g of missing) {
    if (run.directory.on_missing === 'keep') {
      run.counts.kept++;
      continue;
    }
    run.counts.removed++;
    if (run.write) await removeGroup(store, g, undefined, run.change);
  }
}

/**
 * Syncs the groups under the directory's groups base DN, after its users (whose DNs the members
 * name). Every run reads every group: a group's members depend on users any run may have created.
 */
export async function syncLdapGroups(store: Store, client: Client, run: GroupRun, lease: () => Promise<void>) {
  const baseDn = run.directory.groups_base_dn;
  if (baseDn === null) return;
  const directoryId = Number(run.directory.id);
  const index = await memberIndex(store, directoryId);
  const linked = await repo.listLdapGroups(store.db, directoryId);
  const byExternalId = new Map(linked.map((g) => [g.ldap_external_id, g]));
  const seen = new Set<string>();
  for await (const entry of groupEntries(client, baseDn, lease)) {
    run.counts.entries++;
    const record = readGroup(entry);
    if (typeof record === 'string') {
      run.reject(entry.dn, record);
      continue;
    }
    if (seen.has(record.externalId)) {
      run.reject(entry.dn, `external id ${record.externalId} is also another group's`);
      continue;
    }
    seen.add(record.externalId);
    const counts = { ...run.counts };
    try {
      await syncGroup(store, run, record, resolve(run, record, index), byExternalId.get(record.externalId));
    } catch (err) {
      if (!(err instanceof AppError) || err.status >= 500) throw err;
      Object.assign(run.counts, { ...counts, unresolved: run.counts.unresolved });
      run.reject(entry.dn, err.message);
    }
  }
  await handleMissingGroups(store, run, linked, seen);
}
