// Bulk user import (docs/user-import.md): an organization's users from a CSV or JSON lines file,
// created or updated by eppn, or by external_id when the line has one. Lines go in batches: a
// batch's existing users are read with two queries and its new and changed users written with
// multi-row statements, in one transaction per batch (default) or one for the whole file
// (transactional). Every attribute is checked by directoryColumns(), as for every other surface
// that provisions users. One `user.import` audit record per run, not one per user.
import { randomUUID } from 'node:crypto';
import { basename } from 'node:path';
import { statSync } from 'node:fs';
import type { Insertable, Kysely, Transaction } from 'kysely';
import type { DB, UsersTable } from '../store/schema.ts';
import type { Store } from '../store/index.ts';
import { findOrganization, type Organization, type User } from '../store/directory.ts';
import {
  findImportMatches,
  insertImportedUsers,
  lockForImport,
  updateImportedUsers,
  setImportedPasswords,
  tuneForImport,
} from '../store/user-import.ts';
import { passwordHashProblem } from './passwords.ts';
import { publishAll } from '../store/invalidation.ts';
import { AppError, badRequest, notFound } from '../errors.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { notifyEmailChanges } from '../audit/notifications.ts';
import type { EmailChange } from '../audit/events.ts';
import { eppnProblem, normalizeEppn, realmOf } from './index.ts';
import { directoryColumns, type DirectoryAttributes, type DirectoryColumns } from './directory-attributes.ts';
import { importFormat, readImportFile, type ImportFields, type ImportRecord } from './user-import-file.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Lines per transaction (default mode): other writers wait a fraction of a second at most, not the whole import. */
export const IMPORT_BATCH = 5000;

export interface ImportOptions {
  orgId: number;
  file: string;
  /** read and check everything, write nothing */
  dryRun?: boolean;
  /** all or nothing: one transaction, rolled back when any line is rejected */
  transactional?: boolean;
  /** told after every batch: lines read so far, bytes of the file read and its size */
  onProgress?(progress: { lines: number; bytes: number; size: number }): void;
}

export interface ImportRejection {
  line: number;
  error: string;
}

export interface ImportSummary {
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  rejections: ImportRejection[];
  /** users found by external_id whose eppn the file changes (counted in updated) */
  renamed: number;
  dry_run: boolean;
  transactional: boolean;
  /** false when nothing was written: a dry run, or a transactional run with a rejected line */
  written: boolean;
  /** users given the password hash of their line (new users, and existing ones without password or passkey) */
  passwords: number;
}

interface Prepared {
  line: number;
  eppn: string;
  externalId?: string;
  attributes: DirectoryAttributes;
  /** an existing hash (docs/user-import.md, Passwords), checked */
  passwordHash?: string;
}

interface RunState {
  org: Organization;
  summary: ImportSummary;
  /** the line each eppn and external_id of the file was first seen on */
  eppns: Map<string, number>;
  externalIds: Map<string, number>;
  /** the line that took each existing user, and the eppns users were renamed from, over the whole run */
  claimed: Map<number, number>;
  renamedFrom: Map<string, number>;
  lines: number;
  stopped: boolean;
  now: number;
  actor: Actor;
}

const nonEmpty = (v: string | string[] | null | undefined): string | undefined =>
  typeof v === 'string' && v.trim() !== '' ? v : undefined;

function list(v: string | string[] | null | undefined): string[] | undefined {
  if (v === undefined) return undefined;
  if (v === null) return [];
  return Array.isArray(v) ? v : v.split(';');
}

function text(v: string | string[] | null | undefined): string | null | undefined {
  return Array.isArray(v) ? v.join(';') : v;
}

/** The file's fields as directory attributes: absent is left alone, empty clears (but never the name or external_id). */
export function attributesOf(f: ImportFields): DirectoryAttributes {
  const given = nonEmpty(f.given_name);
  const family = nonEmpty(f.family_name);
  const composed = given || family ? [given, family].filter(Boolean).join(' ') : undefined;
  return {
    name: nonEmpty(text(f.name) ?? undefined) ?? composed,
    givenName: text(f.given_name),
    familyName: text(f.family_name),
    displayName: text(f.display_name),
    email: text(f.email),
    affiliation: list(f.affiliation),
    primaryAffiliation: text(f.primary_affiliation),
    orgUnit: text(f.org_unit),
    title: text(f.title),
    employeeNumber: text(f.employee_number),
    studentNumber: text(f.student_number),
    entitlement: list(f.entitlement),
  };
}

