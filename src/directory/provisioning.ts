// Provisioning from an organization's directory (SCIM): its provisioning tokens, users created and
// changed with their directory attributes, and groups with their members. Each change is one
// transaction with its audit record; users are created through addUser and their lifecycle goes
// through src/oauth/account-lifecycle.ts, as from every other surface.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Store } from '../store/index.ts';
import { isUniqueViolation, transact } from '../store/index.ts';
import * as dir from '../store/directory.ts';
import * as prov from '../store/provisioning.ts';
import { publish } from '../store/invalidation.ts';
import { recordAudit, recordAudits, SYSTEM, type Change } from '../audit/index.ts';
import { AppError, badRequest, conflict, notFound } from '../errors.ts';
import { iso } from '../time.ts';
import { addUser, checkNewUser, importPasswordHash, newUserRow, userAddedAudit, type NewUser } from './index.ts';
import { findImportMatches } from '../store/user-import.ts';
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { changedFields, type DirectoryColumns } from './directory-attributes.ts';

// ---- provisioning tokens -----------------------------------------------------------------------

const TOKEN_PREFIX = 'scim_';
/** A token is looked up by its SHA-256: 256 random bits need no slow hash, and a lookup by hash compares nothing in the clear. */
export const tokenHash = (token: string) => createHash('sha256').update(token).digest('base64url');
export const isProvisioningToken = (token: string) => token.startsWith(TOKEN_PREFIX);

