// /Users (RFC 7644 3.3-3.6): list with filter and pages, read, create, replace, patch, delete.
// Each handler reads as its steps: callerOf -> loadUser -> checkMayChange -> read the resource ->
// checkUserName -> save (the If-Match version claimed in the write's own transaction, directory
// attributes, then the lifecycle) -> respond.
import type { FastifyReply, FastifyRequest } from 'fastify';
import * as lifecycle from '../oauth/account-lifecycle.ts';
import { eppnProblem, normalizeEppn, realmOf, type User } from '../directory/index.ts';
import { directoryColumns, type DirectoryColumns } from '../directory/directory-attributes.ts';
import { changeProvisionedUser, provisionUser } from '../directory/provisioning.ts';
import { removeUserPasskeys } from '../webauthn/passkey-removal.ts';
import { loadPolicy } from '../webauthn/policy.ts';
import { findUserBySub } from '../store/directory.ts';
import { findUserInOrganization, findUsers, listGroupsOfUsers } from '../store/provisioning.ts';
import { forbidden } from '../errors.ts';
import { recordingRefusals, requireWeaker } from '../directory/roles.ts';
import { scimAccess, type Caller, type ScimDeps } from './access.ts';
import { scimError, SCIM_JSON } from './errors.ts';
import { applyPatch } from './patch.ts';
import { listQuery, listResponse, project, projectionQuery, wants } from './query.ts';
import { PATCH_OP, USER_KIND } from './schemas.ts';
import { readUser, userColumns, userResource, versionOf, type UserInput } from './user-resource.ts';
import { expectedVersions, notModified, patchOperations, type IdRequest } from './steps.ts';

// ---- steps -------------------------------------------------------------------------------------

export function checkUserName(caller: Caller, userName: string): string {
  const eppn = normalizeEppn(userName);
  const problem = eppnProblem(eppn);
  if (problem) throw scimError(400, 'invalidValue', `userName '${userName.slice(0, 80)}' ${problem}`);
  if (realmOf(eppn) !== caller.realm) throw forbidden(`eppn realm '${realmOf(eppn)}' does not match organization`);
  return eppn;
}

/** The organization's directory changes its people, never an operator's account (directory/roles.ts). */
async function checkMayChange(deps: ScimDeps, caller: Caller, user: User, action: 'user.update' | 'user.remove') {
  const check = () => requireWeaker(deps.store.db, caller.actor, user, action, deps.now());
  await recordingRefusals(deps.store, check);
}

/** Only what differs from the stored user is written (and audited). */
function changedColumns(user: User, input: UserInput): DirectoryColumns {
  const columns = directoryColumns({ ...input.attributes, name: input.name });
  const changed: DirectoryColumns = {};
  for (const [key, value] of Object.entries(columns) as [keyof DirectoryColumns, string | null][])
    if ((user[key] ?? null) !== value) (changed as Record<string, unknown>)[key] = value;
  return changed;
}

/** active: false disables at once; the organization's policy says whether passkeys go too. */
export async function setActive(deps: ScimDeps, caller: Caller, user: User, active: boolean | undefined) {
  const { store } = deps;
  const change = { actor: caller.actor, now: deps.now() };
  if (active === true && user.disabled_at !== null) await lifecycle.enableUser(store, user.eppn, change);
  if (active !== false || user.disabled_at !== null) return;
  await lifecycle.disableUser(store, user.eppn, change);
  if ((await loadPolicy(store.db, caller.orgId)).onDeactivate === 'delete') {
    const who = { who: caller.actor, at: change.now, reason: 'deactivated by provisioning' };
    await removeUserPasskeys(store, who, caller.orgId, user.eppn);
  }
}

/**
 * Writes what `read` makes of the user as they are at the write (a PUT's body, a PATCH applied to
 * them), if their version is one of `expected`; a new userName renames them (sub and all else stay).
 */