/** The checks a line passes on its own and against the lines before it. */
function prepare(state: RunState, record: ImportRecord): Prepared | ImportRejection {
  const { line } = record;
  if (record.error !== undefined || !record.fields) return { line, error: record.error ?? 'unreadable' };
  const raw = nonEmpty(text(record.fields.eppn));
  if (raw === undefined) return { line, error: 'eppn is missing' };
  const eppn = normalizeEppn(raw);
  const problem = eppnProblem(eppn);
  if (problem) return { line, error: `eppn '${raw.slice(0, 80)}' ${problem}` };
  if (realmOf(eppn) !== state.org.realm)
    return { line, error: `eppn realm '${realmOf(eppn)}' is not the organization's ('${state.org.realm}')` };
  const seen = state.eppns.get(eppn);
  if (seen !== undefined) return { line, error: `eppn '${eppn}' is also on line ${seen}` };
  state.eppns.set(eppn, line);
  const externalId = nonEmpty(text(record.fields.external_id))?.trim();
  if (externalId !== undefined) {
    const before = state.externalIds.get(externalId);
    if (before !== undefined)
      return { line, error: `external_id '${externalId.slice(0, 80)}' is also on line ${before}` };
    state.externalIds.set(externalId, line);
  }
  const passwordHash = nonEmpty(text(record.fields.password_hash))?.trim();
  // the reason names the format and its parameters, never the hash
  const weak = passwordHash === undefined ? undefined : passwordHashProblem(passwordHash);
  if (weak !== undefined) return { line, error: `password_hash ${weak}` };
  return { line, eppn, externalId, passwordHash, attributes: { ...attributesOf(record.fields), externalId } };
}

type Decision =
  | { kind: 'create'; row: Insertable<UsersTable> }
  | { kind: 'update'; user: User; renamed: boolean; password?: string; emailFrom?: string | null }
  | { kind: 'unchanged' }
  | { kind: 'reject'; error: string };

type Matches = Awaited<ReturnType<typeof findImportMatches>>;

/** The existing user a line is about, or why it cannot be told. */
function target(org: Organization, p: Prepared, m: Matches): User | undefined | string {
  const byEppn = m.byEppn.get(p.eppn);
  const byExternalId = p.externalId === undefined ? undefined : m.byExternalId.get(p.externalId);
  if (byEppn && byEppn.org_id !== org.id) return `eppn '${p.eppn}' belongs to another organization`;
  if (byEppn && byExternalId && byEppn.id !== byExternalId.id)
    return `external_id '${p.externalId}' belongs to '${byExternalId.eppn}', not to '${p.eppn}'`;
  if (byEppn && !byExternalId && p.externalId !== undefined && byEppn.external_id !== null)
    return `'${p.eppn}' has another external_id ('${byEppn.external_id}')`;
  // An account an upstream sign-in made or linked is not the directory's person just because the
  // eppn is the same: the line must name it by its external_id (or the link be removed first).
  if (byEppn && !byExternalId && byEppn.external_id === null && m.upstreamLinked.has(byEppn.id))
    return `'${p.eppn}' is linked to an upstream identity and has no external_id: not merged (remove the link or set its external_id first)`;
  return byExternalId ?? byEppn;
}

function newUser(org: Organization, p: Prepared, c: DirectoryColumns, now: number): Insertable<UsersTable> {
  return {
    sub: randomUUID(),
    org_id: org.id,
    eppn: p.eppn,
    name: c.name!,
    email: c.email ?? null,
    nin: null,
    password_hash: p.passwordHash ?? null,
    photo_handle: null,
    created_at: now,
    updated_at: now,
    display_name: c.display_name ?? null,
    email_verified: 0,
    external_id: c.external_id ?? null,
    given_name: c.given_name ?? null,
    family_name: c.family_name ?? null,
    affiliation: c.affiliation ?? null,
    primary_affiliation: c.primary_affiliation ?? null,
    org_unit: c.org_unit ?? null,
    title: c.title ?? null,
    employee_number: c.employee_number ?? null,
    student_number: c.student_number ?? null,
    entitlement: c.entitlement ?? null,
  };
}