export interface ScimTokenView extends Record<string, unknown> {
  id: number;
  org_id: number;
  name: string;
  created_at: string;
  created_by: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

const view = (t: prov.ScimToken): ScimTokenView => ({
  id: t.id,
  org_id: t.org_id,
  name: t.name,
  created_at: iso(t.created_at),
  created_by: t.created_by,
  last_used_at: t.last_used_at === null ? null : iso(t.last_used_at),
  revoked_at: t.revoked_at === null ? null : iso(t.revoked_at),
});

/** Makes a provisioning token for the organization; the token is in the answer only. */
export async function createScimToken(
  store: Store,
  orgId: number,
  name: string | undefined,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ id: number; token: string }> {
  const label = (name ?? 'SCIM').trim();
  if (!label || label.length > 100 || /[\u0000-\u001f\u007f]/.test(label))
    throw badRequest('name must be 1-100 characters, one line');
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  return store.db.transaction().execute(async (trx) => {
    if (!(await dir.findOrganization(trx, orgId))) throw notFound(`organization ${orgId} does not exist`);
    const row = await prov.insertScimToken(trx, {
      org_id: orgId,
      name: label,
      token_hash: tokenHash(token),
      created_at: now,
      created_by: `${actor.type}:${actor.id ?? ''}`,
      last_used_at: null,
      revoked_at: null,
    });
    const details = { id: row.id, name: label };
    await recordAudit(trx, {
      action: 'scim_token.create',
      actor,
      at: now,
      subject: `scim-token:${row.id}`,
      orgId,
      details,
    });
    return { id: row.id, token };
  });
}

export async function listScimTokens(store: Store, orgId: number): Promise<ScimTokenView[]> {
  if (!(await dir.findOrganization(store.db, orgId))) throw notFound(`organization ${orgId} does not exist`);
  return (await prov.listScimTokens(store.db, orgId)).map(view);
}

export async function revokeScimToken(store: Store, id: number, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  await store.db.transaction().execute(async (trx) => {
    const token = await prov.findScimToken(trx, id);
    if (!token) throw notFound(`provisioning token ${id} does not exist`);
    if (!(await prov.revokeScimToken(trx, id, now))) throw conflict(`provisioning token ${id} is already revoked`);
    const entry = { actor, at: now, subject: `scim-token:${id}`, orgId: token.org_id };
    await recordAudit(trx, { action: 'scim_token.revoke', ...entry });
  });
}

const TOUCH_EVERY_MS = 60_000;

/** The organization of a usable provisioning token, or undefined; records its use at most once a minute. */
export async function resolveScimToken(store: Store, token: string, now: number) {
  const row = await prov.findScimTokenByHash(store.db, tokenHash(token));
  if (!row || row.revoked_at !== null) return undefined;
  if (row.last_used_at === null || row.last_used_at < now - TOUCH_EVERY_MS)
    await prov.touchScimToken(store.db, row.id, now, TOUCH_EVERY_MS);
  return row;
}

// ---- users -------------------------------------------------------------------------------------

async function externalIdFree(store: Store, orgId: number, externalId: string | null | undefined, userId?: number) {
  if (!externalId) return;
  const other = await prov.findUserByExternalId(store.db, orgId, externalId);
  if (other && other.id !== userId) throw conflict(`externalId '${externalId.slice(0, 80)}' already belongs to a user`);
}

/**
 * The one writer of directory attributes: the changed columns, a new eppn (a rename: sub and
 * everything else stay, as when an import renames a user), the invalidation and the audit record.
 * A changed e-mail address is unverified, as every other writer of it has it (setUserAttributes,
 * the import). In the caller's transaction.
 */
async function writeDirectoryColumns(
  trx: Q,
  user: dir.User,
  columns: DirectoryColumns,
  { eppn = user.eppn, actor = SYSTEM, now = Date.now() }: Change & { eppn?: string },
): Promise<dir.User> {
  const renamed = eppn !== user.eppn;
  if (Object.keys(columns).length === 0 && !renamed) return user;
  if (columns.external_id) {
    const other = await prov.findUserByExternalId(trx, user.org_id, columns.external_id);
    if (other && other.id !== user.id)
      throw conflict(`externalId '${columns.external_id.slice(0, 80)}' already belongs to a user`);
  }
  if (renamed && (await dir.findUserByEppn(trx, eppn))) throw conflict(`userName '${eppn}' already belongs to a user`);
  const changes: dir.UserChanges = { ...columns, updated_at: Math.max(now, user.updated_at + 1) };
  if ('email' in columns && columns.email !== user.email) changes.email_verified = 0;
  if (renamed) changes.eppn = eppn;
  await dir.updateUser(trx, user.id, changes);
  await publish(trx, 'user', user.sub);
  const fields = [...changedFields(columns), ...(renamed ? ['eppn'] : [])];
  const details = { fields, ...(renamed ? { renamed_from: user.eppn } : {}) };
  const emailChanges =
    'email' in columns && (columns.email ?? null) !== user.email
      ? [{ eppn, orgId: user.org_id, from: user.email, to: columns.email ?? null }]
      : [];
  await recordAudit(trx, { action: 'user.update', actor, at: now, orgId: user.org_id, eppn, details, emailChanges });
  return { ...user, ...changes };
}

async function userConflict<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict('userName or externalId already belongs to a user');
    throw err;
  }
}

/** Writes directory attributes the caller checked with directoryColumns(); audited with the fields' names. */
export async function setDirectoryColumns(
  store: Store,
  user: dir.User,
  columns: DirectoryColumns,
  change: Change = {},
): Promise<dir.User> {
  if (Object.keys(columns).length === 0) return user;
  return userConflict(() => store.db.transaction().execute((trx) => writeDirectoryColumns(trx, user, columns, change)));
}

/** What a provisioning write makes of a user: their eppn (a new one renames them) and the changed columns. */
export interface UserEdit {
  eppn: string;
  columns: DirectoryColumns;
  /** an existing hash for a user who has neither a password nor a passkey (importPasswordHash) */
  passwordHash?: string;
}

/**
 * Changes a user as a provisioning write says, from the user as they are when it is written: the
 * user's next version is taken first in the transaction, if it is one of `expected` (the versions
 * of If-Match; undefined: any), so the check is the write and concurrent writers take turns.
 * 412 when the user has another version, 404 when they are gone.
 */
