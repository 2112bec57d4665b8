// One sync of an LDAP directory into its organization (docs/ldap.md). The directory is read in
// pages; each entry's user is created, changed, renamed, disabled or enabled through the functions
// every other surface uses (provisioning: provisionUser, provisionUsers for a batch's new users,
// changeProvisionedUser; the account lifecycle: disableUser, enableUser, removeUser) with its audit
// record and events, in batches of one transaction each, so a run that stops leaves every user of
// the batches it committed complete and the rest as they were.
// The first run reads everything; later ones only what changed since the high-water mark, with a
// full run every FULL_EVERY runs, which is also when users whose entries are gone are found.
import { createHash, randomUUID } from 'node:crypto';
import { AndFilter, GreaterThanEqualsFilter, type Client, type Filter } from 'ldapts';
import type { ControlledTransaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import * as dir from '../store/directory.ts';
import { rolesOfUser } from '../store/roles.ts';
import * as repo from '../store/ldap.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { AppError, conflict, notFound } from '../errors.ts';
import { changeProvisionedUser, provisionUser, provisionUsers } from '../directory/provisioning.ts';
import { normalizeEppn } from '../directory/index.ts';
import { directoryColumns, type DirectoryColumns } from '../directory/directory-attributes.ts';
import { directorySettings, loadLdapDirectory } from '../directory/ldap-directories.ts';
import {
  close,
  describeLdapError,
  readEntry,
  requestedAttributes,
  serviceConnection,
  userFilter,
  type DirectoryRecord,
} from '../directory/ldap-client.ts';
import { disableUser, enableUser, removeUser } from '../oauth/account-lifecycle.ts';
import { emptyGroupCounts, syncLdapGroups, type GroupCounts } from './group-sync.ts';
import { recordingRefusals, Refused, requireWeaker } from '../directory/roles.ts';

/** Every FULL_EVERY-th run reads the whole directory: deletions and entries leaving the filter show only then. */
export const FULL_EVERY = 24;
export const PAGE_SIZE = 500;
/** Entries written in one transaction (each in a savepoint): few enough that other writers wait briefly. */
export const BATCH_SIZE = 100;
/** Batches a run writes at once on PostgreSQL, each on a connection of the pool. */
export const PG_CONCURRENT_BATCHES = 4;
/** A sync holds its directory this long, renewed with every page. */
const LEASE_MS = 120_000;
/** An entry changed while a run reads may carry an older time than the newest it saw: the next run looks back this far. */
const LOOK_BACK_MS = 60_000;
const MAX_REJECTIONS = 100;

export interface SyncOptions {
  dryRun?: boolean;
  /** read the whole directory even when an incremental run would do */
  full?: boolean;
  /** the periodic sync: run only if the directory's sync is still due at this time */
  dueAt?: number;
  /** told after every page */
  onProgress?(progress: { entries: number; created: number; updated: number }): void;
}

export interface SyncSummary {
  directory_id: number;
  mode: 'full' | 'incremental';
  dry_run: boolean;
  entries: number;
  created: number;
  updated: number;
  renamed: number;
  disabled: number;
  enabled: number;
  removed: number;
  unchanged: number;
  /** users whose entries are gone, left as they are (--on-missing keep) */
  kept: number;
  rejected: number;
  rejections: { dn: string; error: string }[];
  warnings: string[];
  /** the directory's groups (--groups-base-dn); null without one */
  groups: GroupCounts | null;
  duration_ms: number;
}

interface Run {
  directory: repo.LdapDirectory;
  org: dir.Organization;
  summary: SyncSummary;
  seen: Set<string>;
  write: boolean;
  change: Required<Change>;
  /** the newest modifyTimestamp / uSNChanged seen */
  newest?: string;
}

const directoryActor = (id: number): Actor => ({ type: 'provisioning', id: `ldap:${id}` });

function reject(run: Run, dn: string, error: string): void {
  run.summary.rejected++;
  if (run.summary.rejections.length < MAX_REJECTIONS) run.summary.rejections.push({ dn, error });
}

/** Only the columns that differ from the stored user. */
function changedColumns(user: dir.User, columns: DirectoryColumns): DirectoryColumns {
  const changed: DirectoryColumns = {};
  for (const [key, value] of Object.entries(columns) as [keyof DirectoryColumns, string | null][])
    if ((user[key] ?? null) !== value) (changed as Record<string, unknown>)[key] = value;
  return changed;
}

/** The user an entry not yet linked is about: an existing user of the organization with its eppn (adopted), or none. */
async function adoptable(
  store: Store,
  run: Run,
  record: DirectoryRecord,
  byEppn: Map<string, dir.User>,
): Promise<dir.User | undefined | string> {
  const user = byEppn.get(record.eppn);
  if (!user) return undefined;
  if (Number(user.org_id) !== Number(run.org.id)) return `eppn '${record.eppn}' belongs to another organization`;
  if (user.external_id !== null && user.external_id !== record.externalId)
    return `'${record.eppn}' already belongs to a user with another external id`;
  if (await repo.findLdapEntryOfUser(store.db, Number(user.id)))
    return `'${record.eppn}' already belongs to a user of another directory entry`;
  // staff accounts are the admin CLI's alone: a directory never takes one over, changed or not
  if ((await rolesOfUser(store.db, Number(user.id))).length > 0)
    return `'${record.eppn}' is a staff account: changed only with the admin CLI`;
  return user;
}

async function setDisabled(store: Store, run: Run, entry: repo.LdapEntry, user: dir.User, disabled: boolean) {
  const change = run.change;
  if (disabled && user.disabled_at === null) {
    if (run.write) await disableUser(store, user.eppn, change);
    run.summary.disabled++;
    entry.disabled_by_directory = 1;
    return true;
  }
  if (!disabled && user.disabled_at !== null && entry.disabled_by_directory === 1) {
    if (run.write) await enableUser(store, user.eppn, change);
    run.summary.enabled++;
    entry.disabled_by_directory = 0;
    return true;
  }
  // enabled meanwhile by someone else: the directory no longer holds it disabled
  if (!disabled && user.disabled_at === null && entry.disabled_by_directory === 1) entry.disabled_by_directory = 0;
  return false;
}

async function createUser(store: Store, run: Run, record: DirectoryRecord): Promise<void> {
  const columns = directoryColumns(record.attributes);
  if (!columns.name) throw new AppError(400, 'a new user needs a name (map name, or given_name and family_name)');
  run.summary.created++;
  if (!run.write) return;
  const user = await provisionUser(
    store,
    Number(run.org.id),
    { eppn: record.eppn, name: columns.name, columns },
    run.change,
  );
  const entry = { directory_id: Number(run.directory.id), external_id: record.externalId, user_id: Number(user.id) };
  const link: repo.LdapEntry = { ...entry, dn: record.dn, disabled_by_directory: 0, digest: null };
  // A user whose entry is disabled is created disabled: counted as created only.
  if (record.disabled) {
    await disableUser(store, user.eppn, run.change);
    link.disabled_by_directory = 1;
  } else link.digest = digestOf(record, Number(user.updated_at));
  await repo.saveLdapEntry(store.db, link);
}

async function updateUser(
  store: Store,
  run: Run,
  record: DirectoryRecord,
  linked: repo.LinkedUser | undefined,
  user: dir.User,
) {
  const columns = directoryColumns(record.attributes, { affiliation: user.affiliation });
  const changed = changedColumns(user, columns);
  const renamed = user.eppn !== record.eppn;
  let current = user;
  if (Object.keys(changed).length > 0 || renamed) {
    // The directory changes its people, never a staff member's account (directory/roles.ts), as SCIM.
    const at = run.change.now;
    const check = () => requireWeaker(store.db, run.change.actor, user, 'user.update', at);
    // a dry run reports the refusal without recording it
    await (run.write ? recordingRefusals(store, check) : check());
    if (run.write)
      current = await changeProvisionedUser(
        store,
        user,
        undefined,
        (now) => ({ eppn: record.eppn, columns: changedColumns(now, columns) }),
        run.change,
      );
    else current = { ...user, eppn: record.eppn };
    run.summary.updated++;
    if (renamed) run.summary.renamed++;
  }
  const link: repo.LdapEntry = linked
    ? {
        directory_id: linked.directory_id,
        external_id: linked.external_id,
        user_id: linked.user_id,
        dn: linked.dn,
        disabled_by_directory: linked.disabled_by_directory,
        digest: linked.digest,
      }
    : {
        directory_id: Number(run.directory.id),
        external_id: record.externalId,
        user_id: Number(user.id),
        dn: record.dn,
        disabled_by_directory: 0,
        digest: null,
      };
  const before = { dn: link.dn, flag: link.disabled_by_directory, digest: link.digest };
  const toggled = await setDisabled(store, run, link, current, record.disabled);
  link.dn = record.dn;
  // a disable or enable gave the user a version this run does not know: the next run compares again
  link.digest = toggled ? null : digestOf(record, Number(current.updated_at));
  if (!toggled && Object.keys(changed).length === 0 && !renamed && linked) run.summary.unchanged++;
  const moved = before.dn !== link.dn || before.flag !== link.disabled_by_directory || before.digest !== link.digest;
  if (run.write && (!linked || moved)) await repo.saveLdapEntry(store.db, link);
}

/** One entry: created, adopted, changed or left alone. Throws what only this entry gets wrong (a rejection). */
async function syncEntry(store: Store, run: Run, record: DirectoryRecord, known: Known) {
  const linked = known.linked.get(record.externalId);
  if (linked) return updateUser(store, run, record, linked, linked.user);
  const existing = await adoptable(store, run, record, known.byEppn);
  if (typeof existing === 'string') throw new AppError(400, existing);
  if (existing) return updateUser(store, run, record, undefined, existing);
  await createUser(store, run, record);
}

/** What the directory said of an entry, with the version of the user it made: equal digests, nothing to do. */
function digestOf(record: DirectoryRecord, userVersion: number): string {
  const said = [record.dn, record.eppn, record.attributes, record.disabled, userVersion];
  return createHash('sha256').update(JSON.stringify(said)).digest('base64url');
}

const isRejection = (err: unknown) => err instanceof AppError && err.status < 500;

/** What a batch reads before it writes: the users its entries provided, and the users with the eppns of the others. */
interface Known {
  linked: Map<string, repo.LinkedUser>;
  byEppn: Map<string, dir.User>;
}

async function known(db: Store['db'], run: Run, records: DirectoryRecord[]): Promise<Known> {
  const linked = await repo.findLdapEntries(
    db,
    Number(run.directory.id),
    records.map((r) => r.externalId),
  );
  const unlinked = records.filter((r) => !linked.has(r.externalId)).map((r) => r.eppn);
  const users = unlinked.length ? await repo.findUsersByEppns(db, unlinked) : [];
  return { linked, byEppn: new Map(users.map((u) => [u.eppn, u])) };
}

/** A batch's own counts, added to the run's once it is committed. */
function batchRun(run: Run): Run {
  return { ...run, summary: emptySummary(Number(run.directory.id), !run.write) };
}

function addCounts(to: SyncSummary, from: SyncSummary): void {
  for (const key of COUNTED) to[key] += from[key];
  for (const r of from.rejections) if (to.rejections.length < MAX_REJECTIONS) to.rejections.push(r);
}

const COUNTED = [
  ...['entries', 'created', 'updated', 'renamed', 'disabled', 'enabled', 'removed', 'unchanged', 'kept'],
  'rejected',
] as const;

/**
 * The entries of a batch that are new users, created together: not linked, no user with their eppn
 * (adoptable() has nothing to decide), an eppn no other entry of the batch has, not disabled (a
 * disabled entry's user is created and disabled one at a time), with a name.
 */
function newcomers(records: DirectoryRecord[], k: Known) {
  const eppns = new Map<string, number>();
  for (const r of records) {
    const eppn = normalizeEppn(r.eppn);
    eppns.set(eppn, (eppns.get(eppn) ?? 0) + 1);
  }
  const found: { record: DirectoryRecord; columns: DirectoryColumns }[] = [];
  for (const record of records) {
    if (k.linked.has(record.externalId) || k.byEppn.has(record.eppn) || record.disabled) continue;
    if (eppns.get(normalizeEppn(record.eppn))! > 1) continue;
    let columns: DirectoryColumns;
    try {
      columns = directoryColumns(record.attributes);
    } catch {
      continue; // rejected one at a time, with its message
    }
    if (columns.name) found.push({ record, columns });
  }
  return found;
}

/**
 * Creates the batch's new users as createUser does one by one (provisionUsers: the same rows, audit
 * records and events), with multi-row statements, in a savepoint: when that write fails (a user
 * written meanwhile by someone else), it is rolled back and every entry is written one at a time.
 * Returns how each entry it took was decided: created, or the error that rejects it.
 */
async function createTogether(trx: ControlledTransaction<DB>, run: Run, records: DirectoryRecord[], k: Known) {
  const outcome = new Map<DirectoryRecord, true | AppError>();
  const found = newcomers(records, k);
  if (found.length === 0) return outcome;
  const sp = await trx.savepoint('together').execute();
  try {
    const inputs = found.map(({ record, columns }) => ({ eppn: record.eppn, name: columns.name!, columns }));
    const results = await provisionUsers(sp, Number(run.org.id), inputs, run.change);
    const links: repo.LdapEntry[] = [];
    for (const [i, { record }] of found.entries()) {
      const user = results[i]!;
      outcome.set(record, user instanceof AppError ? user : true);
      if (user instanceof AppError) continue;
      const link = { directory_id: Number(run.directory.id), external_id: record.externalId, user_id: Number(user.id) };
      links.push({
        ...link,
        dn: record.dn,
        disabled_by_directory: 0,
        digest: digestOf(record, Number(user.updated_at)),
      });
    }
    await repo.saveLdapEntries(sp, links);
    await sp.releaseSavepoint('together').execute();
    return outcome;
  } catch {
    await sp.rollbackToSavepoint('together').execute();
    return new Map<DirectoryRecord, true | AppError>();
  }
}

/**
 * A batch of entries in one transaction: its new users first, together (createTogether), then each
 * other entry in a savepoint of its own: an entry that is rejected leaves nothing behind (its
 * refusal recorded, as recordingRefusals would), the others are written, each through the same
 * function (and audit record) as one at a time. Its counts reach the run when it is committed; a
 * failure of the database rolls the batch back and throws.
 */
async function syncBatch(store: Store, parent: Run, records: DirectoryRecord[]) {
  const run = batchRun(parent);
  const refuse = (record: DirectoryRecord, err: unknown) => {
    if (!isRejection(err)) throw err;
    reject(run, record.dn, (err as AppError).message);
  };
  if (!run.write) {
    const k = await known(store.db, run, records);
    for (const record of records) await syncEntry(store, run, record, k).catch((err: unknown) => refuse(record, err));
    return addCounts(parent.summary, run.summary);
  }
  const trx = await store.db.startTransaction().execute();
  try {
    const k = await known(trx, run, records);
    const together = await createTogether(trx, run, records, k);
    for (const record of records) {
      const decided = together.get(record);
      if (decided === true) run.summary.created++;
      else if (decided) refuse(record, decided);
      if (decided !== undefined) continue;
      const counts = { ...run.summary };
      const sp = await trx.savepoint('entry').execute();
      try {
        await syncEntry({ ...store, db: sp }, run, record, k);
        await sp.releaseSavepoint('entry').execute();
      } catch (err) {
        if (!isRejection(err)) throw err;
        await sp.rollbackToSavepoint('entry').execute();
        Object.assign(run.summary, counts, { rejections: run.summary.rejections });
        if (err instanceof Refused) await recordAudit(trx, err.entry);
        refuse(record, err);
      }
    }
    await trx.commit().execute();
  } catch (err) {
    await trx
      .rollback()
      .execute()
      .catch(() => {});
    throw err;
  }
  addCounts(parent.summary, run.summary);
}

/**
 * Batches written at once: on PostgreSQL each holds a connection of the pool, leaving one for the
 * rest of the process (the admin CLI's pool has two); SQLite has one connection, and one writer.
 */
function concurrency(store: Store): number {
  if (store.dialect !== 'postgres') return 1;
  const max = store.pool?.()?.max ?? 1;
  return Math.max(1, Math.min(PG_CONCURRENT_BATCHES, max - 1));
}

async function syncBatches(store: Store, run: Run, records: DirectoryRecord[]) {
  const batches: DirectoryRecord[][] = [];
  for (let i = 0; i < records.length; i += BATCH_SIZE) batches.push(records.slice(i, i + BATCH_SIZE));
  let next = 0;
  const worker = async () => {
    while (next < batches.length) await syncBatch(store, run, batches[next++]!);
  };
  const workers = Array.from({ length: Math.min(concurrency(store), batches.length) }, worker);
  // every worker settles before a failure is thrown: no batch is left writing behind the run's back
  const results = await Promise.allSettled(workers);
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
}

async function syncPage(store: Store, run: Run, entries: Parameters<typeof readEntry>[0][]) {
  const mapping = JSON.parse(run.directory.mapping) as Parameters<typeof readEntry>[1];
  const records: DirectoryRecord[] = [];
  for (const entry of entries) {
    run.summary.entries++;
    const record = readEntry(entry, mapping, run.org.realm);
    if (typeof record === 'string') {
      reject(run, entry.dn, record);
      continue;
    }
    if (run.seen.has(record.externalId)) {
      reject(run, entry.dn, `external id ${record.externalId} is also another entry's`);
      continue;
    }
    run.seen.add(record.externalId);
    if (record.changed && (run.newest === undefined || newer(record.changed, run.newest))) run.newest = record.changed;
    records.push(record);
  }
  // What the directory says as it said it last, of a user unchanged since: nothing to read or write.
  const known = await repo.findLdapDigests(
    store.db,
    Number(run.directory.id),
    records.map((r) => r.externalId),
  );
  const todo = records.filter((record) => {
    const k = known.get(record.externalId);
    const same = k !== undefined && k.digest !== null && k.digest === digestOf(record, k.updated_at);
    if (same) run.summary.unchanged++;
    return !same;
  });
  await syncBatches(store, run, todo);
}

/** uSNChanged compare as numbers, generalized times as text (same length and zone from one server). */
function newer(a: string, b: string): boolean {
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a > b;
}

/** Users of this directory whose entries a full run did not see. */
async function handleMissing(store: Store, run: Run): Promise<void> {
  const entries = await repo.listLdapEntries(store.db, Number(run.directory.id));
  const missing = entries.filter((e) => !run.seen.has(e.external_id));
  if (missing.length === 0) return;
  if (run.seen.size === 0) {
    run.summary.warnings.push(
      `the directory returned no entries: the ${missing.length} user(s) it provided were left as they are (check --base-dn and --filter)`,
    );
    return;
  }
  for (const entry of missing) {
    const user = await dir.findUserById(store.db, Number(entry.user_id));
    if (!user) continue;
    try {
      if (run.directory.on_missing === 'keep') run.summary.kept++;
      else if (run.directory.on_missing === 'remove') {
        if (run.write) await removeUser(store, { id: Number(user.id), eppn: user.eppn }, run.change);
        run.summary.removed++;
      } else if (user.disabled_at === null) {
        if (run.write) {
          await disableUser(store, user.eppn, run.change);
          await repo.saveLdapEntry(store.db, { ...entry, disabled_by_directory: 1, digest: null });
        }
        run.summary.disabled++;
      }
    } catch (err) {
      if (err instanceof AppError && err.status < 500) reject(run, entry.dn, err.message);
      else throw err;
    }
  }
}

/** Active Directory says how far it has got in its rootDSE; OpenLDAP has no such counter. */
async function highestUsn(client: Client): Promise<string | undefined> {
  const { searchEntries } = await client.search('', { scope: 'base', attributes: ['highestCommittedUSN'] });
  const value = searchEntries[0]?.highestCommittedUSN;
  const text = Array.isArray(value) ? value[0] : value;
  return typeof text === 'string' && /^\d+$/.test(text) ? text : undefined;
}

/** Generalized time (YYYYMMDDHHMMSSZ) of an instant. */
function generalizedTime(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, 'Z');
}

