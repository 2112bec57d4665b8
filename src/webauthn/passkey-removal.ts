// Removing (and renaming) passkeys: the one place that deletes them, each removal written to the audit trail in
// the same transaction, whichever surface asks (the passkey API, the account page).
import type { Store } from '../store/index.ts';
import { findUserByEppn, type User } from '../store/directory.ts';
import {
  deleteOrganizationPasskey,
  deleteUserPasskey,
  deleteUserPasskeys,
  renameUserPasskey,
} from '../store/passkeys.ts';
import { recordAudit, type Actor as AuditActor } from '../audit/index.ts';
import { recordingRefusals, requireWeaker } from '../directory/roles.ts';

export const AUDIT_DELETE_USER = 'passkey.delete_user';
export const AUDIT_DELETE_ONE = 'passkey.delete';
export const AUDIT_DELETE_BY_USER = 'passkey.delete_by_user';

/** Who asked, for the audit trail: a client of the passkey API, or someone else (an operator). */
export interface Actor {
  clientId?: string;
  /** who acted when no client did */
  who?: AuditActor;
  requestId?: string;
  at: number;
  /** the request's client address */
  ip?: string;
  /** why, in the actor's words: kept in the audit record */
  reason?: string;
}

/** The actor as the audit trail names it. */
export const auditActor = (a: Actor): AuditActor =>
  a.who ?? { type: 'client', id: a.clientId ?? null, requestId: a.requestId, ip: a.ip };
const reasonOf = (a: Actor) => (a.reason ? { details: { reason: a.reason } } : {});

/** Deletes every passkey of the organization's user eppn; an unknown eppn deletes nothing. Returns the ids,
 * and the user's sub when the organization has that user. */
export function removeUserPasskeys(
  store: Store,
  actor: Actor,
  orgId: number,
  eppn: string,
): Promise<{ ids: number[]; sub: string | undefined }> {
  return recordingRefusals(store, () =>
    store.db.transaction().execute(async (trx) => {
      const user = await findUserByEppn(trx, eppn);
      const member = user && user.org_id === orgId ? user : undefined;
      if (member) await requireWeaker(trx, auditActor(actor), member, AUDIT_DELETE_USER, actor.at);
      const deleted = member ? await deleteUserPasskeys(trx, member.id) : [];
      await recordAudit(trx, {
        action: AUDIT_DELETE_USER,
        actor: auditActor(actor),
        at: actor.at,
        clientId: actor.clientId ?? null,
        ...reasonOf(actor),
        orgId,
        eppn,
        passkeyIds: deleted,
        sub: member?.sub,
      });
      return { ids: deleted, sub: member?.sub };
    }),
  );
}

/** Deletes one passkey of the organization; undefined (and nothing written) when it has none of that id. */
export function removeOrganizationPasskey(
  store: Store,
  actor: Actor,
  orgId: number,
  id: number,
): Promise<{ eppn: string } | undefined> {
  return recordingRefusals(store, () =>
    store.db.transaction().execute(async (trx) => {
      const deleted = await deleteOrganizationPasskey(trx, orgId, id);
      if (!deleted) return undefined;
      // a refusal rolls the deletion back
      const owner = { id: deleted.userId, eppn: deleted.eppn, org_id: orgId };
      await requireWeaker(trx, auditActor(actor), owner, AUDIT_DELETE_ONE, actor.at);
      await recordAudit(trx, {
        action: AUDIT_DELETE_ONE,
        actor: auditActor(actor),
        at: actor.at,
        clientId: actor.clientId ?? null,
        ...reasonOf(actor),
        orgId,
        eppn: deleted.eppn,
        passkeyIds: [id],
        sub: deleted.sub,
      });
      return { eppn: deleted.eppn };
    }),
  );
}

/** Deletes one of the user's own passkeys; false (and nothing written) when they have none of that id.
 * No client acts here: the audit record names the user alone. */
export function removeOwnPasskey(
  store: Store,
  actor: Omit<Actor, 'clientId'>,
  user: Pick<User, 'id' | 'org_id' | 'eppn'>,
  id: number,
): Promise<boolean> {
  return store.db.transaction().execute(async (trx) => {
    const deleted = await deleteUserPasskey(trx, user.id, id);
    if (!deleted) return false;
    await recordAudit(trx, {
      action: AUDIT_DELETE_BY_USER,
      actor: { type: 'user', id: user.eppn, requestId: actor.requestId, ip: actor.ip },
      at: actor.at,
      orgId: user.org_id,
      eppn: user.eppn,
      passkeyIds: [id],
    });
    return true;
  });
}

/** Renames one of the user's own passkeys; false (and nothing written) when they have none of that id. */
export function renameOwnPasskey(
  store: Store,
  actor: Omit<Actor, 'clientId'>,
  user: Pick<User, 'id' | 'org_id' | 'eppn'>,
  id: number,
  label: string,
): Promise<boolean> {
  return store.db.transaction().execute(async (trx) => {
    if (!(await renameUserPasskey(trx, user.id, id, label))) return false;
    await recordAudit(trx, {
      action: 'passkey.rename',
      actor: { type: 'user', id: user.eppn, requestId: actor.requestId, ip: actor.ip },
      at: actor.at,
      orgId: user.org_id,
      eppn: user.eppn,
      passkeyIds: [id],
    });
    return true;
  });
}
