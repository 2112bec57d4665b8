// /Groups (RFC 7644 3.3-3.6): groups of the organization with their kind and members, members
// added and removed by PATCH value paths (members[value eq "..."]) as Entra ID and Okta send them.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { addGroup, patchGroup, removeGroup, replaceGroup } from '../directory/provisioning.ts';
import { findGroup, findGroups, listMembers, type Group } from '../store/provisioning.ts';
import { scimAccess, type Caller, type ScimDeps } from './access.ts';
import { scimError, SCIM_JSON } from './errors.ts';
import { groupColumns, groupResource, readGroup } from './group-resource.ts';
import { groupEdit } from './group-patch.ts';
import { listQuery, listResponse, project, projectionQuery, wants } from './query.ts';
import { GROUP_KIND, PATCH_OP } from './schemas.ts';
import { expectedVersions, notModified, patchOperations, type IdRequest } from './steps.ts';
import { versionOf } from './user-resource.ts';

/** Loading a group of the caller's organization, and answering with it (ETag, Location, projection). */
function groupSteps(deps: ScimDeps, base: string) {
  const { store } = deps;
  async function loadGroup(caller: Caller, id: string): Promise<Group> {
    const group = await findGroup(store.db, caller.orgId, id);
    if (!group) throw scimError(404, undefined, `Group ${id.slice(0, 80)} not found`);
    return group;
  }

  async function resourceOf(group: Group, withMembers = true) {
    return groupResource(group, withMembers ? await listMembers(store.db, [group.id]) : undefined, base);
  }

  async function respond(reply: FastifyReply, group: Group, status = 200, request?: FastifyRequest) {
    const projection = request ? projectionQuery(request) : {};
    const resource = await resourceOf(group, wants(GROUP_KIND, projection, 'members'));
    reply.code(status).type(SCIM_JSON).header('etag', versionOf(group.updated_at));
    if (status === 201) reply.header('location', `${base}/Groups/${group.uid}`);
    return project(resource, GROUP_KIND, projection);
  }

  return { loadGroup, resourceOf, respond };
}

export function groupRoutes(deps: ScimDeps, base: string) {
  const { store } = deps;
  const callerOf = scimAccess(deps);
  const change = (caller: Caller) => ({ actor: caller.actor, now: deps.now() });

  const { loadGroup, respond } = groupSteps(deps, base);

  async function list(request: FastifyRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const query = listQuery(request, GROUP_KIND, groupColumns);
    const page = { offset: query.startIndex - 1, limit: query.count };
    const { total, rows } = await findGroups(store.db, caller.orgId, query.where, page);
    const members = wants(GROUP_KIND, query, 'members')
      ? await listMembers(
          store.db,
          rows.map((g) => g.id),
        )
      : undefined;
    const byGroup = Map.groupBy(members ?? [], (m) => m.group_id);
    const resources = rows.map((g) =>
      project(groupResource(g, members ? (byGroup.get(g.id) ?? []) : undefined, base), GROUP_KIND, query),
    );
    return listResponse(reply, resources, total, query.startIndex);
  }

  async function get(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const group = await loadGroup(caller, request.params.id);
    const version = versionOf(group.updated_at);
    if (notModified(request, version)) return reply.code(304).header('etag', version).send();
    return respond(reply, group, 200, request);
  }

  async function create(request: FastifyRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const group = await addGroup(store, caller.orgId, readGroup(request.body), change(caller));
    return respond(reply, group, 201);
  }

  async function replace(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const group = await loadGroup(caller, request.params.id);
    const input = readGroup(request.body);
    return respond(reply, await replaceGroup(store, group, expectedVersions(request), input, change(caller)));
  }

  async function patch(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const group = await loadGroup(caller, request.params.id);
    const edit = groupEdit(group, patchOperations(request.body, PATCH_OP));
    const updated = await patchGroup(store, group, expectedVersions(request), edit, change(caller));
    return respond(reply, updated, 200, request);
  }

  async function remove(request: IdRequest, reply: FastifyReply) {
    const caller = await callerOf(request);
    const group = await loadGroup(caller, request.params.id);
    await removeGroup(store, group, expectedVersions(request), change(caller));
    return reply.code(204).send();
  }

  return { list, get, create, replace, patch, remove };
}
