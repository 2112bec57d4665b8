// A group as a SCIM Group resource (with the education extension: its kind and each member's role),
// a Group resource read back into what is stored, and filters on groups as conditions.
import type { Group, Member } from '../store/provisioning.ts';
import type { GroupInput } from '../directory/provisioning.ts';
import { iso } from '../time.ts';
import { scimError } from './errors.ts';
import { stringValue, type ColumnMap } from './query.ts';
import { EDU_GROUP, GROUP } from './schemas.ts';
import { versionOf } from './user-resource.ts';

type Json = Record<string, unknown>;

export function groupResource(group: Group, members: Member[] | undefined, base: string): Json {
  const roles = (members ?? []).filter((m) => m.role !== 'member').map((m) => ({ value: m.sub, role: m.role }));
  return {
    schemas: [GROUP, EDU_GROUP],
    id: group.uid,
    ...(group.external_id === null ? {} : { externalId: group.external_id }),
    displayName: group.display_name,
    ...(members && members.length
      ? {
          members: members.map((m) => ({
            value: m.sub,
            $ref: `${base}/Users/${m.sub}`,
            display: m.eppn,
            type: 'User',
          })),
        }
      : {}),
    [EDU_GROUP]: { type: group.type, ...(roles.length ? { memberRoles: roles } : {}) },
    meta: {
      resourceType: 'Group',
      created: iso(group.created_at),
      lastModified: iso(group.updated_at),
      location: `${base}/Groups/${group.uid}`,
      version: versionOf(group.updated_at),
    },
  };
}

export function get(o: unknown, name: string): unknown {
  if (!o || typeof o !== 'object') return undefined;
  const key = Object.keys(o).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : (o as Json)[key];
}

function list(value: unknown, name: string): unknown[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw scimError(400, 'invalidValue', `${name} must be a list`);
  return value;
}

/** A member value's user id (sub); only users are members. */
export function memberOf(m: unknown): string {
  const value = get(m, 'value');
  const type = get(m, 'type');
  if (typeof value !== 'string' || !value)
    throw scimError(400, 'invalidValue', 'Each member needs a value (a user id)');
  if (type !== undefined && type !== null && (typeof type !== 'string' || type.toLowerCase() !== 'user'))
    throw scimError(400, 'invalidValue', 'Members are users; groups in groups are not supported');
  return value;
}

/** The whole resource (POST, PUT, a patched resource): what it leaves out is cleared. */
export function readGroup(body: unknown): GroupInput {
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw scimError(400, 'invalidSyntax', 'Body must be a JSON object');
  const displayName = get(body, 'displayName');
  if (typeof displayName !== 'string') throw scimError(400, 'invalidValue', 'displayName is required');
  const externalId = get(body, 'externalId');
  if (externalId !== undefined && externalId !== null && typeof externalId !== 'string')
    throw scimError(400, 'invalidValue', 'externalId must be a string');
  const edu = get(body, EDU_GROUP);
  const type = get(edu, 'type') ?? 'other';
  if (typeof type !== 'string') throw scimError(400, 'invalidValue', 'type must be a string');
  const roles = new Map<string, string>();
  for (const r of list(get(edu, 'memberRoles'), 'memberRoles')) {
    const value = get(r, 'value');
    const role = get(r, 'role');
    if (typeof value !== 'string' || typeof role !== 'string')
      throw scimError(400, 'invalidValue', 'memberRoles values need value (a user id) and role');
    roles.set(value, role);
  }
  const subs = [...new Set(list(get(body, 'members'), 'members').map(memberOf))];
  return {
    displayName,
    externalId: typeof externalId === 'string' && externalId !== '' ? externalId : null,
    type,
    members: subs.map((sub) => ({ sub, role: roles.get(sub) ?? 'member' })),
  };
}

export const groupColumns: ColumnMap = (key, f) => {
  const columns: Record<string, { column: string; caseExact?: boolean }> = {
    id: { column: 'uid', caseExact: true },
    externalid: { column: 'external_id', caseExact: true },
    displayname: { column: 'display_name' },
    'education:type': { column: 'type', caseExact: true },
  };
  if (key === 'members' || key === 'members.value') {
    if (f.op !== 'eq') throw scimError(400, 'invalidFilter', 'members is compared with eq');
    return { memberSub: stringValue(f.value, f.path) };
  }
  const spec = columns[key];
  if (!spec) return undefined;
  if (f.op === 'pr') return { column: spec.column, op: 'pr', value: null };
  return { column: spec.column, op: f.op, value: stringValue(f.value, f.path), caseExact: spec.caseExact };
};