export async function changeProvisionedUser(
  store: Store,
  user: dir.User,
  expected: number[] | undefined,
  edit: (current: dir.User) => UserEdit,
  change: Change = {},
): Promise<dir.User> {
  const now = change.now ?? Date.now();
  return userConflict(() =>
    transact(store.db, async (trx) => {
      const claimed = await prov.claimVersion(trx, 'users', user.id, expected, now);
      if (!claimed) {
        if (await dir.findUserById(trx, user.id))
          throw new AppError(412, 'The resource changed since it was read (If-Match does not match its version)');
        throw notFound(`User ${user.sub} not found`);
      }
      const { eppn, columns, passwordHash } = edit(claimed);
      const written = await writeDirectoryColumns(trx, claimed, columns, { ...change, now, eppn });
      if (passwordHash !== undefined) await importPasswordHash(trx, written, passwordHash, { ...change, now });
      return written;
    }),
  );
}

/** Creates a user with their directory attributes (addUser, one transaction). */
export async function provisionUser(
  store: Store,
  orgId: number,
  input: { eppn: string; name: string; columns: DirectoryColumns; passwordHash?: string },
  change: Change = {},
): Promise<dir.User> {
  await externalIdFree(store, orgId, input.columns.external_id);
  // One transaction: the user is created with their directory attributes or not at all.
  const { name: _name, ...directory } = input.columns;
  const { eppn, name, passwordHash } = input;
  return addUser(store, { orgId, eppn, name, directory, passwordHash }, change);
}

/** A user to create from the organization's directory: their eppn and name, and their directory attributes. */
export interface ProvisionedUser {
  eppn: string;
  name: string;
  columns: DirectoryColumns;
  passwordHash?: string;
}

/**
 * Creates many users in the caller's transaction, each as provisionUser creates one (the same checks
 * and messages, row, audit records and events), with a few multi-row statements: the conflicts of
 * all with one query each first, then the rows. Each input is decided in order as one at a time
 * would be: its external id taken (by a user or an input before it), then the checks of addUser,
 * then its eppn taken. Returns, by input, the user created or the error that refused it alone. A
 * conflict that arises meanwhile (a concurrent writer) fails the write as a whole (a unique
 * violation): the caller rolls back and writes the inputs one at a time.
 */
export async function provisionUsers(
  trx: Transaction<DB>,
  orgId: number,
  inputs: ProvisionedUser[],
  change: Change = {},
): Promise<(dir.User | AppError)[]> {
  const now = change.now ?? Date.now();
  const org = await dir.findOrganization(trx, orgId);
  if (!org) throw notFound(`organization ${orgId} does not exist`);
  const checked = inputs.map((input) => {
    // as provisionUser hands it to addUser
    const { name: _name, ...directory } = input.columns;
    const user: NewUser = { orgId, eppn: input.eppn, name: input.name, directory, passwordHash: input.passwordHash };
    try {
      return { user, ...checkNewUser(org, user) };
    } catch (err) {
      if (err instanceof AppError) return err;
      throw err;
    }
  });
  const externalIds = inputs.map((i) => i.columns.external_id).filter((id): id is string => !!id);
  const eppns = checked.flatMap((c) => (c instanceof AppError ? [] : [c.eppn]));
  const found = await findImportMatches(trx, orgId, eppns, externalIds);
  const takenIds = new Set(found.byExternalId.keys());
  const takenEppns = new Set(found.byEppn.keys());
  const results: (dir.User | AppError)[] = [];
  const rows: { index: number; row: ReturnType<typeof newUserRow>; user: NewUser }[] = [];
  for (const [i, input] of inputs.entries()) {
    const externalId = input.columns.external_id;
    const c = checked[i]!;
    if (externalId && takenIds.has(externalId))
      results[i] = conflict(`externalId '${externalId.slice(0, 80)}' already belongs to a user`);
    else if (c instanceof AppError) results[i] = c;
    else if (takenEppns.has(c.eppn)) results[i] = conflict(`user '${c.eppn}' already exists`);
    else {
      takenEppns.add(c.eppn);
      if (externalId) takenIds.add(externalId);
      rows.push({ index: i, row: newUserRow(org, c.user, c, input.passwordHash ?? null, now), user: c.user });
    }
  }
  const inserted = await dir.insertNewUsers(
    trx,
    rows.map((r) => r.row),
  );
  const written = new Map(inserted.map((u) => [u.sub, u]));
  const audit = [];
  for (const { index, row, user } of rows) {
    const created = written.get(row.sub)!;
    results[index] = created;
    audit.push(...userAddedAudit(created, user, { ...change, now }));
  }
  await recordAudits(trx, audit);
  return results;
}

