// Staff roles. `helpdesk` handles the users of one organization (find them, see and delete their
// passkeys, recovery links, their audit trail); `org-admin` all of that for the whole organization
// plus its reports and bulk offboarding, and may grant `helpdesk` there; `operator` works across
// organizations and is granted from the admin CLI only. Every grant and revocation is audited.
// Whoever acts on another user's account acts only on users whose roles are weaker than their own
// (requireWeaker, below), whichever surface they use.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import type { Store } from '../store/index.ts';
import { findOrganization, findUserByEppn } from '../store/directory.ts';
import { deleteRole, insertRole, listRoles, rolesOfEppn, rolesOfUser } from '../store/roles.ts';
import { recordAudit, SYSTEM, type Actor, type AuditAction, type AuditEntry, type Change } from '../audit/index.ts';
import { AppError, badRequest, conflict, notFound } from '../errors.ts';
import { iso } from '../time.ts';

export const ORG_ROLES = ['helpdesk', 'org-admin'] as const;
export const ROLES = [...ORG_ROLES, 'operator'] as const;
export type Role = (typeof ROLES)[number];

/** The organization id an operator's grant carries: it names every organization. */
export const ALL_ORGANIZATIONS = 0;

export function parseRole(value: string): Role {
  const role = ROLES.find((r) => r === value);
  if (!role) throw badRequest(`role must be one of ${ROLES.join(', ')}`);
  return role;
}

interface RoleChange {
  eppn: string;
  role: Role;
  /** required for helpdesk and org-admin, refused for operator */
  orgId?: number;
}

/** The user and the organization a grant or revocation is about, checked. */
async function resolve(store: Store, { eppn, role, orgId }: RoleChange) {
  if (role === 'operator' && orgId !== undefined)
    throw badRequest('operator is granted without --org: it spans every organization');
  if (role !== 'operator' && orgId === undefined) throw badRequest(`${role} needs --org <org_id>`);
  const user = await findUserByEppn(store.db, eppn.trim().toLowerCase());
  if (!user) throw notFound(`user '${eppn}' does not exist`);
  if (orgId !== undefined) {
    if (!(await findOrganization(store.db, orgId))) throw notFound(`organization ${orgId} not found`);
    // Staff of an organization are its own users: nobody handles another organization's people.
    if (user.org_id !== orgId) throw badRequest(`user '${user.eppn}' is not in organization ${orgId}`);
  }
  return { user, org: orgId ?? ALL_ORGANIZATIONS };
}

const who = (actor: Actor) => `${actor.type}:${actor.id ?? '-'}`;

export async function grantRole(store: Store, change: RoleChange, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  const { user, org } = await resolve(store, change);
  await store.db.transaction().execute(async (trx) => {
    const row = { user_id: user.id, org_id: org, role: change.role, granted_at: now, granted_by: who(actor) };
    if (!(await insertRole(trx, row))) throw conflict(`${user.eppn} already has ${describe(change.role, org)}`);
    await recordAudit(trx, {
      action: 'role.grant',
      actor,
      at: now,
      orgId: org === ALL_ORGANIZATIONS ? null : org,
      eppn: user.eppn,
      details: { role: change.role },
    });
  });
  return { eppn: user.eppn, role: change.role, org_id: org === ALL_ORGANIZATIONS ? null : org };
}

export async function revokeRole(store: Store, change: RoleChange, { actor = SYSTEM, now = Date.now() }: Change = {}) {
  const { user, org } = await resolve(store, change);
  await store.db.transaction().execute(async (trx) => {
    if (!(await deleteRole(trx, user.id, change.role, org)))
      throw notFound(`${user.eppn} does not have ${describe(change.role, org)}`);
    await recordAudit(trx, {
      action: 'role.revoke',
      actor,
      at: now,
      orgId: org === ALL_ORGANIZATIONS ? null : org,
      eppn: user.eppn,
      details: { role: change.role },
    });
  });
  return { eppn: user.eppn, role: change.role, org_id: org === ALL_ORGANIZATIONS ? null : org };
}

function describe(role: string, org: number): string {
  return org === ALL_ORGANIZATIONS ? role : `${role} in organization ${org}`;
}

export async function roleGrants(store: Store, orgId?: number) {
  const rows = await listRoles(store.db, orgId);
  return rows.map((r) => ({
    eppn: r.eppn,
    role: r.role,
    org_id: r.org_id === ALL_ORGANIZATIONS ? null : r.org_id,
    granted_at: iso(r.granted_at),
    granted_by: r.granted_by,
  }));
}

/** What a user may do as staff: the organizations per role (operator: every organization). */
export interface StaffAccess {
  operator: boolean;
  /** organizations where the user is helpdesk (org-admins are helpdesk too) */
  helpdesk: number[];
  orgAdmin: number[];
}

export async function staffAccess(store: Store, userId: number): Promise<StaffAccess> {
  const rows = await rolesOfUser(store.db, userId);
  const orgAdmin = rows.filter((r) => r.role === 'org-admin').map((r) => r.org_id);
  const helpdesk = [...new Set([...rows.filter((r) => r.role === 'helpdesk').map((r) => r.org_id), ...orgAdmin])];
  return { operator: rows.some((r) => r.role === 'operator'), helpdesk, orgAdmin };
}

/** The user may act as helpdesk in the organization. */
export const canHelp = (access: StaffAccess, orgId: number) => access.operator || access.helpdesk.includes(orgId);

// ---- acting on another user's account ------------------------------------------------------------

type Q = Kysely<DB> | Transaction<DB>;