interface Plan {
  full: boolean;
  filter: Filter;
  /** where the next run starts, once this one completes */
  nextHighWater(run: Run): string | null;
}

function plan(d: repo.LdapDirectory, usn: string | undefined, startedAt: number, forceFull: boolean): Plan {
  const base = userFilter(d.filter);
  const mark = d.high_water;
  const kind = usn ? 'u:' : 'm:';
  const full = forceFull || mark === null || !mark.startsWith(kind) || d.runs_since_full + 1 >= FULL_EVERY;
  const filter = full
    ? base
    : new AndFilter({
        filters: [
          base,
          usn
            ? new GreaterThanEqualsFilter({ attribute: 'uSNChanged', value: String(BigInt(mark.slice(2)) + 1n) })
            : new GreaterThanEqualsFilter({ attribute: 'modifyTimestamp', value: mark.slice(2) }),
        ],
      });
  const nextHighWater = (run: Run) => {
    if (usn) return `u:${usn}`;
    const bound = generalizedTime(startedAt - LOOK_BACK_MS);
    const newest = run.newest !== undefined && run.newest < bound ? run.newest : bound;
    return run.newest === undefined && !full ? mark : `m:${newest}`;
  };
  return { full, filter, nextHighWater };
}

function emptySummary(id: number, dryRun: boolean): SyncSummary {
  return {
    directory_id: id,
    mode: 'full',
    dry_run: dryRun,
    ...{ entries: 0, created: 0, updated: 0, renamed: 0, disabled: 0, enabled: 0, removed: 0, unchanged: 0, kept: 0 },
    ...{ rejected: 0, rejections: [], warnings: [], groups: null, duration_ms: 0 },
  };
}