/** What to do with one line, given the users that exist. */
function decide(state: RunState, p: Prepared, m: Matches): Decision {
  const { claimed } = state;
  const user = target(state.org, p, m);
  if (typeof user === 'string') return { kind: 'reject', error: user };
  // A user renamed by an earlier batch is no longer found under its old eppn: still the same user.
  const before = user ? claimed.get(user.id) : state.renamedFrom.get(p.eppn);
  if (before !== undefined) return { kind: 'reject', error: `the same user as line ${before}` };
  let columns: DirectoryColumns;
  try {
    columns = directoryColumns(p.attributes, { affiliation: user?.affiliation ?? null });
  } catch (err) {
    if (err instanceof AppError) return { kind: 'reject', error: err.message };
    throw err;
  }
  if (!user) {
    if (!columns.name)
      return { kind: 'reject', error: 'a new user needs a name (name, or given_name and family_name)' };
    return { kind: 'create', row: newUser(state.org, p, columns, state.now) };
  }
  claimed.set(user.id, p.line);
  const changed = (Object.keys(columns) as (keyof DirectoryColumns)[]).filter((k) => columns[k] !== user[k]);
  const renamed = user.eppn !== p.eppn;
  if (renamed) state.renamedFrom.set(user.eppn, p.line);
  // A user who has a password keeps it (it may be the argon2id one a sign-in made of the imported
  // hash); one who has a passkey but no password signs in with passkeys only and stays so.
  const password =
    p.passwordHash !== undefined && user.password_hash === null && user.passkey_count === 0
      ? p.passwordHash
      : undefined;
  if (changed.length === 0 && !renamed && password === undefined) return { kind: 'unchanged' };
  const after: User = { ...user, ...columns, eppn: p.eppn, updated_at: state.now };
  // A new address is unverified, as when an operator changes it (setUserAttributes), and what a
  // directory said of the old one being primary (SCIM) no longer holds.
  if (changed.includes('email')) Object.assign(after, { email_verified: 0, email_primary: null });
  return {
    kind: 'update',
    user: after,
    renamed,
    password,
    ...(changed.includes('email') ? { emailFrom: user.email } : {}),
  };
}

/** One batch: read what exists, decide each line, write the new and changed users. */
async function runBatch(q: Q, state: RunState, records: ImportRecord[], write: boolean): Promise<void> {
  const { summary } = state;
  const reject = (r: ImportRejection) => {
    summary.rejected++;
    summary.rejections.push(r);
  };
  const prepared: Prepared[] = [];
  for (const record of records) {
    const p = prepare(state, record);
    if ('error' in p) reject(p);
    else prepared.push(p);
    if (record.fatal) state.stopped = true;
  }
  const matches = await findImportMatches(
    q,
    state.org.id,
    prepared.map((p) => p.eppn),
    prepared.flatMap((p) => (p.externalId === undefined ? [] : [p.externalId])),
  );
  const creates: Insertable<UsersTable>[] = [];
  const updates: User[] = [];
  const passwords: { id: number; hash: string }[] = [];
  const emailChanges: EmailChange[] = [];
  for (const p of prepared) {
    const d = decide(state, p, matches);
    if (d.kind === 'reject') reject({ line: p.line, error: d.error });
    else if (d.kind === 'unchanged') summary.unchanged++;
    else if (d.kind === 'create') creates.push(d.row);
    else {
      updates.push(d.user);
      if (d.renamed) summary.renamed++;
      if (d.password !== undefined) passwords.push({ id: d.user.id, hash: d.password });
      if (d.emailFrom !== undefined)
        emailChanges.push({ eppn: d.user.eppn, orgId: d.user.org_id, from: d.emailFrom, to: d.user.email });
    }
  }
  summary.created += creates.length;
  summary.updated += updates.length;
  const newPasswords = creates.filter((c) => c.password_hash !== null).length;
  if (!write) {
    summary.passwords += newPasswords + passwords.length;
    return;
  }
  await insertImportedUsers(q, creates);
  await updateImportedUsers(q, updates);
  summary.passwords += newPasswords + (await setImportedPasswords(q, passwords, state.now));
  // each user whose address the import changed is told, in the batch's transaction
  await notifyEmailChanges(q, emailChanges, { action: 'user.import', actor: state.actor, at: state.now });
  // Userinfo keeps claims per user: the changed users' entries must go, in every process.
  await publishAll(
    q,
    'user',
    updates.map((u) => u.sub),
    state.now,
  );
}

