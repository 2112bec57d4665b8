// Recovery links: a one-time link that lets a user who lost their passkeys (or has no password)
// register a new passkey without signing in. Shown once, stored only as a hash, valid for a
// limited time, revocable, used at most once; made, used and revoked in audited transactions.
import { createHash, randomBytes } from 'node:crypto';
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { transact, type Store } from '../store/index.ts';
import { findUserByEppn, findUserById, type User } from '../store/directory.ts';
import { deleteUserPasskeys } from '../store/passkeys.ts';
import {
  claimRecoveryLink,
  findRecoveryLink,
  findRecoveryLinkByHash,
  insertRecoveryLink,
  listRecoveryLinks,
  revokeRecoveryLink,
  type RecoveryLinkRow,
} from '../store/recovery-links.ts';
import { recordAudit, SYSTEM, type Actor, type Change } from '../audit/index.ts';
import { badRequest, notFound } from '../errors.ts';
import { recordingRefusals, requireWeaker } from '../directory/roles.ts';
import { iso } from '../time.ts';
import { accountDisabled } from '../directory/account-state.ts';

export const RECOVERY_PATH = '/recover/';
export const DEFAULT_RECOVERY_TTL_MS = 24 * 3600 * 1000;
export const MAX_RECOVERY_TTL_MS = 30 * 24 * 3600 * 1000;

/** The secret part of a link: 32 random bytes, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

const hashOf = (token: string) => createHash('sha256').update(token).digest('base64url');

const who = (actor: Actor) => `${actor.type}:${actor.id ?? '-'}`;

export interface NewRecoveryLink {
  id: number;
  eppn: string;
  /** the whole link: shown once, never stored */
  url: string;
  expires_at: string;
  delete_others: boolean;
}

/** Why a link is made when it is not handed over by whoever made it: it goes out by e-mail. */
export type LinkPurpose = 'invitation' | 'reminder' | 'self-recovery';

/** Runs in the link's transaction: what else the link is made for (the message that carries it). */
export type WithLink = (trx: Transaction<DB>, link: NewRecoveryLink & { token: string }, user: User) => Promise<void>;

