// A user as a SCIM User resource (core, enterprise and education extensions), a User resource read
// back into directory attributes, and filters on users as conditions on the users table's columns.
import type { User } from '../directory/index.ts';
import type { DirectoryAttributes } from '../directory/directory-attributes.ts';
import type { Condition } from '../store/provisioning.ts';
import { iso } from '../time.ts';
import { scimError } from './errors.ts';
import { MAX_VALUES } from './patch.ts';
import { stringValue, type ColumnMap } from './query.ts';
import { EDU_USER, ENTERPRISE, PASSWORD_USER, USER } from './schemas.ts';
import { passwordHashProblem } from '../directory/passwords.ts';

type Json = Record<string, unknown>;

export const versionOf = (updatedAt: number) => `W/"${updatedAt}"`;
const words = (value: string | null) => (value ? value.split(' ').filter(Boolean) : undefined);

function compact(o: Json): Json | undefined {
  const out = Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));
  return Object.keys(out).length ? out : undefined;
}

export function userResource(user: User, groups: { uid: string; display_name: string }[], base: string): Json {
  const location = `${base}/Users/${user.sub}`;
  const enterprise = compact({ employeeNumber: user.employee_number, department: user.org_unit });
  const edu = compact({
    affiliation: words(user.affiliation),
    primaryAffiliation: user.primary_affiliation,
    orgUnit: user.org_unit,
    studentNumber: user.student_number,
    entitlement: words(user.entitlement),
  });
  return compact({
    schemas: [USER, ...(enterprise ? [ENTERPRISE] : []), ...(edu ? [EDU_USER] : [])],
    id: user.sub,
    externalId: user.external_id,
    userName: user.eppn,
    name: compact({ formatted: user.name, givenName: user.given_name, familyName: user.family_name }),
    displayName: user.display_name,
    title: user.title,
    active: user.disabled_at === null,
    // primary as the directory sent it; true when it never said (users of the import or the CLI)
    emails: user.email ? [{ value: user.email, type: 'work', primary: user.email_primary !== 0 }] : undefined,
    groups: groups.length
      ? groups.map((g) => ({ value: g.uid, $ref: `${base}/Groups/${g.uid}`, display: g.display_name }))
      : undefined,
    [ENTERPRISE]: enterprise,
    [EDU_USER]: edu,
    meta: {
      resourceType: 'User',
      created: iso(user.created_at),
      lastModified: iso(user.updated_at),
      location,
      version: versionOf(user.updated_at),
    },
  })!;
}

/** A key of a JSON object, whatever its case (attribute names are case-insensitive). */
function get(o: unknown, name: string): unknown {
  if (!o || typeof o !== 'object') return undefined;
  const key = Object.keys(o).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : (o as Json)[key];
}

function optionalText(o: unknown, name: string): string | null {
  const v = get(o, name);
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw scimError(400, 'invalidValue', `${name} must be a string`);
  return v;
}

/** Booleans as JSON, and as the strings "True"/"False" Entra ID sends. */
export function booleanOf(value: unknown, name: string): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw scimError(400, 'invalidValue', `${name} must be true or false`);
}

function stringList(value: unknown, name: string): string[] {
  if (value === undefined || value === null) return [];
  const list: unknown[] = Array.isArray(value) ? (value as unknown[]) : [value];
  if (list.length > MAX_VALUES) throw scimError(400, 'invalidValue', `${name} has at most ${MAX_VALUES} values`);
  return list.map((v) => {
    const s = typeof v === 'object' && v !== null ? get(v, 'value') : v;
    if (typeof s !== 'string') throw scimError(400, 'invalidValue', `${name} values must be strings`);
    return s;
  });
}

/** The address kept (the primary one, else the first) and what was said of it being primary (null: nothing). */
function primaryEmail(value: unknown): { email: string | null; primary: boolean | null } {
  if (value === undefined || value === null) return { email: null, primary: null };
  if (!Array.isArray(value)) throw scimError(400, 'invalidValue', 'emails must be a list');
  const values = value as unknown[];
  if (values.length > MAX_VALUES) throw scimError(400, 'invalidValue', `emails has at most ${MAX_VALUES} values`);
  const said = values.map((e) => booleanOf(get(e, 'primary'), 'primary'));
  const index = Math.max(0, said.indexOf(true));
  if (values.length === 0) return { email: null, primary: null };
  return { email: optionalText(values[index], 'value'), primary: said[index] ?? null };
}

export interface UserInput {
  userName: string;
  name: string;
  attributes: DirectoryAttributes;
  active: boolean | undefined;
  /** the password extension's passwordHash, checked */
  passwordHash?: string;
}

