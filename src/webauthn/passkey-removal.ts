// Removing passkeys: the one place that deletes them, each removal written to the audit trail in
// the same transaction, whichever surface asks (the passkey API, the account page).
import type { Store } from '../store/index.ts';
import { findUserByEppn, type User } from '../store/directory.ts';
import { deleteOrganizationPasskey, deleteUserPasskey, deleteUserPasskeys } from '../store/passkeys.ts';
import { insertAuditEvent } from '../store/audit.ts';

export const AUDIT_DELETE_USER = 'passkey.delete_user';
export const AUDIT_DELETE_ONE = 'passkey.delete';
export const AUDIT_DELETE_BY_USER = 'passkey.delete_by_user';

/** Who asked, for the audit trail. */
export interface Actor {
  clientId: string;
  requestId: string;
  at: number;
}

/** Deletes every passkey of the organization's user eppn; an unknown eppn deletes nothing. Returns the ids,
 * and the user's sub when the organization has that user. */
export function removeUserPasskeys(
  store: Store,
  actor: Actor,
  orgId: number,
  eppn: string,
): Promise<{ ids: number[]; sub: string | undefined }> {
  return store.db.transaction().execute(async (trx) => {
    const user = await findUserByEppn(trx, eppn);
    const member = user && user.org_id === orgId ? user : undefined;
    const deleted = member ? await deleteUserPasskeys(trx, member.id) : [];
    await insertAuditEvent(trx, {
      at: actor.at,
      kind: AUDIT_DELETE_USER,
      clientId: actor.clientId,
      orgId,
      eppn,
      passkeyIds: deleted,
      requestId: actor.requestId,
    });
    return { ids: deleted, sub: member?.sub };
  });
}

/** Deletes one passkey of the organization; undefined (and nothing written) when it has none of that id. */
export function removeOrganizationPasskey(
  store: Store,
  actor: Actor,
  orgId: number,
  id: number,
): Promise<{ eppn: string } | undefined> {
  return store.db.transaction().execute(async (trx) => {
    const deleted = await deleteOrganizationPasskey(trx, orgId, id);
    if (!deleted) return undefined;
    await insertAuditEvent(trx, {
      at: actor.at,
      kind: AUDIT_DELETE_ONE,
      clientId: actor.clientId,
      orgId,
      eppn: deleted.eppn,
      passkeyIds: [id],
      requestId: actor.requestId,
    });
    return { eppn: deleted.eppn };
  });
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
    await insertAuditEvent(trx, {
      at: actor.at,
      kind: AUDIT_DELETE_BY_USER,
      orgId: user.org_id,
      eppn: user.eppn,
      passkeyIds: [id],
      requestId: actor.requestId,
    });
    return true;
  });
}