/** Reads the file in batches; `batch` runs each (in a transaction of its own, or in the run's). */
async function eachBatch(
  state: RunState,
  options: ImportOptions,
  batch: (records: ImportRecord[]) => Promise<void>,
): Promise<void> {
  const size = statSync(options.file).size;
  let bytes = 0;
  let records: ImportRecord[] = [];
  const flush = async () => {
    await batch(records);
    state.lines += records.length;
    records = [];
    options.onProgress?.({ lines: state.lines, bytes, size });
  };
  for await (const record of readImportFile(options.file, (n) => (bytes += n))) {
    records.push(record);
    if (record.fatal || records.length >= IMPORT_BATCH) await flush();
    if (state.stopped) break;
  }
  if (records.length > 0) await flush();
  options.onProgress?.({ lines: state.lines, bytes: size, size });
}

class RolledBack extends Error {}

async function audit(q: Q, state: RunState, options: ImportOptions, change: Change, incomplete = false) {
  const { summary: s } = state;
  const details = {
    file: basename(options.file),
    created: s.created,
    updated: s.updated,
    unchanged: s.unchanged,
    rejected: s.rejected,
    renamed: s.renamed,
    passwords: s.passwords,
    transactional: s.transactional,
    ...(incomplete ? { incomplete: true, lines_read: state.lines } : {}),
  };
  const orgId = state.org.id;
  const actor = change.actor ?? SYSTEM;
  await recordAudit(q, { action: 'user.import', actor, at: state.now, subject: String(orgId), orgId, details });
}

/** A failure that is not a line's: told without the database's words, with what was kept. */
function stopped(state: RunState, kept: boolean): AppError {
  const where = `after ${state.lines} line(s)`;
  return new AppError(
    500,
    kept
      ? `the import stopped ${where} (a database error); the batches before were written: run it again, it is idempotent`
      : `the import stopped ${where} (a database error); nothing was written`,
  );
}

function checkFile(file: string): void {
  importFormat(file);
  let ok: boolean;
  try {
    ok = statSync(file).isFile();
  } catch {
    ok = false;
  }
  if (!ok) throw badRequest(`cannot read '${file}'`);
}

/** Imports the file's users into the organization; see docs/user-import.md. */
export async function importUsers(store: Store, options: ImportOptions, change: Change = {}): Promise<ImportSummary> {
  checkFile(options.file);
  const org = await findOrganization(store.db, options.orgId);
  if (!org) throw notFound(`organization ${options.orgId} does not exist`);
  const dryRun = options.dryRun === true;
  const transactional = options.transactional === true;
  const summary: ImportSummary = {
    ...{ created: 0, updated: 0, unchanged: 0, rejected: 0, rejections: [], renamed: 0 },
    ...{ dry_run: dryRun, transactional, written: !dryRun, passwords: 0 },
  };
  const state: RunState = {
    ...{ org, summary, eppns: new Map(), externalIds: new Map(), claimed: new Map(), renamedFrom: new Map() },
    ...{ lines: 0, stopped: false, now: change.now ?? Date.now(), actor: change.actor ?? SYSTEM },
  };
  const untune = await tuneForImport(store.db, store.dialect);
  try {
    if (dryRun) await eachBatch(state, options, (records) => runBatch(store.db, state, records, false));
    else if (transactional) await allOrNothing(store, state, options, change);
    else await batchByBatch(store, state, options, change);
  } finally {
    await untune().catch(() => {});
  }
  summary.rejections.sort((a, b) => a.line - b.line);
  return summary;
}

async function allOrNothing(store: Store, state: RunState, options: ImportOptions, change: Change): Promise<void> {
  try {
    await store.db.transaction().execute(async (trx) => {
      await lockForImport(trx);
      // After the first rejected line nothing more is written: it is all going to be rolled back.
      await eachBatch(state, options, (records) => runBatch(trx, state, records, state.summary.rejected === 0));
      if (state.summary.rejected > 0) throw new RolledBack();
      await audit(trx, state, options, change);
    });
  } catch (err) {
    state.summary.written = false;
    if (err instanceof RolledBack) return;
    if (err instanceof AppError) throw err;
    throw stopped(state, false);
  }
}

async function batchByBatch(store: Store, state: RunState, options: ImportOptions, change: Change): Promise<void> {
  try {
    await eachBatch(state, options, (records) =>
      store.db.transaction().execute(async (trx) => {
        await lockForImport(trx);
        await runBatch(trx, state, records, true);
      }),
    );
  } catch (err) {
    if (state.lines > 0) await audit(store.db, state, options, change, true).catch(() => {});
    if (err instanceof AppError) throw err;
    throw stopped(state, state.lines > 0);
  }
  await audit(store.db, state, options, change);
}
