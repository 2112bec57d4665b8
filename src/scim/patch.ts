// Attribute paths and PATCH (RFC 7644 3.5.2) applied to a resource's JSON, before the resource is
// read back into what the service stores. Accepts what Entra ID and Okta send: operations in any
// case (Replace, Add), replace without a path whose value is an object of paths, value paths
// (members[value eq "..."], emails[type eq "work"].value), members removed by a value list, a
// whole extension set by its URN with an object or removed by it, and the core attributes of
// RFC 7643 the service does not keep (Entra ID's default mapping sends nickName), which are ignored.
// Linear in the request: duplicates are found through sets, never by comparing every pair.
import { matches, parseFilter, type Filter } from './filter.ts';
import { scimError } from './errors.ts';
import { COMMON_ATTRIBUTES, ENTERPRISE, USER, schemaById, type Attribute, type ResourceKind } from './schemas.ts';

/** The most values one operation, or one attribute of a resource, may carry (group members excepted). */
export const MAX_VALUES = 100;

/** Attributes of RFC 7643's User and enterprise User the service does not keep: accepted and ignored. */
const IGNORED: Record<string, Set<string>> = {
  [USER]: new Set(
    [
      'nickName',
      'profileUrl',
      'userType',
      'preferredLanguage',
      'locale',
      'timezone',
      'phoneNumbers',
      'ims',
      'photos',
      'addresses',
      'entitlements',
      'roles',
      'x509Certificates',
    ].map((n) => n.toLowerCase()),
  ),
  [ENTERPRISE]: new Set(['costcenter', 'organization', 'division', 'manager']),
};
/** Sub-attributes of RFC 7643 the service does not keep, by attribute. */
const IGNORED_SUB: Record<string, Set<string>> = {
  name: new Set(['middlename', 'honorificprefix', 'honorificsuffix']),
  emails: new Set(['display']),
};
const ignoredAttribute = (schema: string, name: string) => IGNORED[schema]?.has(name.toLowerCase()) === true;
const ignoredSub = (attr: Attribute, name: string) => IGNORED_SUB[attr.name]?.has(name.toLowerCase()) === true;

export interface Target {
  /** the schema URN whose attribute this is (core: the resource's own) */
  schema: string;
  attr: Attribute;
  filter?: Filter;
  sub?: Attribute;
}

type Json = Record<string, unknown>;

const invalidPath = (message: string) => scimError(400, 'invalidPath', message);
const tooManyValues = (name: string) => scimError(400, 'invalidValue', `'${name}' has at most ${MAX_VALUES} values`);
const findAttr = (list: Attribute[] | undefined, name: string) =>
  list?.find((a) => a.name.toLowerCase() === name.toLowerCase());

/** Which of the resource's schemas a path starts with, and the rest of it. */
function splitUrn(kind: ResourceKind, raw: string): { schema: string; rest: string } {
  const lower = raw.toLowerCase();
  for (const urn of [kind.core, ...kind.extensions]) {
    if (lower === urn.toLowerCase()) return { schema: urn, rest: '' };
    if (lower.startsWith(`${urn.toLowerCase()}:`)) return { schema: urn, rest: raw.slice(urn.length + 1) };
  }
  if (/^urn:/i.test(raw)) throw invalidPath(`Unknown schema in path '${raw.slice(0, 120)}'`);
  return { schema: kind.core, rest: raw };
}

/** What a path names: an attribute, a whole extension (no attr), or an attribute the service ignores. */
export type Resolved = Target | { schema: string; attr?: undefined; ignored?: boolean };

/** Resolves a path against the resource's schemas; undefined attr: a whole extension, or an ignored attribute. */
export function resolvePath(kind: ResourceKind, raw: string): Resolved {
  const { schema, rest } = splitUrn(kind, raw.trim());
  if (rest === '') return { schema };
  const m = /^([A-Za-z$][\w$-]*)(?:\[(.*)\])?(?:\.([A-Za-z$][\w$-]*))?$/s.exec(rest);
  if (!m) throw invalidPath(`Invalid path '${raw.slice(0, 120)}'`);
  const attributes = [...(schema === kind.core ? COMMON_ATTRIBUTES : []), ...schemaById(schema)!.attributes];
  const attr = findAttr(attributes, m[1]!);
  if (!attr && ignoredAttribute(schema, m[1]!)) return { schema, ignored: true };
  if (!attr) throw invalidPath(`Unknown attribute '${m[1]!.slice(0, 80)}'`);
  const filter = m[2] === undefined ? undefined : parseFilter(m[2]);
  if (filter && !attr.multiValued) throw invalidPath(`'${attr.name}' is not multi-valued`);
  const sub = m[3] === undefined ? undefined : findAttr(attr.subAttributes, m[3]);
  if (m[3] !== undefined && !sub && ignoredSub(attr, m[3])) return { schema, ignored: true };
  if (m[3] !== undefined && !sub) throw invalidPath(`Unknown attribute '${attr.name}.${m[3].slice(0, 60)}'`);
  return { schema, attr, ...(filter ? { filter } : {}), ...(sub ? { sub } : {}) };
}

