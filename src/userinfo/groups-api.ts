// The groups API (/groups/...): the signed-in user's groups in the VOOT shape, each kind released
// by its attribute group (groups-org: the organization and its units; groups-edu: classes and
// teaching groups; groups-other: the rest). A group the user is not in, or whose kind the client
// may not see, is a 404 like an unknown one.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { forbidden, notFound } from '../errors.ts';
import {
  findMembership,
  findOrganizationNames,
  listGroupMembers,
  listUserGroups,
  type MembershipRow,
} from '../store/group-queries.ts';
import { words, type AttributeGroup } from '../vocabulary.ts';
import { releasedGroups } from './claims.ts';
import {
  groupObject,
  groupTypes,
  kindReleased,
  memberObject,
  membersListed,
  organizationGroup,
  uidOf,
  type GroupObject,
} from './group-objects.ts';
import type { UserToken } from './tokens.ts';
import { checkOrigin } from './browser-access.ts';
import { authenticateUser, NO_STORE, type UserBoundDeps } from './user-bound.ts';

export const GROUPS_PATH = '/groups';
/** Members listed at most; a larger group's list ends there (docs/userinfo.md). */
export const MAX_MEMBERS = 5000;
const UNKNOWN_GROUP = 'Group does not exist';

type GroupRequest = FastifyRequest<{ Params: { id: string } }>;

interface Caller {
  token: UserToken;
  groups: Set<AttributeGroup>;
}

export function groupsHandlers(deps: UserBoundDeps) {
  const { store } = deps;

  const authenticate = async (request: FastifyRequest, reply: FastifyReply): Promise<Caller> => {
    const token = await authenticateUser(deps, request);
    checkOrigin(deps.config, request, reply, token.client);
    return { token, groups: releasedGroups(words(token.client.groups), token.scopes) };
  };

  /** The user's organization as a group, when groups-org is released. */
  const ownOrganization = async (caller: Caller): Promise<GroupObject | undefined> => {
    if (!caller.groups.has('groups-org')) return undefined;
    const org = await findOrganizationNames(store.db, caller.token.user.org_id);
    return org && organizationGroup(org, caller.token.user);
  };

  /** A group of the table the user is in and the client may see; otherwise the 404 of an unknown group. */
  const loadMembership = async (caller: Caller, id: string): Promise<MembershipRow> => {
    const uid = uidOf(id);
    const row = uid === undefined ? undefined : await findMembership(store.db, uid, caller.token.user.id);
    if (!row || !kindReleased(row.type, caller.groups) || groupObject(row, caller.token.user).id !== id)
      throw notFound(UNKNOWN_GROUP);
    return row;
  };

  /** One group by id with the user's membership: the own organization or a group of the table. */
  const loadGroup = async (caller: Caller, id: string): Promise<{ group: GroupObject; row?: MembershipRow }> => {
    const org = await ownOrganization(caller);
    if (org && id === org.id) return { group: org };
    const row = await loadMembership(caller, id);
    return { group: groupObject(row, caller.token.user), row };
  };

  const myGroups = async (request: FastifyRequest, reply: FastifyReply) => {
    const caller = await authenticate(request, reply);
    const [rows, org] = await Promise.all([listUserGroups(store.db, caller.token.user.id), ownOrganization(caller)]);
    const groups = rows
      .filter((r) => kindReleased(r.type, caller.groups))
      .map((r) => groupObject(r, caller.token.user));
    return reply.headers(NO_STORE).send(org ? [org, ...groups] : groups);
  };

  const myMembership = async (request: GroupRequest, reply: FastifyReply) => {
    const caller = await authenticate(request, reply);
    const { group } = await loadGroup(caller, request.params.id);
    return reply.headers(NO_STORE).send(group.membership);
  };

  const groupDetails = async (request: GroupRequest, reply: FastifyReply) => {
    const caller = await authenticate(request, reply);
    const { group } = await loadGroup(caller, request.params.id);
    const { membership: _mine, ...details } = group;
    return reply.headers(NO_STORE).send(details);
  };

  const groupMembers = async (request: GroupRequest, reply: FastifyReply) => {
    const caller = await authenticate(request, reply);
    const { row } = await loadGroup(caller, request.params.id);
    if (!row || !membersListed(row.type)) throw forbidden('Members of organization groups are not listed');
    const members = await listGroupMembers(store.db, row.id, MAX_MEMBERS);
    return reply.headers(NO_STORE).send(members.map(memberObject));
  };

  const types = async (request: FastifyRequest, reply: FastifyReply) => {
    await authenticate(request, reply);
    return reply.headers(NO_STORE).send(groupTypes());
  };

  return { myGroups, myMembership, groupDetails, groupMembers, types };
}