export async function createRecoveryLink(
  store: Store,
  publicUrl: string,
  input: {
    eppn: string;
    ttlMs?: number;
    deleteOthers?: boolean;
    /** the user must be of it */ orgId?: number;
    purpose?: LinkPurpose;
    within?: WithLink;
  },
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<NewRecoveryLink> {
  const ttl = input.ttlMs ?? DEFAULT_RECOVERY_TTL_MS;
  if (!Number.isSafeInteger(ttl) || ttl < 60_000 || ttl > MAX_RECOVERY_TTL_MS)
    throw badRequest('a recovery link lives between 1 minute and 30 days');
  const eppn = input.eppn.trim().toLowerCase();
  const token = randomBytes(32).toString('base64url');
  return recordingRefusals(store, () =>
    transact(store.db, async (trx) => {
      const user = await findUserByEppn(trx, eppn);
      if (!user || (input.orgId !== undefined && user.org_id !== input.orgId))
        throw notFound(`user '${eppn}' does not exist`);
      // whoever may register a passkey through the link signs in as the user
      await requireWeaker(trx, actor, user, 'recovery_link.create', now);
      if (user.disabled_at !== null) throw badRequest(`user '${eppn}' is disabled: enable them first`);
      const row = {
        token_hash: hashOf(token),
        user_id: user.id,
        org_id: user.org_id,
        created_at: now,
        expires_at: now + ttl,
        used_at: null,
        revoked_at: null,
        created_by: who(actor),
        delete_others: input.deleteOthers ? 1 : 0,
      };
      const id = await insertRecoveryLink(trx, row);
      const details = {
        recovery_link: id,
        expires_at: iso(row.expires_at),
        delete_others: input.deleteOthers === true,
        ...(input.purpose ? { purpose: input.purpose } : {}),
      };
      await recordAudit(trx, { action: 'recovery_link.create', actor, at: now, orgId: user.org_id, eppn, details });
      const link = {
        id,
        eppn,
        url: `${publicUrl}${RECOVERY_PATH}${token}`,
        expires_at: iso(row.expires_at),
        delete_others: input.deleteOthers === true,
      };
      await input.within?.(trx, { ...link, token }, user);
      return link;
    }),
  );
}

/** The link and its user while it can still be used; undefined for a wrong, used, revoked or expired one. */
export async function openRecoveryLink(
  store: Store,
  token: string,
  now: number,
): Promise<{ link: RecoveryLinkRow; user: User } | undefined> {
  if (!TOKEN.test(token)) return undefined;
  const link = await findRecoveryLinkByHash(store.db, hashOf(token));
  if (!link || link.used_at !== null || link.revoked_at !== null || link.expires_at <= now) return undefined;
  const user = await findUserById(store.db, link.user_id);
  return user && !accountDisabled(user) ? { link, user } : undefined;
}

/**
 * The step that runs in the new passkey's transaction (RequestOrigin.within): uses the link up
 * (false when another request got there first, or it was revoked or expired meanwhile), deletes
 * the user's other passkeys when the link says so, and audits the use.
 */
export function useRecoveryLink(link: RecoveryLinkRow, user: User, { actor, now }: Required<Change>) {
  return async (trx: Transaction<DB>): Promise<boolean> => {
    if (!(await claimRecoveryLink(trx, link.id, now))) return false;
    const base = { actor, at: now, orgId: user.org_id, eppn: user.eppn, sub: user.sub };
    if (link.delete_others === 1) {
      const deleted = await deleteUserPasskeys(trx, user.id);
      if (deleted.length)
        await recordAudit(trx, {
          ...base,
          action: 'passkey.delete_user',
          passkeyIds: deleted,
          details: { recovery_link: link.id },
        });
    }
    await recordAudit(trx, { ...base, action: 'recovery_link.use', details: { recovery_link: link.id } });
    return true;
  };
}

/** Revokes a link not yet used; with orgId, only one of that organization. */
export async function revokeLink(
  store: Store,
  id: number,
  { actor = SYSTEM, now = Date.now() }: Change = {},
  orgId?: number,
) {
  await store.db.transaction().execute(async (trx) => {
    const link = await findRecoveryLink(trx, id);
    const foreign = link !== undefined && orgId !== undefined && link.org_id !== orgId;
    if (!link || foreign || !(await revokeRecoveryLink(trx, id, now)))
      throw notFound(`recovery link ${id} does not exist or can no longer be used`);
    const user = await findUserById(trx, link.user_id);
    await recordAudit(trx, {
      action: 'recovery_link.revoke',
      actor,
      at: now,
      orgId: link.org_id,
      eppn: user?.eppn ?? null,
      details: { recovery_link: id },
    });
  });
}

export type LinkState = 'usable' | 'used' | 'revoked' | 'expired';

function stateOf(r: { used_at: number | null; revoked_at: number | null; expires_at: number }, now: number): LinkState {
  if (r.used_at !== null) return 'used';
  if (r.revoked_at !== null) return 'revoked';
  return r.expires_at <= now ? 'expired' : 'usable';
}

/** Links of a user or an organization, newest first, with their state. */
export async function recoveryLinks(store: Store, filter: { eppn?: string; orgId?: number }, now = Date.now()) {
  let userId: number | undefined;
  if (filter.eppn !== undefined) {
    const user = await findUserByEppn(store.db, filter.eppn.trim().toLowerCase());
    if (!user) throw notFound(`user '${filter.eppn}' does not exist`);
    userId = user.id;
  }
  const rows = await listRecoveryLinks(store.db, { userId, orgId: filter.orgId });
  return rows.map((r) => ({
    id: r.id,
    eppn: r.eppn,
    org_id: r.org_id,
    state: stateOf(r, now),
    created_at: iso(r.created_at),
    expires_at: iso(r.expires_at),
    used_at: r.used_at === null ? null : iso(r.used_at),
    created_by: r.created_by,
    delete_others: r.delete_others === 1,
  }));
}