/** A complex value with its keys in the schema's spelling; unknown sub-attributes are refused. */
function canonical(attr: Attribute, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => canonical(attr, v));
  if (attr.type !== 'complex' || !value || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value as Json)) {
    const sub = findAttr(attr.subAttributes, k);
    if (!sub && ignoredSub(attr, k)) continue;
    if (!sub) throw invalidPath(`Unknown attribute '${attr.name}.${k.slice(0, 60)}'`);
    out[sub.name] = v;
  }
  return out;
}

function containerOf(resource: Json, kind: ResourceKind, schema: string): Json {
  if (schema === kind.core) return resource;
  const existing = resource[schema];
  if (existing && typeof existing === 'object') return existing as Json;
  return (resource[schema] = {});
}

type Op = 'add' | 'replace' | 'remove';

/** A replace or add through a filter that matches nothing, of the form attr eq value, adds that value. */
function seedFromFilter(filter: Filter | undefined): Json | undefined {
  return filter?.kind === 'cmp' && filter.op === 'eq' ? { [filter.path]: filter.value } : undefined;
}

function applyFiltered(container: Json, t: Target, op: Op, value: unknown): void {
  const key = t.attr.name;
  const list = (Array.isArray(container[key]) ? container[key] : []) as Json[];
  const hit = list.filter((item) => matches(t.filter!, item));
  if (op === 'remove') {
    const gone = new Set(hit);
    if (t.sub) for (const item of hit) delete item[t.sub.name];
    else container[key] = list.filter((item) => !gone.has(item));
    return;
  }
  if (hit.length === 0) {
    const seed = seedFromFilter(t.filter);
    if (!seed) throw scimError(400, 'noTarget', `No value of '${key}' matches the filter`);
    const item = { ...seed };
    list.push(item);
    hit.push(item);
    container[key] = list;
  }
  for (const item of hit) {
    if (t.sub) item[t.sub.name] = value;
    else if (value && typeof value === 'object') Object.assign(item, canonical(t.attr, value));
    else throw scimError(400, 'invalidValue', `'${key}' values are objects`);
  }
}

/** What identifies a value of a multi-valued attribute (its value, case-insensitively); undefined: nothing. */
function valueKey(x: unknown): string | undefined {
  const v = x && typeof x === 'object' ? (x as Json).value : x;
  return typeof v === 'string' || typeof v === 'number' ? String(v).toLowerCase() : undefined;
}

/** The list without the values whose key is among `values`' keys: one pass over each. */
function without(list: unknown[], values: unknown[]): unknown[] {
  const keys = new Set(values.map(valueKey).filter((k) => k !== undefined));
  return list.filter((item) => {
    const key = valueKey(item);
    return key === undefined || !keys.has(key);
  });
}

function applyWhole(container: Json, t: Target, op: Op, raw: unknown): void {
  const key = t.attr.name;
  const value = canonical(t.attr, raw);
  if (t.sub && t.attr.multiValued) {
    const list = (Array.isArray(container[key]) ? container[key] : []) as Json[];
    if (op === 'remove') list.forEach((item) => delete item[t.sub!.name]);
    else if (list.length === 0) container[key] = [{ [t.sub.name]: value }];
    else list.forEach((item) => (item[t.sub!.name] = value));
    return;
  }
  if (t.sub) {
    const obj = (container[key] && typeof container[key] === 'object' ? container[key] : (container[key] = {})) as Json;
    if (op === 'remove') delete obj[t.sub.name];
    else obj[t.sub.name] = value;
    return;
  }
  if (op === 'remove') {
    if (t.attr.multiValued && Array.isArray(value) && Array.isArray(container[key]))
      container[key] = without(container[key] as unknown[], value as unknown[]);
    else delete container[key];
    return;
  }
  if (t.attr.multiValued) {
    const values: unknown[] = Array.isArray(value) ? (value as unknown[]) : [value];
    const current = op === 'add' && Array.isArray(container[key]) ? (container[key] as unknown[]) : [];
    const merged = [...without(current, values), ...values];
    if (merged.length > MAX_VALUES) throw tooManyValues(t.attr.name);
    container[key] = merged;
  } else if (t.attr.type === 'complex' && value && typeof value === 'object' && container[key]) {
    Object.assign(container[key] as Json, value);
  } else container[key] = value;
}

