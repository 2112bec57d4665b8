// A user's lifecycle beyond the directory: disabling, re-enabling and removing users and whole
// organizations. Each is one transaction that also ends what the authorization server holds for
// the user (sessions, grants, codes, access and refresh tokens) and writes its audit records. The
// relying parties of the ended sessions are told by back-channel logout: the deliveries are
// recorded in the same transaction, due at once, and sent by the running service's delivery job
// (src/oauth/backchannel-logout.ts), whichever process made the change (the admin CLI included).
import { transact, type Store } from '../store/index.ts';
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import * as dir from '../store/directory.ts';
import { findClient } from '../store/clients.ts';
import { deleteUserPasskeys, countOrganizationPasskeys } from '../store/passkeys.ts';
import { deleteAccountArtifacts, findSessionsByAccount } from '../store/oidc-payloads.ts';
import { insertLogoutDelivery } from '../store/logout-deliveries.ts';
import { publish } from '../store/invalidation.ts';
import { claimVersion, deleteMembershipsOfUser, deleteProvisioningOfOrganization } from '../store/provisioning.ts';
import { recordAudit, SYSTEM, type Actor, type AuditAction, type Change } from '../audit/index.ts';
import { normalizeEppn } from '../directory/index.ts';
import { recordingRefusals, requireWeaker } from '../directory/roles.ts';
import { revokeUserRecoveryLinks } from '../store/recovery-links.ts';
import { AUDIT_DELETE_USER } from '../webauthn/passkey-removal.ts';
import { AppError, conflict, notFound } from '../errors.ts';

type Trx = Transaction<DB>;

interface StoredSession {
  authorizations?: Record<string, { sid?: string }>;
}

/**
 * Ends every session of the account inside the transaction: deletes the sessions, grants and all
 * issued under them, and records a logout delivery, due now, for each client of an ended session
 * that registered a back-channel logout URI. Returns how many sessions ended.
 */
export async function endSessionsInTransaction(trx: Trx, sub: string, now: number): Promise<number> {
  const sessions = (await findSessionsByAccount(trx, sub, now)).map((p) => JSON.parse(p) as StoredSession);
  // publishes the account's invalidation: userinfo drops what it kept for the user's tokens
  await deleteAccountArtifacts(trx, sub);
  for (const session of sessions) {
    for (const [clientId, { sid }] of Object.entries(session.authorizations ?? {})) {
      const client = await findClient(trx, clientId);
      if (!client?.backchannel_logout_uri) continue;
      await insertLogoutDelivery(trx, { client_id: clientId, sub, sid: sid ?? null, created_at: now }, now);
    }
  }
  return sessions.length;
}

/** The user, when the actor may act on them (directory/roles.ts: only on users with weaker roles). */
async function userOrFail(trx: Trx, eppnInput: string, action: AuditAction, actor: Actor, now: number) {
  const eppn = normalizeEppn(eppnInput);
  const user = await dir.findUserByEppn(trx, eppn);
  if (!user) throw notFound(`user '${eppn}' does not exist`);
  await requireWeaker(trx, actor, user, action, now);
  return user;
}

/** A user by eppn, or as a caller loaded them (found by id, so a rename meanwhile does not lose them). */
export type UserRef = string | Pick<dir.User, 'id' | 'eppn'>;

/**
 * Takes the user's next version, if it is one of `expected` (the versions a caller read, SCIM's
 * If-Match; undefined: any), as the change's first write: the check is part of the change, and
 * concurrent writers of the user take turns (PostgreSQL: the row stays locked to the end of the
 * transaction; SQLite: the write lock is taken before anything is read). 412 when the user has
 * another version, 404 when they are gone.
 */
async function claimUser(trx: Trx, ref: UserRef, expected: number[] | undefined, now: number) {
  let id: number;
  if (typeof ref === 'string') {
    const eppn = normalizeEppn(ref);
    const found = await dir.findUserByEppn(trx, eppn);
    if (!found) throw notFound(`user '${eppn}' does not exist`);
    id = found.id;
  } else id = ref.id;
  const user = await claimVersion(trx, 'users', id, expected, now);
  if (user) return user;
  if (expected && (await dir.findUserById(trx, id)))
    throw new AppError(412, 'The resource changed since it was read (If-Match does not match its version)');
  throw notFound(`user '${typeof ref === 'string' ? normalizeEppn(ref) : ref.eppn}' does not exist`);
}

export interface LifecycleResult {
  eppn: string;
  /** false when the user already was in the state asked for (nothing was written) */
  changed: boolean;
  /** sessions ended */
  sessions: number;
}

/**
 * Disables a user: sign-in is refused, their sessions (the console's too) end, their grants,
 * refresh and access tokens are deleted (so every endpoint refuses them at once), the recovery
 * links not yet used are revoked (enabling the user does not bring them back), and the relying
 * parties are told. Passkeys, password and photo are kept, so enabling gives the same account back.
 */
