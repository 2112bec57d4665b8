// Provisioning from an organization's directory (SCIM): its provisioning tokens, users created and
// changed with their directory attributes, and groups with their members. Each change is one
// transaction with its audit record; users are created through addUser and their lifecycle goes
// through src/oauth/account-lifecycle.ts, as from every other surface.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Store } from '../store/index.ts';
import { isUniqueViolation } from '../store/index.ts';
import * as dir from '../store/directory.ts';
import * as prov from '../store/provisioning.ts';
import { publish } from '../store/invalidation.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { iso } from '../time.ts';
import { addUser } from './index.ts';
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

/** Writes directory attributes the caller checked with directoryColumns(); audited with the fields' names. */
export async function setDirectoryColumns(
  store: Store,
  user: dir.User,
  columns: DirectoryColumns,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<dir.User> {
  if (Object.keys(columns).length === 0) return user;
  await externalIdFree(store, user.org_id, columns.external_id, user.id);
  try {
    return await store.db.transaction().execute(async (trx) => {
      const changes = { ...columns, updated_at: Math.max(now, user.updated_at + 1) };
      await dir.updateUser(trx, user.id, changes);
      await publish(trx, 'user', user.sub);
      const details = { fields: changedFields(columns) };
      await recordAudit(trx, { action: 'user.update', actor, at: now, orgId: user.org_id, eppn: user.eppn, details });
      return { ...user, ...changes };
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`externalId already belongs to a user`);
    throw err;
  }
}

/** Creates a user with their directory attributes (addUser, one transaction). */
export async function provisionUser(
  store: Store,
  orgId: number,
  input: { eppn: string; name: string; columns: DirectoryColumns },
  change: Change = {},
): Promise<dir.User> {
  await externalIdFree(store, orgId, input.columns.external_id);
  // One transaction: the user is created with their directory attributes or not at all.
  const { name: _name, ...directory } = input.columns;
  return addUser(store, { orgId, eppn: input.eppn, name: input.name, directory }, change);
}

// ---- groups ------------------------------------------------------------------------------------

export const GROUP_TYPES = ['org-unit', 'class', 'teaching-group', 'other'] as const;

export interface GroupInput {
  displayName: string;
  externalId: string | null;
  type: string;
  /** user subs and each one's role */
  members: { sub: string; role: string }[];
}

const ROLE = /^[a-z][a-z0-9-]{0,39}$/;

function checkGroup(input: GroupInput): void {
  const name = input.displayName.trim();
  if (!name || name.length > 200) throw badRequest('displayName must be 1-200 characters');
  if (!(GROUP_TYPES as readonly string[]).includes(input.type))
    throw badRequest(`type must be one of ${GROUP_TYPES.join(', ')}`);
  if (input.externalId !== null && input.externalId.length > 200) throw badRequest('externalId is too long');
  const bad = input.members.find((m) => !ROLE.test(m.role));
  if (bad)
    throw badRequest(`role '${bad.role.slice(0, 40)}' must be a lower-case word (member, student, teacher, ...)`);
  if (input.members.length > 100_000) throw badRequest('a group has at most 100000 members');
}

/** The organization's users for the members; a member of another organization (or none) is refused. */
async function memberIds(store: Store, orgId: number, members: GroupInput['members']) {
  const subs = [...new Set(members.map((m) => m.sub))];
  const found = new Map<string, number>();
  for (let i = 0; i < subs.length; i += 500)
    for (const u of await prov.findUsersBySubs(store.db, orgId, subs.slice(i, i + 500))) found.set(u.sub, u.id);
  const missing = subs.find((s) => !found.has(s));
  if (missing !== undefined) throw badRequest(`member '${missing.slice(0, 80)}' is not a user of this organization`);
  return found;
}

async function writeMembers(
  trx: Parameters<typeof prov.insertMember>[0],
  group: prov.Group,
  input: GroupInput,
  ids: Map<string, number>,
) {
  const current = await prov.listMembers(trx, [group.id]);
  const wanted = new Map(input.members.map((m) => [ids.get(m.sub)!, m.role]));
  for (const m of current) if (!wanted.has(m.user_id)) await prov.deleteMember(trx, group.id, m.user_id);
  const had = new Map(current.map((m) => [m.user_id, m.role]));
  for (const [userId, role] of wanted)
    if (had.get(userId) !== role) await prov.insertMember(trx, group.id, userId, role);
  return {
    added: [...wanted.keys()].filter((id) => !had.has(id)).length,
    removed: current.filter((m) => !wanted.has(m.user_id)).length,
  };
}

async function groupConflict<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict('externalId already belongs to a group');
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
  const ids = await memberIds(store, orgId, input.members);
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
      const { added } = await writeMembers(trx, group, input, ids);
      const details = { id: group.uid, type: input.type, members_added: added };
      await recordAudit(trx, { action: 'group.add', actor, at: now, subject: group.uid, orgId, details });
      return group;
    }),
  );
}

/** Replaces what a group is and who its members are (PUT, and PATCH once applied). */
export async function replaceGroup(
  store: Store,
  group: prov.Group,
  input: GroupInput,
  { actor = SYSTEM, now = Date.now() }: Change = {},
) {
  checkGroup(input);
  const ids = await memberIds(store, group.org_id, input.members);
  return groupConflict(() =>
    store.db.transaction().execute(async (trx) => {
      const changes = {
        display_name: input.displayName.trim(),
        external_id: input.externalId,
        type: input.type,
        updated_at: Math.max(now, group.updated_at + 1),
      };
      await prov.updateGroup(trx, group.id, changes);
      const { added, removed } = await writeMembers(trx, group, input, ids);
      const details = { id: group.uid, members_added: added, members_removed: removed };
      await recordAudit(trx, {
        action: 'group.update',
        actor,
        at: now,
        subject: group.uid,
        orgId: group.org_id,
        details,
      });
      return { ...group, ...changes };
    }),
  );
}

export async function removeGroup(store: Store, group: prov.Group, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  await store.db.transaction().execute(async (trx) => {
    await prov.deleteGroup(trx, group.id);
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