function applyOne(resource: Json, kind: ResourceKind, op: Op, path: string, value: unknown): void {
  const target = resolvePath(kind, path);
  if (!target.attr) {
    if (target.ignored) return;
    if (op !== 'remove') return applyObject(resource, kind, op, value, target.schema);
    if (target.schema === kind.core) throw scimError(400, 'noTarget', 'remove needs a path naming an attribute');
    // the whole extension goes: what the resource is read back from no longer has its attributes
    delete resource[target.schema];
    return;
  }
  if (target.attr.mutability === 'readOnly' || target.sub?.mutability === 'readOnly')
    throw scimError(400, 'mutability', `'${target.attr.name}' is read-only`);
  const container = containerOf(resource, kind, target.schema);
  if (target.filter) applyFiltered(container, target, op, value);
  else applyWhole(container, target, op, value);
}

/** add or replace without a path: every key of the object is a path (or an extension's object). */
function applyObject(resource: Json, kind: ResourceKind, op: Op, value: unknown, schema?: string): void {
  for (const o of expandObject(kind, op, value, resource.id, schema)) applyOne(resource, kind, op, o.path, o.value);
}

function expandObject(kind: ResourceKind, op: Op, value: unknown, id: unknown, schema?: string): PathOperation[] {
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw scimError(400, 'invalidValue', `${op} without a path needs an object value`);
  const out: PathOperation[] = [];
  for (const [key, v] of Object.entries(value as Json)) {
    if (key.toLowerCase() === 'schemas') continue;
    // Okta renames a group with {id, displayName}: the unchanged id is no change
    if (key.toLowerCase() === 'id' && (!schema || schema === kind.core) && v === id) continue;
    const path = schema && schema !== kind.core ? `${schema}:${key}` : key;
    const extension = !schema && kind.extensions.find((urn) => urn.toLowerCase() === key.toLowerCase());
    if (extension) out.push(...expandObject(kind, op, v, id, extension));
    else out.push({ op, path, value: v });
  }
  return out;
}

interface PatchOperation {
  op?: unknown;
  path?: unknown;
  value?: unknown;
}

/** An operation with a path, its name in lower case. */
export interface PathOperation {
  op: Op;
  path: string;
  value: unknown;
}

/**
 * The operations checked, each with a path: one without a path, or with a path naming a whole
 * extension, and an object value becomes one per key of the object. `id`: the resource's id.
 */
export function expandOperations(kind: ResourceKind, operations: PatchOperation[], id: unknown): PathOperation[] {
  const out: PathOperation[] = [];
  for (const operation of operations) {
    const op = typeof operation.op === 'string' ? operation.op.toLowerCase() : '';
    if (op !== 'add' && op !== 'replace' && op !== 'remove')
      throw scimError(400, 'invalidSyntax', `Unknown operation '${op.slice(0, 20)}'`);
    if (operation.path !== undefined && typeof operation.path !== 'string')
      throw scimError(400, 'invalidPath', 'path must be a string');
    if (op !== 'remove' && operation.value === undefined) throw scimError(400, 'invalidValue', `${op} needs a value`);
    const path = operation.path?.trim() ?? '';
    if (path === '') {
      if (op === 'remove') throw scimError(400, 'noTarget', 'remove needs a path');
      out.push(...expandObject(kind, op, operation.value, id));
      continue;
    }
    const extension = op !== 'remove' && kind.extensions.find((urn) => urn.toLowerCase() === path.toLowerCase());
    if (extension) out.push(...expandObject(kind, op, operation.value, id, extension));
    else out.push({ op, path, value: operation.value });
  }
  return out;
}

/** Applies the operations, in order, to a copy of the resource; any failure leaves nothing applied. */
export function applyPatch(resource: Json, kind: ResourceKind, operations: PatchOperation[]): Json {
  const copy = structuredClone(resource);
  for (const o of expandOperations(kind, operations, resource.id)) {
    if (Array.isArray(o.value) && o.value.length > MAX_VALUES)
      throw scimError(400, 'invalidValue', `An operation carries at most ${MAX_VALUES} values`);
    applyOne(copy, kind, o.op, o.path, o.value);
  }
  return copy;
}