function counts(s: SyncSummary) {
  const { rejections: _r, warnings: _w, ...rest } = s;
  return rest;
}

async function readDirectory(
  store: Store,
  keys: Keyring,
  run: Run,
  options: SyncOptions,
  lease: () => Promise<void>,
  startedAt: number,
) {
  const settings = directorySettings(keys, run.directory);
  const client = await serviceConnection(settings);
  try {
    const usn = await highestUsn(client);
    const p = plan(run.directory, usn, startedAt, options.full === true);
    run.summary.mode = p.full ? 'full' : 'incremental';
    const pages = client.searchPaginated(settings.baseDn, {
      scope: 'sub',
      filter: p.filter,
      attributes: requestedAttributes(settings.mapping),
      explicitBufferAttributes: ['objectGUID'],
      paged: { pageSize: PAGE_SIZE },
    });
    for await (const page of pages) {
      await lease();
      await syncPage(store, run, page.searchEntries);
      options.onProgress?.({
        entries: run.summary.entries,
        created: run.summary.created,
        updated: run.summary.updated,
      });
    }
    if (p.full) await handleMissing(store, run);
    if (run.directory.groups_base_dn !== null) {
      const counts = (run.summary.groups = emptyGroupCounts());
      const groups = {
        ...{ directory: run.directory, orgId: Number(run.org.id), realm: run.org.realm },
        ...{ write: run.write, change: run.change, counts },
        reject: (dn: string, error: string) => reject(run, dn, error),
        warn: (message: string) => void run.summary.warnings.push(message),
      };
      await syncLdapGroups(store, client, groups, lease);
    }
    return p;
  } finally {
    await close(client);
  }
}