// ---- groups ------------------------------------------------------------------------------------

export const GROUP_TYPES = ['org-unit', 'class', 'teaching-group', 'other'] as const;
/** The most members a group has. */
export const MAX_GROUP_MEMBERS = 100_000;

/** What a group is, besides its members. */
export interface GroupAttributes {
  displayName: string;
  externalId: string | null;
  type: string;
}

export interface GroupInput extends GroupAttributes {
  /** user subs and each one's role */
  members: { sub: string; role: string }[];
}

const ROLE = /^[a-z][a-z0-9-]{0,39}$/;

function checkRole(role: string): void {
  if (!ROLE.test(role))
    throw badRequest(`role '${role.slice(0, 40)}' must be a lower-case word (member, student, teacher, ...)`);
}

function checkAttributes(input: GroupAttributes): void {
  const name = input.displayName.trim();
  if (!name || name.length > 200) throw badRequest('displayName must be 1-200 characters');
  if (!(GROUP_TYPES as readonly string[]).includes(input.type))
    throw badRequest(`type must be one of ${GROUP_TYPES.join(', ')}`);
  if (input.externalId !== null && input.externalId.length > 200) throw badRequest('externalId is too long');
}

function checkGroup(input: GroupInput): void {
  checkAttributes(input);
  for (const m of input.members) checkRole(m.role);
  if (input.members.length > MAX_GROUP_MEMBERS) throw badRequest(`a group has at most ${MAX_GROUP_MEMBERS} members`);
}

type Q = Parameters<typeof prov.addMembers>[0];

/**
 * The organization's users among these subs, by sub. `strict`: a sub that is not a user of the
 * organization is refused. A user removed between this read and the write fails the membership's
 * foreign key, which groupConflict() answers as the same refusal.
 */
async function memberIds(q: Q, orgId: number, subs: string[], strict = true) {
  const unique = [...new Set(subs)];
  const found = new Map<string, number>();
  for (let i = 0; i < unique.length; i += 500) {
    for (const u of await prov.findUsersBySubs(q, orgId, unique.slice(i, i + 500))) found.set(u.sub, u.id);
    if (i > 0) await yieldToEventLoop();
  }
  const missing = strict ? unique.find((s) => !found.has(s)) : undefined;
  if (missing !== undefined) throw badRequest(`member '${missing.slice(0, 80)}' is not a user of this organization`);
  return found;
}

/** The members become exactly `wanted` (user id to role): only the rows that differ are written. */
async function writeMembers(trx: Q, groupId: number, wanted: Map<number, string>) {
  const current = await prov.listMembers(trx, [groupId]);
  const had = new Map(current.map((m) => [m.user_id, m.role]));
  const removed = await prov.removeMembers(
    trx,
    groupId,
    current.filter((m) => !wanted.has(m.user_id)).map((m) => m.user_id),
  );
  const byRole = new Map<string, number[]>();
  for (const [userId, role] of wanted) {
    if (had.get(userId) === role) continue;
    if (had.has(userId)) await prov.setMemberRole(trx, groupId, userId, role);
    else if (byRole.has(role)) byRole.get(role)!.push(userId);
    else byRole.set(role, [userId]);
  }
  let added = 0;
  for (const [role, userIds] of byRole)
    for (let i = 0; i < userIds.length; i += 1000) {
      added += await prov.addMembers(trx, groupId, userIds.slice(i, i + 1000), role);
      await yieldToEventLoop();
    }
  return { added, removed };
}

