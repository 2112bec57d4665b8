// Who exists: organizations and their users.
import { listUserCredentials } from '../store/passkeys.ts';
import { randomUUID } from 'node:crypto';
import type { Store } from '../store/index.ts';
import { isUniqueViolation, transact } from '../store/index.ts';
import * as dir from '../store/directory.ts';
import { setImportedPasswords } from '../store/user-import.ts';
import type { Insertable, Transaction } from 'kysely';
import type { DB, UsersTable } from '../store/schema.ts';
import { publish } from '../store/invalidation.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { hashPassword, passwordHashProblem, validatePassword } from './passwords.ts';
import { SECONDARY_NAMESPACES } from '../vocabulary.ts';
import { recordAudit, recordAudits, SYSTEM, type AuditEntry, type Change } from '../audit/index.ts';
import { parseStoredBrand, storedBrand, type Brand } from '../brand.ts';

export type { Organization, User, UserAccount } from '../store/directory.ts';

export { accountDisabled } from './account-state.ts';

const REALM = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$/;
const LOCAL_PART = /^[a-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}$/;

/** eppn are compared case-insensitively: stored and looked up in lower case. */
export function normalizeEppn(eppn: string): string {
  return eppn.trim().toLowerCase();
}

/** Mail addresses are stored and compared in lower case (people type them in any case). */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export function realmOf(eppn: string): string {
  return eppn.slice(eppn.lastIndexOf('@') + 1);
}

/** Returns a problem description, or undefined when eppn is well formed (user@realm). */
export function eppnProblem(eppn: string): string | undefined {
  if (eppn.length > 320) return 'is too long';
  const at = eppn.lastIndexOf('@');
  if (at < 0) return "must contain '@'";
  if (!LOCAL_PART.test(eppn.slice(0, at))) return 'has an invalid user part';
  if (!REALM.test(eppn.slice(at + 1))) return 'has an invalid realm';
  return undefined;
}

export interface NewOrganization {
  id: number;
  realm: string;
  name: string;
}