/**
 * Syncs the directory's users into its organization; see docs/ldap.md. A run that stops (the
 * directory gone, the database) is recorded as failed with what it did, and throws; the high-water
 * mark stays where it was, so the next run reads again what this one may have missed.
 */
export async function syncLdapDirectory(
  store: Store,
  keys: Keyring,
  id: number,
  options: SyncOptions = {},
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<SyncSummary> {
  const directory = await loadLdapDirectory(store, id);
  const org = await dir.findOrganization(store.db, Number(directory.org_id));
  if (!org) throw notFound(`organization ${directory.org_id} does not exist`);
  const dryRun = options.dryRun === true;
  const owner = randomUUID();
  if (!dryRun && !(await repo.claimLdapLease(store.db, id, owner, Date.now(), Date.now() + LEASE_MS, options.dueAt)))
    throw conflict(`a sync of LDAP directory ${id} is already running`);
  const run: Run = {
    ...{ directory, org, summary: emptySummary(id, dryRun), seen: new Set<string>(), write: !dryRun },
    change: { actor: directoryActor(id), now },
  };
  const lease = async () => {
    run.change.now = Date.now();
    if (!dryRun && !(await repo.renewLdapLease(store.db, id, owner, Date.now() + LEASE_MS)))
      throw new AppError(409, 'the sync lost its hold on the directory to another instance');
  };
  const startedAt = Date.now();
  try {
    const p = await readDirectory(store, keys, run, options, lease, startedAt);
    run.summary.duration_ms = Date.now() - startedAt;
    if (!dryRun) await finish(store, run, actor, p.nextHighWater(run), p.full);
    return run.summary;
  } catch (err) {
    run.summary.duration_ms = Date.now() - startedAt;
    const reason = err instanceof AppError ? err.message : describeLdapError(err);
    if (!dryRun) await failed(store, run, actor, reason).catch(() => {});
    throw new AppError(
      502,
      `the sync of LDAP directory ${id} stopped after ${run.summary.entries} entries: ${reason}; ` +
        'the users written before stay, and the next run completes it',
    );
  } finally {
    if (!dryRun) await repo.releaseLdapLease(store.db, id, owner).catch(() => {});
  }
}

async function finish(store: Store, run: Run, actor: Actor, highWater: string | null, full: boolean) {
  const id = Number(run.directory.id);
  const at = Date.now();
  await store.db.transaction().execute(async (trx) => {
    await repo.recordLdapSync(trx, id, {
      at,
      status: 'ok',
      summary: JSON.stringify(counts(run.summary)),
      highWater,
      full,
    });
    const details = {
      ...counts(run.summary),
      ...(run.summary.warnings.length ? { warnings: run.summary.warnings } : {}),
    };
    await recordAudit(trx, {
      action: 'ldap.sync',
      actor,
      at,
      subject: `ldap:${id}`,
      orgId: Number(run.org.id),
      details,
    });
  });
}

async function failed(store: Store, run: Run, actor: Actor, reason: string) {
  const id = Number(run.directory.id);
  const at = Date.now();
  const details = { ...counts(run.summary), failed: true, error: reason };
  await store.db.transaction().execute(async (trx) => {
    await repo.recordLdapSync(trx, id, { at, status: 'failed', summary: JSON.stringify(details) });
    await recordAudit(trx, {
      action: 'ldap.sync',
      actor,
      at,
      subject: `ldap:${id}`,
      orgId: Number(run.org.id),
      details,
    });
  });
}
