// A group PATCH (RFC 7644 3.5.2) as row-level changes: operations on members and on the
// education extension's memberRoles become member rows added, removed or given a role, in the
// operations' order, without reading the group's members; the group's own attributes (displayName,
// externalId, type) are patched as a small resource. Each member change costs what it names, so
// concurrent PATCHes of different members never undo each other.
import type { GroupEdit, MemberChange } from '../directory/provisioning.ts';
import type { Group } from '../store/provisioning.ts';
import type { Filter } from './filter.ts';
import { scimError } from './errors.ts';
import { get, memberOf, readGroup } from './group-resource.ts';
import { applyPatch, expandOperations, resolvePath, type PathOperation, type Target } from './patch.ts';
import { EDU_GROUP, GROUP, GROUP_KIND } from './schemas.ts';
import type { Operation } from './steps.ts';

/** The most members (and member roles) one PATCH may name. */
export const MAX_MEMBERS_PER_PATCH = 10_000;

/** The user ids a member filter names: `value eq "<id>"`, or several of them joined by `or`. */
function valuesOf(filter: Filter, path: string): string[] {
  if (filter.kind === 'or') return [...valuesOf(filter.left, path), ...valuesOf(filter.right, path)];
  if (filter.kind === 'cmp' && filter.op === 'eq' && filter.path.toLowerCase() === 'value')
    if (typeof filter.value === 'string') return [filter.value];
  throw scimError(400, 'invalidFilter', `${path} are chosen by value eq "<user id>" (or several joined by or)`);
}

function valueList(value: unknown): unknown[] {
  if (value === undefined || value === null) return [];
  return Array.isArray(value) ? value : [value];
}

function membersChange(o: PathOperation, t: Target): MemberChange {
  if (t.sub) throw scimError(400, 'mutability', `members.${t.sub.name} cannot change: add or remove the member`);
  if (t.filter) {
    const subs = valuesOf(t.filter, 'members');
    return o.op === 'remove' ? { remove: subs } : { add: subs };
  }
  if (o.op === 'remove')
    return o.value === undefined ? { removeAll: true } : { remove: valueList(o.value).map(memberOf) };
  const subs = valueList(o.value).map(memberOf);
  return o.op === 'add' ? { add: subs } : { replace: subs };
}

function roleOf(value: unknown): string {
  const role = typeof value === 'string' ? value : get(value, 'role');
  if (typeof role !== 'string') throw scimError(400, 'invalidValue', 'memberRoles values need a role');
  return role;
}

function rolesChange(o: PathOperation, t: Target): MemberChange[] {
  if (t.filter) {
    const subs = valuesOf(t.filter, 'memberRoles');
    const role = o.op === 'remove' ? 'member' : roleOf(o.value);
    return [{ roles: subs.map((sub) => ({ sub, role })) }];
  }
  if (t.sub)
    throw scimError(400, 'invalidPath', 'memberRoles.role needs a filter: memberRoles[value eq "<user id>"].role');
  if (o.op === 'remove' && o.value === undefined) return [{ resetRoles: true }];
  const roles = valueList(o.value).map((r) => {
    const sub = get(r, 'value');
    if (typeof sub !== 'string') throw scimError(400, 'invalidValue', 'memberRoles values need value (a user id)');
    return { sub, role: o.op === 'remove' ? 'member' : roleOf(r) };
  });
  return o.op === 'replace' ? [{ resetRoles: true }, { roles }] : [{ roles }];
}

const size = (c: MemberChange) =>
  'add' in c
    ? c.add.length
    : 'remove' in c
      ? c.remove.length
      : 'replace' in c
        ? c.replace.length
        : 'roles' in c
          ? c.roles.length
          : 0;

/** Adjacent additions (and adjacent removals) as one change: a thousand one-member operations, one write. */
function coalesce(changes: MemberChange[]): MemberChange[] {
  const out: MemberChange[] = [];
  for (const c of changes) {
    const last = out.at(-1);
    if (last && 'add' in last && 'add' in c) last.add.push(...c.add);
    else if (last && 'remove' in last && 'remove' in c) last.remove.push(...c.remove);
    else out.push(c);
  }
  return out;
}

/** The group's own attributes as a resource without members (what the attribute operations apply to). */
function attributeResource(group: Group) {
  return {
    schemas: [GROUP, EDU_GROUP],
    id: group.uid,
    displayName: group.display_name,
    ...(group.external_id === null ? {} : { externalId: group.external_id }),
    [EDU_GROUP]: { type: group.type },
  };
}

/** What the PATCH operations do to the group, checked before anything is written. */
export function groupEdit(group: Group, operations: Operation[]): GroupEdit {
  const members: MemberChange[] = [];
  const others: PathOperation[] = [];
  for (const o of expandOperations(GROUP_KIND, operations, group.uid)) {
    const t = resolvePath(GROUP_KIND, o.path);
    if (!t.attr) {
      if (t.schema !== EDU_GROUP || o.op !== 'remove') others.push(o);
      else {
        // the whole extension: the group's kind goes back to other, every member's role to member
        others.push({ op: 'remove', path: `${EDU_GROUP}:type`, value: undefined });
        members.push({ resetRoles: true });
      }
    } else if (t.attr.name === 'members' && t.schema === GROUP) members.push(membersChange(o, t));
    else if (t.attr.name === 'memberRoles' && t.schema === EDU_GROUP) members.push(...rolesChange(o, t));
    else others.push(o);
  }
  const named = members.reduce((n, c) => n + size(c), 0);
  if (named > MAX_MEMBERS_PER_PATCH)
    throw scimError(400, 'tooMany', `A PATCH names at most ${MAX_MEMBERS_PER_PATCH} members (this one ${named})`);
  if (others.length === 0) return { members: coalesce(members) };
  // checked now, applied again to the group as it is when the change is written
  const apply = (g: Group) => readGroup(applyPatch(attributeResource(g), GROUP_KIND, others));
  apply(group);
  return { members: coalesce(members), attributes: apply };
}