async function groupConflict<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict('externalId already belongs to a group');
    if (prov.isMissingReference(err)) throw badRequest('a member is no longer a user of this organization');
    throw err;
  }
}

export async function addGroup(
  store: Store,
  orgId: number,
  input: GroupInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
) {
  checkGroup(input);
  if (input.externalId && (await prov.findGroupByExternalId(store.db, orgId, input.externalId)))
    throw conflict(`externalId '${input.externalId.slice(0, 80)}' already belongs to a group`);
  return groupConflict(() =>
    store.db.transaction().execute(async (trx) => {
      const group = await prov.insertGroup(trx, {
        uid: randomUUID(),
        org_id: orgId,
        external_id: input.externalId,
        display_name: input.displayName.trim(),
        type: input.type,
        created_at: now,
        updated_at: now,
      });
      const ids = await memberIds(
        trx,
        orgId,
        input.members.map((m) => m.sub),
      );
      const { added } = await writeMembers(trx, group.id, new Map(input.members.map((m) => [ids.get(m.sub)!, m.role])));
      const details = { id: group.uid, type: input.type, members_added: added };
      await recordAudit(trx, { action: 'group.add', actor, at: now, subject: group.uid, orgId, details });
      return group;
    }),
  );
}

/**
 * The group's next version, taken first in the writing transaction: the If-Match check (`expected`,
 * the versions the client holds; undefined: none) is the write itself, and concurrent writers of the
 * group wait for each other. 412 when the group has another version, 404 when it is gone.
 */
async function claimGroup(trx: Q, group: prov.Group, expected: number[] | undefined, now: number) {
  const current = await prov.claimVersion(trx, 'groups', group.id, expected, now);
  if (current) return current;
  if (await prov.findGroup(trx, group.org_id, group.uid))
    throw new AppError(412, 'The resource changed since it was read (If-Match does not match its version)');
  throw notFound(`Group ${group.uid} not found`);
}

async function writeAttributes(trx: Q, group: prov.Group, input: GroupAttributes) {
  checkAttributes(input);
  const changes = { display_name: input.displayName.trim(), external_id: input.externalId, type: input.type };
  await prov.updateGroup(trx, group.id, changes);
  return { ...group, ...changes };
}

async function auditGroupUpdate(trx: Q, group: prov.Group, counts: { added: number; removed: number }, change: Change) {
  const details = { id: group.uid, members_added: counts.added, members_removed: counts.removed };
  const { actor = SYSTEM, now = Date.now() } = change;
  await recordAudit(trx, { action: 'group.update', actor, at: now, subject: group.uid, orgId: group.org_id, details });
}

/** Replaces what a group is and who its members are (PUT), if its version is one of `expected`. */
export async function replaceGroup(
  store: Store,
  group: prov.Group,
  expected: number[] | undefined,
  input: GroupInput,
  change: Change = {},
) {
  checkGroup(input);
  const now = change.now ?? Date.now();
  return groupConflict(() =>
    store.db.transaction().execute(async (trx) => {
      const updated = await writeAttributes(trx, await claimGroup(trx, group, expected, now), input);
      const ids = await memberIds(
        trx,
        group.org_id,
        input.members.map((m) => m.sub),
      );
      const wanted = new Map(input.members.map((m) => [ids.get(m.sub)!, m.role]));
      await auditGroupUpdate(trx, updated, await writeMembers(trx, group.id, wanted), { ...change, now });
      return updated;
    }),
  );
}

