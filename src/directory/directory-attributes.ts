// The attributes an organization's directory provides about a user (SCIM, bulk import): checked
// and normalized in one place, so every surface that writes them accepts and refuses the same
// values with the same messages, and turned into the users table's columns.
import { badRequest } from '../errors.ts';
import { normalizeEmail } from './index.ts';

/** eduPersonAffiliation's controlled vocabulary (eduPerson 202208). */
export const AFFILIATIONS = [
  'student',
  'faculty',
  'staff',
  'employee',
  'member',
  'affiliate',
  'alum',
  'library-walk-in',
] as const;
export type Affiliation = (typeof AFFILIATIONS)[number];

/** What the directory says; undefined: not given (left as it is), null or []: cleared. */
export interface DirectoryAttributes {
  externalId?: string | null;
  /** the full name; required when a user is created */
  name?: string;
  givenName?: string | null;
  familyName?: string | null;
  displayName?: string | null;
  email?: string | null;
  /** whether the directory calls the address primary (SCIM); null: not said */
  emailPrimary?: boolean | null;
  affiliation?: string[];
  primaryAffiliation?: string | null;
  orgUnit?: string | null;
  title?: string | null;
  employeeNumber?: string | null;
  studentNumber?: string | null;
  entitlement?: string[];
}

/** The users table's columns for those attributes. */
export interface DirectoryColumns {
  external_id?: string | null;
  name?: string;
  given_name?: string | null;
  family_name?: string | null;
  display_name?: string | null;
  email?: string | null;
  /** 1/0, null when the directory did not say (or there is no address) */
  email_primary?: number | null;
  affiliation?: string | null;
  primary_affiliation?: string | null;
  org_unit?: string | null;
  title?: string | null;
  employee_number?: string | null;
  student_number?: string | null;
  entitlement?: string | null;
}

const CONTROL = /[\u0000-\u001f\u007f]/;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,253}$/;
const URI = /^[a-z][a-z0-9+.-]*:[^\s]+$/i;

function text(field: string, value: string | null | undefined, max: number): string | null | undefined {
  if (value === undefined || value === null) return value;
  if (typeof value !== 'string') throw badRequest(`${field} must be a string`);
  const trimmed = value.trim();
  if (trimmed.length > max || CONTROL.test(trimmed))
    throw badRequest(`${field} must be at most ${max} characters, one line`);
  return trimmed === '' ? null : trimmed;
}

function affiliations(values: string[] | undefined): string | null | undefined {
  if (values === undefined) return undefined;
  if (!Array.isArray(values)) throw badRequest('affiliation must be a list');
  const list = [...new Set(values.map((v) => String(v).trim().toLowerCase()).filter(Boolean))];
  const unknown = list.find((v) => !(AFFILIATIONS as readonly string[]).includes(v));
  if (unknown !== undefined)
    throw badRequest(`affiliation '${unknown.slice(0, 40)}' is not one of ${AFFILIATIONS.join(', ')}`);
  return list.length ? list.join(' ') : null;
}

function entitlements(values: string[] | undefined): string | null | undefined {
  if (values === undefined) return undefined;
  if (!Array.isArray(values) || values.length > 100) throw badRequest('entitlement must be a list of at most 100 URIs');
  const list = [...new Set(values.map((v) => String(v).trim()).filter(Boolean))];
  const bad = list.find((v) => !URI.test(v) || v.length > 500);
  if (bad !== undefined) throw badRequest(`entitlement '${bad.slice(0, 40)}' is not a URI`);
  return list.length ? list.join(' ') : null;
}

/**
 * Checks and normalizes the attributes. `current` is the affiliation already stored, which the
 * primary affiliation must be one of (eduPerson: the primary affiliation is also an affiliation).
 */
export function directoryColumns(
  input: DirectoryAttributes,
  current: { affiliation?: string | null } = {},
): DirectoryColumns {
  const out: DirectoryColumns = {};
  const set = <K extends keyof DirectoryColumns>(key: K, value: DirectoryColumns[K] | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  if (input.name !== undefined) {
    const name = text('name', input.name, 200);
    if (!name) throw badRequest('name must be 1-200 characters');
    out.name = name;
  }
  set('external_id', text('externalId', input.externalId, 200));
  set('given_name', text('givenName', input.givenName, 200));
  set('family_name', text('familyName', input.familyName, 200));
  set('display_name', text('displayName', input.displayName, 200));
  const email = text('email', input.email, 320);
  if (email !== undefined && email !== null && !EMAIL.test(email))
    throw badRequest(`email '${email.slice(0, 80)}' is not a valid address`);
  set('email', email === undefined || email === null ? email : normalizeEmail(email));
  if (input.emailPrimary !== undefined)
    out.email_primary = email === null || input.emailPrimary === null ? null : input.emailPrimary ? 1 : 0;
  set('affiliation', affiliations(input.affiliation));
  const primary = text('primaryAffiliation', input.primaryAffiliation, 40)?.toLowerCase();
  if (primary) {
    const all = (out.affiliation ?? current.affiliation ?? '').split(' ');
    if (!all.includes(primary))
      throw badRequest(`primaryAffiliation '${primary}' must also be one of the affiliations`);
  }
  set('primary_affiliation', primary);
  set('org_unit', text('orgUnit', input.orgUnit, 200));
  set('title', text('title', input.title, 200));
  set('employee_number', text('employeeNumber', input.employeeNumber, 64));
  set('student_number', text('studentNumber', input.studentNumber, 64));
  set('entitlement', entitlements(input.entitlement));
  return out;
}

/** The attribute names a change touched, for the audit record (never their values). */
export const changedFields = (columns: DirectoryColumns) => Object.keys(columns).sort();