/** The password extension's hash: its format and bounds checked; the reason never repeats it. */
function passwordHashOf(body: unknown): string | undefined {
  const value = get(get(body, PASSWORD_USER), 'passwordHash');
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw scimError(400, 'invalidValue', 'passwordHash must be a string');
  const problem = passwordHashProblem(value);
  if (problem) throw scimError(400, 'invalidValue', `passwordHash ${problem}`);
  return value;
}

/** The whole resource (POST, PUT, a patched resource): what it leaves out is cleared. */
export function readUser(body: unknown): UserInput {
  if (!body || typeof body !== 'object' || Array.isArray(body))
    throw scimError(400, 'invalidSyntax', 'Body must be a JSON object');
  const userName = get(body, 'userName');
  if (typeof userName !== 'string' || !userName.trim()) throw scimError(400, 'invalidValue', 'userName is required');
  const name = get(body, 'name');
  const enterprise = get(body, ENTERPRISE);
  const edu = get(body, EDU_USER);
  const given = optionalText(name, 'givenName');
  const family = optionalText(name, 'familyName');
  const displayName = optionalText(body, 'displayName');
  const email = primaryEmail(get(body, 'emails'));
  const fullName =
    optionalText(name, 'formatted') ?? displayName ?? ([given, family].filter(Boolean).join(' ') || userName);
  return {
    userName: userName.trim(),
    name: fullName,
    active: booleanOf(get(body, 'active'), 'active'),
    passwordHash: passwordHashOf(body),
    attributes: {
      externalId: optionalText(body, 'externalId'),
      givenName: given,
      familyName: family,
      displayName,
      title: optionalText(body, 'title'),
      email: email.email,
      emailPrimary: email.email === null ? null : email.primary,
      employeeNumber: optionalText(enterprise, 'employeeNumber'),
      orgUnit: optionalText(edu, 'orgUnit') ?? optionalText(enterprise, 'department'),
      affiliation: stringList(get(edu, 'affiliation'), 'affiliation'),
      primaryAffiliation: optionalText(edu, 'primaryAffiliation'),
      studentNumber: optionalText(edu, 'studentNumber'),
      entitlement: stringList(get(edu, 'entitlement'), 'entitlement'),
    },
  };
}

const COLUMNS: Record<string, { column: string; lower?: boolean; caseExact?: boolean }> = {
  id: { column: 'sub', caseExact: true },
  externalid: { column: 'external_id', caseExact: true },
  // stored in lower case: compared as is, so eq is an index lookup
  username: { column: 'eppn', lower: true, caseExact: true },
  emails: { column: 'email', lower: true, caseExact: true },
  'emails.value': { column: 'email', lower: true, caseExact: true },
  displayname: { column: 'display_name' },
  'name.formatted': { column: 'name' },
  'name.givenname': { column: 'given_name' },
  'name.familyname': { column: 'family_name' },
  title: { column: 'title' },
  'enterprise:employeenumber': { column: 'employee_number', caseExact: true },
  'enterprise:department': { column: 'org_unit' },
  'education:orgunit': { column: 'org_unit' },
  'education:studentnumber': { column: 'student_number', caseExact: true },
  'education:primaryaffiliation': { column: 'primary_affiliation' },
};

const TIMES: Record<string, string> = { 'meta.created': 'created_at', 'meta.lastmodified': 'updated_at' };

function timeCondition(column: string, f: { op: string; value: unknown; path: string }): Condition {
  const ms = typeof f.value === 'string' ? Date.parse(f.value) : NaN;
  if (Number.isNaN(ms) || !['gt', 'ge', 'lt', 'le', 'eq'].includes(f.op))
    throw scimError(400, 'invalidFilter', `'${f.path}' is compared (gt, ge, lt, le, eq) with a date and time`);
  return { column, op: f.op as 'gt', value: ms };
}

export const userColumns: ColumnMap = (key, f) => {
  if (key === 'active') {
    const active = booleanOf(f.value, 'active');
    if (f.op === 'pr') return { constant: true };
    if (active === undefined || (f.op !== 'eq' && f.op !== 'ne'))
      throw scimError(400, 'invalidFilter', 'active is compared (eq, ne) with true or false');
    return { disabled: (f.op === 'eq') !== active };
  }
  if (key === 'emails.type')
    return f.op === 'pr' || (f.op === 'eq' && f.value === 'work')
      ? { column: 'email', op: 'pr', value: null }
      : { constant: false };
  if (TIMES[key]) return timeCondition(TIMES[key], f);
  const spec = COLUMNS[key];
  if (!spec) return undefined;
  if (f.op === 'pr') return { column: spec.column, op: 'pr', value: null };
  const value = stringValue(f.value, f.path);
  return { column: spec.column, op: f.op, value: spec.lower ? value.toLowerCase() : value, caseExact: spec.caseExact };
};