/** One change to a group's members, as PATCH operations say them (users by sub). */
export type MemberChange =
  | { add: string[] }
  | { remove: string[] }
  | { removeAll: true }
  /** the members are these: who stays keeps their role, who comes is a member */
  | { replace: string[] }
  /** these members' roles (who is not a member is left alone) */
  | { roles: { sub: string; role: string }[] }
  /** every member is a plain member */
  | { resetRoles: true };

export interface GroupEdit {
  /** the group's own attributes after the change, from the current ones; undefined: unchanged */
  attributes?: (current: prov.Group) => GroupAttributes;
  /** member changes in the order they are made, each written row by row */
  members: MemberChange[];
}

async function applyMemberChange(trx: Q, group: prov.Group, c: MemberChange) {
  if ('removeAll' in c) return { added: 0, removed: await prov.removeAllMembers(trx, group.id) };
  if ('resetRoles' in c) return void (await prov.resetMemberRoles(trx, group.id));
  if ('roles' in c) {
    c.roles.forEach((r) => checkRole(r.role));
    const ids = await memberIds(
      trx,
      group.org_id,
      c.roles.map((r) => r.sub),
      false,
    );
    for (const r of c.roles) if (ids.has(r.sub)) await prov.setMemberRole(trx, group.id, ids.get(r.sub)!, r.role);
    return;
  }
  if ('remove' in c) {
    const ids = await memberIds(trx, group.org_id, c.remove, false);
    return { added: 0, removed: await prov.removeMembers(trx, group.id, [...ids.values()]) };
  }
  const subs = 'add' in c ? c.add : c.replace;
  const ids = await memberIds(trx, group.org_id, subs);
  let removed = 0;
  if ('replace' in c) {
    const keep = new Set(ids.values());
    const leaving = (await prov.listMemberIds(trx, group.id)).filter((id) => !keep.has(id));
    removed = await prov.removeMembers(trx, group.id, leaving);
  }
  return { added: await prov.addMembers(trx, group.id, [...ids.values()]), removed };
}

/**
 * Changes a group as a PATCH says (if its version is one of `expected`): its attributes from the
 * current ones, its members row by row, so concurrent changes of different members all hold.
 */
export async function patchGroup(
  store: Store,
  group: prov.Group,
  expected: number[] | undefined,
  edit: GroupEdit,
  change: Change = {},
) {
  const now = change.now ?? Date.now();
  return groupConflict(() =>
    store.db.transaction().execute(async (trx) => {
      let current = await claimGroup(trx, group, expected, now);
      if (edit.attributes) current = await writeAttributes(trx, current, edit.attributes(current));
      const counts = { added: 0, removed: 0 };
      for (const [i, c] of edit.members.entries()) {
        const done = await applyMemberChange(trx, current, c);
        counts.added += done?.added ?? 0;
        counts.removed += done?.removed ?? 0;
        // SQLite's driver answers synchronously: without a turn of the event loop now and then, a
        // PATCH of a thousand operations would hold every other request until it is done
        if (i % 20 === 19) await yieldToEventLoop();
      }
      if (counts.added > 0 && (await prov.countMembers(trx, group.id)) > MAX_GROUP_MEMBERS)
        throw badRequest(`a group has at most ${MAX_GROUP_MEMBERS} members`);
      await auditGroupUpdate(trx, current, counts, { ...change, now });
      return current;
    }),
  );
}

/** Removes a group, if its version is one of `expected` (412 otherwise). */
export async function removeGroup(
  store: Store,
  group: prov.Group,
  expected: number[] | undefined,
  { actor = SYSTEM, now = Date.now() }: Change = {},
) {
  await store.db.transaction().execute(async (trx) => {
    if (!(await prov.deleteGroup(trx, group.id, expected))) await claimGroup(trx, group, expected, now);
    const details = { id: group.uid, name: group.display_name };
    await recordAudit(trx, {
      action: 'group.remove',
      actor,
      at: now,
      subject: group.uid,
      orgId: group.org_id,
      details,
    });
  });
}