async function save(
  deps: ScimDeps,
  caller: Caller,
  user: User,
  expected: number[] | undefined,
  read: (current: User) => UserInput,
): Promise<User> {
  const { store } = deps;
  let active: boolean | undefined;
  const edit = (current: User) => {
    const input = read(current);
    active = input.active;
    return {
      eppn: checkUserName(caller, input.userName),
      columns: changedColumns(current, input),
      passwordHash: input.passwordHash,
    };
  };
  const updated = await changeProvisionedUser(store, user, expected, edit, { actor: caller.actor, now: deps.now() });
  await setActive(deps, caller, updated, active);
  return (await findUserBySub(store.db, user.sub)) ?? updated;
}

// ---- endpoints ---------------------------------------------------------------------------------

/** Loading a user of the caller's organization, and answering with it (ETag, Location, projection). */
function userSteps(deps: ScimDeps, base: string) {
  const { store } = deps;
  async function loadUser(caller: Caller, id: string): Promise<User> {
    const user = await findUserInOrganization(store.db, caller.orgId, id);
    if (!user) throw scimError(404, undefined, `User ${id.slice(0, 80)} not found`);
    return user;
  }

  async function resourceOf(user: User) {
    return userResource(user, await listGroupsOfUsers(store.db, [user.id]), base);
  }

  async function respond(reply: FastifyReply, user: User, status = 200, request?: FastifyRequest) {
    const resource = await resourceOf(user);
    reply.code(status).type(SCIM_JSON).header('etag', versionOf(user.updated_at));
    if (status === 201) reply.header('location', `${base}/Users/${user.sub}`);
    return request ? project(resource, USER_KIND, projectionQuery(request)) : resource;
  }

  return { loadUser, resourceOf, respond };
}

export function userRoutes(deps: ScimDeps, base: string) {
  const { store } = deps;
  const callerOf = scimAccess(deps);

  const { loadUser, respond } = userSteps(deps, base);

  async function list(request: FastifyRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const query = listQuery(request, USER_KIND, userColumns);
    const page = { offset: query.startIndex - 1, limit: query.count };
    const { total, rows } = await findUsers(store.db, caller.orgId, query.where, page);
    const withGroups = wants(USER_KIND, query, 'groups');
    const groups = withGroups
      ? await listGroupsOfUsers(
          store.db,
          rows.map((u) => u.id),
        )
      : [];
    const byUser = Map.groupBy(groups, (g) => g.user_id);
    const resources = rows.map((u) => project(userResource(u, byUser.get(u.id) ?? [], base), USER_KIND, query));
    return listResponse(reply, resources, total, query.startIndex);
  }

  async function get(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const user = await loadUser(caller, request.params.id);
    const version = versionOf(user.updated_at);
    if (notModified(request, version)) return reply.code(304).header('etag', version).send();
    return respond(reply, user, 200, request);
  }

  async function create(request: FastifyRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const input = readUser(request.body);
    const eppn = checkUserName(caller, input.userName);
    const columns = directoryColumns({ ...input.attributes, name: input.name });
    const user = await provisionUser(
      store,
      caller.orgId,
      { eppn, name: input.name, columns, passwordHash: input.passwordHash },
      { actor: caller.actor, now: deps.now() },
    );
    await setActive(deps, caller, user, input.active);
    return respond(reply, (await findUserBySub(store.db, user.sub)) ?? user, 201);
  }

  async function replace(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const user = await loadUser(caller, request.params.id);
    await checkMayChange(deps, caller, user, 'user.update');
    const input = readUser(request.body);
    return respond(reply, await save(deps, caller, user, expectedVersions(request), () => input));
  }

  async function patch(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const user = await loadUser(caller, request.params.id);
    await checkMayChange(deps, caller, user, 'user.update');
    const operations = patchOperations(request.body, PATCH_OP);
    const read = (current: User) => readUser(applyPatch(userResource(current, [], base), USER_KIND, operations));
    read(user);
    return respond(reply, await save(deps, caller, user, expectedVersions(request), read));
  }

  async function remove(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const user = await loadUser(caller, request.params.id);
    await checkMayChange(deps, caller, user, 'user.remove');
    // the If-Match version is checked by the removal's own transaction
    const expected = expectedVersions(request);
    await lifecycle.removeUser(store, user, { actor: caller.actor, now: deps.now(), expected });
    return reply.code(204).send();
  }

  return { list, get, create, replace, patch, remove };
}