export async function addOrganization(
  store: Store,
  input: NewOrganization,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<dir.Organization> {
  if (!Number.isSafeInteger(input.id) || input.id < 1) throw badRequest('organization id must be a positive integer');
  const realm = input.realm.trim().toLowerCase();
  if (!REALM.test(realm)) throw badRequest(`realm '${input.realm}' is not a valid domain name`);
  const name = input.name.trim();
  if (!name || name.length > 200) throw badRequest('organization name must be 1-200 characters');
  const org = { id: input.id, realm, name, created_at: now, branding: null, passkey_policy: null, disabled_at: null };
  try {
    await store.db.transaction().execute(async (trx) => {
      await dir.insertOrganization(trx, org);
      await recordAudit(trx, { action: 'org.add', actor, at: now, subject: String(org.id), orgId: org.id });
    });
  } catch (err) {
    if (isUniqueViolation(err)) {
      const byId = await dir.findOrganization(store.db, input.id);
      throw conflict(
        byId ? `organization ${input.id} already exists` : `realm '${realm}' already belongs to another organization`,
      );
    }
    throw err;
  }
  return org;
}

/**
 * Sets an organization's branding over the deployment's: the given fields replace its own, the
 * others stay (all go first with clear). Values are checked as the BRAND_* settings are.
 */
export async function setOrganizationBrand(
  store: Store,
  orgId: number,
  input: { brand: Brand; clear?: boolean },
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<Brand> {
  return store.db.transaction().execute(async (trx) => {
    const org = await dir.findOrganization(trx, orgId);
    if (!org) throw notFound(`organization ${orgId} not found`);
    const brand: Brand = { ...(input.clear ? {} : parseStoredBrand(org.branding)), ...input.brand };
    const empty = Object.keys(brand).length === 0;
    await dir.updateOrganizationBranding(trx, orgId, empty ? null : storedBrand(brand));
    const details = {
      set: Object.keys(input.brand).sort(),
      cleared: input.clear === true,
      ...(input.brand.logo ? { logo: { type: input.brand.logo.type, bytes: input.brand.logo.data.length } } : {}),
    };
    await recordAudit(trx, { action: 'org.brand', actor, at: now, subject: String(orgId), orgId, details });
    return brand;
  });
}

export interface OrganizationState {
  id: number;
  disabled: boolean;
  /** false when the organization already was in the state asked for (nothing was written) */
  changed: boolean;
}

/**
 * Disables or enables an organization. While it is disabled none of its users signs in, by any
 * method, and their sessions, refresh and access tokens are refused (accountDisabled above); nothing
 * of theirs is deleted, so enabling it gives every user back what they had, and a user disabled on
 * their own stays disabled. Published as the organization's invalidation, so what caches kept for
 * its users (userinfo's claims) is dropped at once.
 */
export async function setOrganizationDisabled(
  store: Store,
  orgId: number,
  disabled: boolean,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<OrganizationState> {
  return transact(store.db, async (trx) => {
    const org = await dir.findOrganization(trx, orgId);
    if (!org) throw notFound(`organization ${orgId} not found`);
    if (!(await dir.updateOrganizationDisabled(trx, orgId, disabled ? now : null)))
      return { id: orgId, disabled, changed: false };
    await publish(trx, 'organization', String(orgId));
    const action = disabled ? 'org.disable' : 'org.enable';
    await recordAudit(trx, { action, actor, at: now, subject: String(orgId), orgId, details: { realm: org.realm } });
    return { id: orgId, disabled, changed: true };
  });
}

export interface NewUser {
  orgId: number;
  eppn: string;
  name: string;
  email?: string;
  nin?: string;
  password?: string;
  /** an existing hash another system made (docs/user-import.md, Passwords), instead of a password */
  passwordHash?: string;
  /** directory attributes written with the user, in the same transaction (checked by directoryColumns()) */
  directory?: Omit<dir.UserChanges, 'name' | 'disabled_at' | 'updated_at'>;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,253}$/;
const NIN = /^\d{11}$/;

/**
 * A new user of the organization checked as every surface checks one, the password too (addUser
 * hashes it afterwards): their eppn and name as stored. Throws a 400 naming the first problem.
 */
export function checkNewUser(org: dir.Organization, input: NewUser): { eppn: string; name: string } {
  const eppn = normalizeEppn(input.eppn);
  const problem = eppnProblem(eppn);
  if (problem) throw badRequest(`eppn '${input.eppn}' ${problem}`);
  if (realmOf(eppn) !== org.realm)
    throw badRequest(`eppn realm '${realmOf(eppn)}' does not match organization ${org.id} (realm '${org.realm}')`);
  const name = input.name.trim();
  if (!name || name.length > 200) throw badRequest('name must be 1-200 characters');
  if (input.email !== undefined && !EMAIL.test(input.email))
    throw badRequest(`email '${input.email}' is not a valid address`);
  if (input.nin !== undefined && !NIN.test(input.nin)) throw badRequest('national id number must be 11 digits');
  if (input.password !== undefined) {
    const weak = validatePassword(input.password);
    if (weak) throw badRequest(weak);
  } else if (input.passwordHash !== undefined) {
    const problem = passwordHashProblem(input.passwordHash);
    if (problem) throw badRequest(`password hash ${problem}`);
  }
  return { eppn, name };
}

/** The row of a new user checked by checkNewUser(), with the hash of their password (or the imported one). */
export function newUserRow(
  org: dir.Organization,
  input: NewUser,
  checked: { eppn: string; name: string },
  passwordHash: string | null,
  now: number,
): Insertable<UsersTable> & { sub: string } {
  return {
    sub: randomUUID(),
    org_id: org.id,
    eppn: checked.eppn,
    name: checked.name,
    email: input.email === undefined ? null : normalizeEmail(input.email),
    nin: input.nin ?? null,
    password_hash: passwordHash,
    photo_handle: null,
    created_at: now,
    updated_at: now,
    ...input.directory,
  };
}

/** The audit records of a user's creation, in order: `user.add`, and `password.set` when they have a password. */
export function userAddedAudit(
  user: Pick<dir.User, 'sub' | 'eppn' | 'org_id' | 'password_hash'>,
  input: NewUser,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): AuditEntry[] {
  const fields = Object.keys(input.directory ?? {}).sort();
  const details = fields.length ? { details: { fields } } : {};
  const entry = { actor, at: now, orgId: user.org_id, eppn: user.eppn, sub: user.sub };
  const records: AuditEntry[] = [{ action: 'user.add', ...entry, ...details }];
  if (user.password_hash !== null) {
    const imported = input.password === undefined ? { details: { imported: true } } : {};
    records.push({ action: 'password.set', ...entry, ...imported });
  }
  return records;
}

export async function addUser(
  store: Store,
  input: NewUser,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<dir.User> {
  const org = await dir.findOrganization(store.db, input.orgId);
  if (!org) throw notFound(`organization ${input.orgId} does not exist`);
  const checked = checkNewUser(org, input);
  const passwordHash = input.password !== undefined ? await hashPassword(input.password) : (input.passwordHash ?? null);
  try {
    return await transact(store.db, async (trx) => {
      const user = await dir.insertUser(trx, newUserRow(org, input, checked, passwordHash, now));
      await recordAudits(trx, userAddedAudit(user, input, { actor, now }));
      return user;
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`user '${checked.eppn}' already exists`);
    throw err;
  }
}

/**
 * Sets a user's password: the one function that writes a password hash, with its audit record in
 * the same transaction. `action` says whether an operator set it, the user changed their own, or
 * a sign-in replaced a hash of an older format by a current one (`password.rehash`, with
 * `replacing`: written only while the stored hash is still that one, so a change made meanwhile
 * stands). Returns false when such a rehash found the hash changed.
 */
export async function setPassword(
  store: Store,
  eppnInput: string,
  password: string,
  {
    actor = SYSTEM,
    now = Date.now(),
    action = 'password.set',
    replacing,
  }: Change & { action?: 'password.set' | 'password.change' | 'password.rehash'; replacing?: string } = {},
): Promise<boolean> {
  // A rehash keeps the password the user signed in with, whatever the rules were when it was set.
  const weak = action === 'password.rehash' ? undefined : validatePassword(password);
  if (weak) throw badRequest(weak);
  const eppn = normalizeEppn(eppnInput);
  const hash = await hashPassword(password);
  return store.db.transaction().execute(async (trx) => {
    const user = await dir.findUserByEppn(trx, eppn);
    if (!user) throw notFound(`user '${eppn}' does not exist`);
    if (!(await dir.updateUserPassword(trx, eppn, hash, now, replacing))) {
      if (replacing !== undefined) return false;
      throw notFound(`user '${eppn}' does not exist`);
    }
    await publish(trx, 'user', user.sub);
    await recordAudit(trx, { action, actor, at: now, orgId: user.org_id, eppn });
    return true;
  });
}

/**
 * Gives an existing user the hash another system made of their password (SCIM, an import), in the
 * caller's transaction: only while they have neither a password nor a passkey, as for a new user.
 * A user with a password keeps it (it may be the argon2id hash a sign-in made of the imported one);
 * a user with passkeys but no password stays passkey-only. Returns whether it was written.
 */
export async function importPasswordHash(
  trx: Transaction<DB>,
  user: dir.User,
  hash: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<boolean> {
  const problem = passwordHashProblem(hash);
  if (problem) throw badRequest(`password hash ${problem}`);
  // never before the user's version (SCIM's ETag): the write it goes with may have moved it ahead
  const at = Math.max(now, user.updated_at);
  if ((await setImportedPasswords(trx, [{ id: user.id, hash }], at)) === 0) return false;
  await publish(trx, 'user', user.sub);
  const who = { actor, at: now, orgId: user.org_id, eppn: user.eppn };
  await recordAudit(trx, { action: 'password.set', ...who, details: { imported: true } });
  return true;
}

/**
 * The user signs in with passkeys only from now on: refused unless they have one (a user without
 * a passkey or a password could not sign in at all).
 */
export async function removePassword(
  store: Store,
  userId: number,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<void> {
  await store.db.transaction().execute(async (trx) => {
    const user = await dir.findUserById(trx, userId);
    if (!user) throw notFound('user does not exist');
    if ((await listUserCredentials(trx, user.id)).length === 0)
      throw badRequest(`user '${user.eppn}' has no passkey: a password is their only way to sign in`);
    await dir.clearUserPassword(trx, user.id, now);
    await publish(trx, 'user', user.sub);
    await recordAudit(trx, {
      action: 'password.remove',
      actor,
      at: now,
      orgId: user.org_id,
      eppn: user.eppn,
      sub: user.sub,
    });
  });
}

const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** Parses `<namespace>:<identifier>` for a secondary id (edugain, eidas, social namespaces). */
export function parseSecondaryId(value: string): { namespace: string; identifier: string } {
  const colon = value.indexOf(':');
  const namespace = colon < 0 ? '' : value.slice(0, colon).toLowerCase();
  const identifier = colon < 0 ? '' : value.slice(colon + 1);
  if (!(namespace in SECONDARY_NAMESPACES)) {
    throw badRequest(
      `'${value}' must be <namespace>:<identifier> with a namespace of ${Object.keys(SECONDARY_NAMESPACES).join(', ')}`,
    );
  }
  if (!identifier || identifier.length > 256 || CONTROL.test(identifier))
    throw badRequest('the identifier must be 1-256 characters without control characters');
  return { namespace, identifier };
}

export async function addSecondaryId(
  store: Store,
  eppnInput: string,
  value: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<{ eppn: string; id: string }> {
  const { namespace, identifier } = parseSecondaryId(value);
  const eppn = normalizeEppn(eppnInput);
  const user = await dir.findUserByEppn(store.db, eppn);
  if (!user) throw notFound(`user '${eppn}' does not exist`);
  try {
    await store.db.transaction().execute(async (trx) => {
      await dir.insertUserId(trx, user.id, namespace, identifier);
      await publish(trx, 'user', user.sub);
      const details = { namespace };
      await recordAudit(trx, { action: 'user.id_add', actor, at: now, orgId: user.org_id, eppn, details });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(`'${namespace}:${identifier}' already belongs to a user`);
    throw err;
  }
  return { eppn, id: `${namespace}:${identifier}` };
}

export async function removeSecondaryId(
  store: Store,
  eppnInput: string,
  value: string,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<void> {
  const { namespace, identifier } = parseSecondaryId(value);
  const eppn = normalizeEppn(eppnInput);
  await store.db.transaction().execute(async (trx) => {
    const user = await dir.findUserByEppn(trx, eppn);
    if (!user || !(await dir.deleteUserId(trx, user.id, namespace, identifier)))
      throw notFound(`user '${eppn}' has no id '${namespace}:${identifier}'`);
    await publish(trx, 'user', user.sub);
    const details = { namespace };
    await recordAudit(trx, { action: 'user.id_remove', actor, at: now, orgId: user.org_id, eppn, details });
  });
}

export interface UserAttributes {
  name?: string;
  /** '' clears it (the name is shown instead) */
  displayName?: string;
  /** '' clears it */
  email?: string;
  /** the address was verified by the organization; a new address is unverified unless this says so */
  emailVerified?: boolean;
}

function attributeChanges(user: dir.User, input: UserAttributes, now: number): dir.UserChanges {
  const changes: dir.UserChanges = {};
  if (input.name !== undefined) {
    const name = input.name.trim();
    if (!name || name.length > 200 || CONTROL.test(name)) throw badRequest('name must be 1-200 characters');
    changes.name = name;
  }
  if (input.displayName !== undefined) {
    const display = input.displayName.trim();
    if (display.length > 200 || CONTROL.test(display)) throw badRequest('display name must be at most 200 characters');
    changes.display_name = display || null;
  }
  if (input.email !== undefined) {
    if (input.email !== '' && !EMAIL.test(input.email))
      throw badRequest(`email '${input.email}' is not a valid address`);
    changes.email = input.email === '' ? null : normalizeEmail(input.email);
    // a new address is unverified, and what a directory said of the old one being primary no longer holds
    if (changes.email !== user.email) Object.assign(changes, { email_verified: 0, email_primary: null });
  }
  if (input.emailVerified !== undefined) {
    if ((changes.email ?? user.email) === null) throw badRequest('the user has no email address to mark verified');
    changes.email_verified = input.emailVerified ? 1 : 0;
  }
  if (Object.keys(changes).length === 0)
    throw badRequest('nothing to change: give --name, --display-name, --email or --email-verified');
  return { ...changes, updated_at: now };
}

/**
 * Changes a user's name, display name or e-mail. Userinfo and ID tokens read the user when they
 * are issued, so the next ones carry the change (userinfo's cached claims are invalidated). The audit record names the fields, not their values.
 */
export async function setUserAttributes(
  store: Store,
  eppnInput: string,
  input: UserAttributes,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<dir.User> {
  const eppn = normalizeEppn(eppnInput);
  return store.db.transaction().execute(async (trx) => {
    const user = await dir.findUserByEppn(trx, eppn);
    if (!user) throw notFound(`user '${eppn}' does not exist`);
    const changes = attributeChanges(user, input, now);
    await dir.updateUser(trx, user.id, changes);
    await publish(trx, 'user', user.sub);
    const fields = Object.keys(changes).filter((f) => f !== 'updated_at');
    const emailChanges =
      changes.email !== undefined && changes.email !== user.email
        ? [{ eppn, orgId: user.org_id, from: user.email, to: changes.email }]
        : [];
    await recordAudit(trx, {
      action: 'user.update',
      actor,
      at: now,
      orgId: user.org_id,
      eppn,
      details: { fields },
      emailChanges,
    });
    return { ...user, ...changes };
  });
}