/**
 * How strong a role is. Someone acts on a user (recovery links, passkey deletion, offboarding,
 * disabling, enabling, changing or removing the account) only when they are stronger than every
 * role the user holds: a helpdesk on users without a role, an org-admin also on helpdesk staff, an
 * operator in the console also on org-admins. An operator's account is stronger than anything but
 * the admin CLI (and the service's own jobs).
 */
const STRENGTH: Record<Role, number> = { helpdesk: 1, 'org-admin': 2, operator: 4 };
/** An API client granted an organization (the passkey, recovery link and offboarding APIs): an org-admin's strength. */
export const CLIENT_STRENGTH = STRENGTH['org-admin'];
/** Provisioning (SCIM) keeps the organization's own people, its administrators too, never an operator. */
const PROVISIONING_STRENGTH = 3;
const CONSOLE_OPERATOR_STRENGTH = 3;

/** The user acted on. */
export interface ActedOn {
  id: number;
  eppn: string;
  org_id: number;
}

/** A refusal of the rule: 403 with its message, and the audit record to write once the change rolled back. */
export class Refused extends AppError {
  readonly entry: AuditEntry;
  constructor(message: string, entry: AuditEntry) {
    super(403, message);
    this.entry = entry;
  }
}

const strongest = (roles: { role: string }[]) =>
  Math.max(0, ...roles.map((r) => (Object.hasOwn(STRENGTH, r.role) ? STRENGTH[r.role as Role] : 0)));

/** The actor's strength over users of the organization. */
async function strengthOf(db: Q, actor: Actor, orgId: number): Promise<number> {
  switch (actor.type) {
    case 'operator':
    case 'system':
      return Infinity;
    case 'provisioning':
      return PROVISIONING_STRENGTH;
    case 'client':
      return CLIENT_STRENGTH;
    case 'user': {
      const rows = actor.id === null ? [] : await rolesOfEppn(db, actor.id);
      if (rows.some((r) => r.role === 'operator')) return CONSOLE_OPERATOR_STRENGTH;
      return strongest(rows.filter((r) => r.org_id === orgId));
    }
  }
}

const ACTOR_NAMES: Record<Actor['type'], string> = {
  user: 'staff',
  client: 'an API client',
  provisioning: 'provisioning',
  operator: 'the admin CLI',
  system: 'the service',
};

/** The user's roles when the actor is not stronger than every one of them (may not act on the user), else undefined. */
async function rolesInTheWay(db: Q, actor: Actor, target: Pick<ActedOn, 'id' | 'org_id'>) {
  const strength = await strengthOf(db, actor, target.org_id);
  if (strength === Infinity) return undefined;
  const roles = await rolesOfUser(db, target.id);
  const theirs = strongest(roles);
  return strength > theirs ? undefined : { roles, theirs };
}

/**
 * Whether the actor may act on the user (the rule requireWeaker enforces), for pages that offer
 * only the actions that would be allowed. Nothing is recorded: the change itself still checks.
 */
export async function mayActOn(db: Q, actor: Actor, target: Pick<ActedOn, 'id' | 'org_id'>): Promise<boolean> {
  return (await rolesInTheWay(db, actor, target)) === undefined;
}

/** The refusal when the actor may not act on the user, else undefined. */
export async function refusalOf(
  db: Q,
  actor: Actor,
  target: ActedOn,
  action: AuditAction,
  at: number,
): Promise<Refused | undefined> {
  const inTheWay = await rolesInTheWay(db, actor, target);
  if (!inTheWay) return undefined;
  const { roles, theirs } = inTheWay;
  const names = [...new Set(roles.map((r) => r.role))].sort();
  const message =
    theirs >= STRENGTH.operator
      ? `'${target.eppn}' is an operator: an operator's account is changed only with the admin CLI`
      : `'${target.eppn}' has the ${names.join(' and ')} role: ${ACTOR_NAMES[actor.type]} may act only on users whose roles are weaker than their own`;
  const entry: AuditEntry = {
    action: 'access.refused',
    actor,
    at,
    orgId: target.org_id,
    eppn: target.eppn,
    details: { refused: action, roles: names },
  };
  return new Refused(message, entry);
}

/** Throws the refusal (403) unless the actor may act on the user; call it in the change's transaction. */
export async function requireWeaker(db: Q, actor: Actor, target: ActedOn, action: AuditAction, at: number) {
  const refused = await refusalOf(db, actor, target, action, at);
  if (refused) throw refused;
}

/**
 * For one change to many users (bulk offboarding): each refusal is recorded, and one 403 says
 * what was refused before anything changes.
 */
export async function requireWeakerAll(
  store: Store,
  actor: Actor,
  targets: ActedOn[],
  action: AuditAction,
  at: number,
): Promise<void> {
  const refused: Refused[] = [];
  for (const target of targets) {
    const refusal = await refusalOf(store.db, actor, target, action, at);
    if (refusal) refused.push(refusal);
  }
  if (refused.length === 0) return;
  for (const refusal of refused) await recordAudit(store.db, refusal.entry);
  const shown = refused.slice(0, 3).map((r) => r.message);
  throw new AppError(403, `${refused.length} listed user(s) refused, nothing was done: ${shown.join('; ')}`);
}

/**
 * Runs a change that may be refused (requireWeaker inside its transaction): the refusal rolls the
 * change back, and is then written to the audit trail on its own.
 */
export async function recordingRefusals<T>(store: Store, change: () => Promise<T>): Promise<T> {
  try {
    return await change();
  } catch (err) {
    if (err instanceof Refused) await recordAudit(store.db, err.entry);
    throw err;
  }
}
