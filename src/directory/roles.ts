// Staff roles. `helpdesk` handles the users of one organization (find them, see and delete their
// passkeys, recovery links, their audit trail); `org-admin` all of that for the whole organization
// plus its reports and bulk offboarding, and may grant `helpdesk` there; `operator` works across
// organizations and is granted from the admin CLI only. Every grant and revocation is audited.
import type { Store } from '../store/index.ts';
import { findOrganization, findUserByEppn } from '../store/directory.ts';
import { deleteRole, insertRole, listRoles, rolesOfUser } from '../store/roles.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
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
