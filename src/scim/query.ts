// What a list request asks for: the filter as a SQL condition (through each resource's map of
// attributes to columns), the page (startIndex, count) and the attribute projection.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Condition } from '../store/provisioning.ts';
import { parseFilter, type Filter, type Value } from './filter.ts';
import { scimError, SCIM_JSON } from './errors.ts';
import { resolvePath } from './patch.ts';
import { LIST, type ResourceKind } from './schemas.ts';

/** How a filter on one attribute becomes a condition; undefined: the attribute cannot be filtered on. */
export type ColumnMap = (key: string, op: Filter & { kind: 'cmp' }) => Condition | undefined;

/** The attribute's key for a ColumnMap: lower case, the extension's URN replaced by its short name. */
export function filterKey(kind: ResourceKind, path: string): string {
  const lower = path.toLowerCase();
  for (const urn of kind.extensions) {
    const prefix = `${urn.toLowerCase()}:`;
    if (lower.startsWith(prefix)) return `${urn.split(':').at(-3)}:${lower.slice(prefix.length)}`;
  }
  const core = `${kind.core.toLowerCase()}:`;
  return lower.startsWith(core) ? lower.slice(core.length) : lower;
}

export function toCondition(kind: ResourceKind, filter: Filter, map: ColumnMap, prefix = ''): Condition {
  switch (filter.kind) {
    case 'and':
      return { and: [toCondition(kind, filter.left, map, prefix), toCondition(kind, filter.right, map, prefix)] };
    case 'or':
      return { or: [toCondition(kind, filter.left, map, prefix), toCondition(kind, filter.right, map, prefix)] };
    case 'not':
      return { not: toCondition(kind, filter.filter, map, prefix) };
    case 'valuePath':
      return toCondition(kind, filter.filter, map, `${filterKey(kind, filter.path)}.`);
    default: {
      const key = prefix + filterKey(kind, filter.path);
      const condition = map(key, filter);
      if (!condition) throw scimError(400, 'invalidFilter', `Cannot filter on '${filter.path.slice(0, 80)}'`);
      return condition;
    }
  }
}

export function stringValue(value: Value, path: string): string {
  if (typeof value !== 'string') throw scimError(400, 'invalidFilter', `'${path}' is compared with a string`);
  return value;
}

export interface ListQuery {
  where: Condition;
  startIndex: number;
  count: number;
  attributes: string[] | undefined;
  excluded: string[] | undefined;
}

export const MAX_COUNT = 1000;
const ALLOWED = ['filter', 'startIndex', 'count', 'attributes', 'excludedAttributes', 'sortBy', 'sortOrder'];

function intParam(raw: string | undefined, name: string, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?[0-9]{1,9}$/.test(raw)) throw scimError(400, 'invalidValue', `${name} must be an integer`);
  return Number(raw);
}

const list = (raw: string | undefined) =>
  raw === undefined
    ? undefined
    : raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** The query string; unknown parameters are refused (a typo would otherwise return everything). */
export function readQuery(request: FastifyRequest): Record<string, string> {
  const at = request.url.indexOf('?');
  const out: Record<string, string> = {};
  if (at < 0) return out;
  for (const [name, value] of new URLSearchParams(request.url.slice(at + 1))) {
    const known = ALLOWED.find((a) => a.toLowerCase() === name.toLowerCase());
    if (!known) throw scimError(400, 'invalidValue', `Unknown query parameter '${name.slice(0, 40)}'`);
    if (value.includes('\u0000')) throw scimError(400, 'invalidValue', `Invalid '${known}'`);
    out[known] = value;
  }
  return out;
}

export function listQuery(request: FastifyRequest, kind: ResourceKind, map: ColumnMap): ListQuery {
  const q = readQuery(request);
  const where: Condition = q.filter === undefined ? { constant: true } : toCondition(kind, parseFilter(q.filter), map);
  // RFC 7644 3.4.2.4: a startIndex below 1 means 1, a negative count means 0
  const startIndex = Math.max(1, intParam(q.startIndex, 'startIndex', 1));
  const count = Math.min(MAX_COUNT, Math.max(0, intParam(q.count, 'count', 100)));
  return { where, startIndex, count, attributes: list(q.attributes), excluded: list(q.excludedAttributes) };
}

/** attributes / excludedAttributes of a single-resource request. */
export function projectionQuery(request: FastifyRequest) {
  const q = readQuery(request);
  return { attributes: list(q.attributes), excluded: list(q.excludedAttributes) };
}

type Json = Record<string, unknown>;

function locate(kind: ResourceKind, path: string) {
  try {
    const t = resolvePath(kind, path);
    return t.attr ? t : undefined;
  } catch {
    return undefined; // RFC 7644 3.9: attributes the server does not know are left out, not refused
  }
}

/** Whether the answer will carry the attribute (lists leave out what is costly when not asked for). */
export function wants(kind: ResourceKind, projection: { attributes?: string[]; excluded?: string[] }, name: string) {
  if (projection.attributes) return projection.attributes.some((p) => locate(kind, p)?.attr.name === name);
  return !(projection.excluded ?? []).some((p) => {
    const t = locate(kind, p);
    return t?.attr.name === name && !t.sub;
  });
}

/** The resource with only the attributes asked for (id, schemas and meta always), or without the excluded. */
export function project(
  resource: Json,
  kind: ResourceKind,
  projection: { attributes?: string[]; excluded?: string[] },
): Json {
  if (projection.attributes) {
    const out: Json = { schemas: resource.schemas, id: resource.id };
    for (const path of projection.attributes) {
      const t = locate(kind, path);
      if (!t) continue;
      const from = t.schema === kind.core ? resource : (resource[t.schema] as Json | undefined);
      const value = from?.[t.attr.name];
      if (value === undefined) continue;
      const to = t.schema === kind.core ? out : ((out[t.schema] as Json | undefined) ?? (out[t.schema] = {}));
      if (t.sub && value && typeof value === 'object' && !Array.isArray(value)) {
        const part = (to[t.attr.name] as Json | undefined) ?? (to[t.attr.name] = {});
        if ((value as Json)[t.sub.name] !== undefined) part[t.sub.name] = (value as Json)[t.sub.name];
      } else to[t.attr.name] = value;
    }
    out.meta = resource.meta;
    return out;
  }
  const out = structuredClone(resource);
  for (const path of projection.excluded ?? []) {
    const t = locate(kind, path);
    if (!t || t.attr.returned === 'always') continue;
    const from = t.schema === kind.core ? out : (out[t.schema] as Json | undefined);
    if (!from) continue;
    if (t.sub && from[t.attr.name] && typeof from[t.attr.name] === 'object')
      delete (from[t.attr.name] as Json)[t.sub.name];
    else delete from[t.attr.name];
  }
  return out;
}

/** A ListResponse (RFC 7644 3.4.2): the page of resources, the total the filter matched, where it starts. */
export function listResponse(reply: FastifyReply, resources: unknown[], total: number, startIndex: number) {
  reply.type(SCIM_JSON);
  return { schemas: [LIST], totalResults: total, startIndex, itemsPerPage: resources.length, Resources: resources };
}