export function disableUser(store: Store, eppn: string, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  const change = async (trx: Trx): Promise<LifecycleResult> => {
    const user = await userOrFail(trx, eppn, 'user.disable', actor, now);
    if (user.disabled_at !== null) return { eppn: user.eppn, changed: false, sessions: 0 };
    await dir.updateUser(trx, user.id, { disabled_at: now, updated_at: now });
    await publish(trx, 'user', user.sub);
    const sessions = await endSessionsInTransaction(trx, user.sub, now);
    const links = await revokeUserRecoveryLinks(trx, user.id, now);
    const details = links > 0 ? { sessions, recovery_links: links } : { sessions };
    const entry = { actor, at: now, orgId: user.org_id, eppn: user.eppn, sub: user.sub, details };
    await recordAudit(trx, { action: 'user.disable', ...entry });
    return { eppn: user.eppn, changed: true, sessions };
  };
  return recordingRefusals(store, () => transact(store.db, change));
}

/** Enables a disabled user: they can sign in again (with what they had: passkeys, password). */
export function enableUser(store: Store, eppn: string, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  const change = async (trx: Trx): Promise<LifecycleResult> => {
    const user = await userOrFail(trx, eppn, 'user.enable', actor, now);
    if (user.disabled_at === null) return { eppn: user.eppn, changed: false, sessions: 0 };
    await dir.updateUser(trx, user.id, { disabled_at: null, updated_at: now });
    await publish(trx, 'user', user.sub);
    await recordAudit(trx, {
      action: 'user.enable',
      actor,
      at: now,
      orgId: user.org_id,
      eppn: user.eppn,
      sub: user.sub,
    });
    return { eppn: user.eppn, changed: true, sessions: 0 };
  };
  return recordingRefusals(store, () => transact(store.db, change));
}

/** Removes one user inside a transaction: passkeys (audited like the passkey API's deletions), sessions, then the user. */
async function removeUserInTransaction(trx: Trx, user: dir.User, actor: Actor, now: number): Promise<number> {
  const passkeyIds = await deleteUserPasskeys(trx, user.id);
  if (passkeyIds.length > 0) {
    const entry = { actor, at: now, orgId: user.org_id, eppn: user.eppn, sub: user.sub, passkeyIds };
    await recordAudit(trx, { action: AUDIT_DELETE_USER, ...entry });
  }
  const sessions = await endSessionsInTransaction(trx, user.sub, now);
  await deleteMembershipsOfUser(trx, user.id);
  await dir.deleteUser(trx, user.id);
  await publish(trx, 'user', user.sub);
  const details = { passkeys: passkeyIds.length, sessions, sub: user.sub };
  await recordAudit(trx, { action: 'user.remove', actor, at: now, orgId: user.org_id, eppn: user.eppn, details });
  return passkeyIds.length;
}

export interface Removal extends Change {
  /** remove the user only while their version (updated_at) is one of these: 412 otherwise, 404 when gone */
  expected?: number[];
}

/**
 * Removes a user and everything that is theirs: passkeys, photo, consents, secondary ids, sessions,
 * grants and tokens, in one transaction. The audit trail keeps the records about them. With
 * `expected`, the removal is conditional on the user's version, checked by that transaction's first write.
 */
export function removeUser(store: Store, ref: UserRef, { actor = SYSTEM, now = Date.now(), expected }: Removal = {}) {
  const change = async (trx: Trx) => {
    const user = await claimUser(trx, ref, expected, now);
    await requireWeaker(trx, actor, user, 'user.remove', now);
    const passkeys = await removeUserInTransaction(trx, user, actor, now);
    return { eppn: user.eppn, sub: user.sub, passkeys };
  };
  return recordingRefusals(store, () => transact(store.db, change));
}

export interface OrganizationFootprint {
  id: number;
  realm: string;
  name: string;
  users: number;
  passkeys: number;
}

/** What removing an organization would remove (the dry run of `org remove --force`). */
export async function organizationFootprint(store: Store, orgId: number): Promise<OrganizationFootprint> {
  const org = await dir.findOrganization(store.db, orgId);
  if (!org) throw notFound(`organization ${orgId} does not exist`);
  const users = await dir.countUsersOfOrganization(store.db, orgId);
  const passkeys = await countOrganizationPasskeys(store.db, orgId);
  return { id: org.id, realm: org.realm, name: org.name, users, passkeys };
}

/**
 * Removes an organization. With users it is refused unless `force`, which removes each user as
 * removeUser() does, all in one transaction; clients lose their grants for it.
 */
export function removeOrganization(
  store: Store,
  orgId: number,
  { actor = SYSTEM, now = Date.now(), force = false }: Change & { force?: boolean } = {},
) {
  return store.db.transaction().execute(async (trx) => {
    const org = await dir.findOrganization(trx, orgId);
    if (!org) throw notFound(`organization ${orgId} does not exist`);
    const users = await dir.listUsersOfOrganization(trx, orgId);
    if (users.length > 0 && !force)
      throw conflict(`organization ${orgId} has ${users.length} user(s); --force removes them with the organization`);
    let passkeys = 0;
    for (const user of users) passkeys += await removeUserInTransaction(trx, user, actor, now);
    // groups and provisioning tokens reference the organization
    await deleteProvisioningOfOrganization(trx, orgId);
    await dir.deleteOrganization(trx, orgId);
    await publish(trx, 'organization', String(orgId));
    const details = { realm: org.realm, users: users.length, passkeys };
    await recordAudit(trx, { action: 'org.remove', actor, at: now, subject: String(orgId), orgId, details });
    return { id: orgId, users: users.length, passkeys };
  });
}
