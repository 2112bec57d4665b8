// Bulk offboarding, shared by the API (POST /2/offboard) and the console's page: a list of eppns
// checked line by line (any bad line refuses the whole list), a preview of who is found and how
// many passkeys would go, and the deletion itself: each user's passkeys removed exactly as
// DELETE /2/passkey/<org_id>?eppn= does (same function, audit record and events, reason in the
// record), and their sessions ended.
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { findUserByEppn } from '../store/directory.ts';
import { listUserCredentials } from '../store/passkeys.ts';
import { auditActor, removeUserPasskeys, type Actor } from '../webauthn/passkey-removal.ts';
import { requireWeakerAll } from '../directory/roles.ts';
import { endUserSessions } from '../oauth/end-user-sessions.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';

export const MAX_OFFBOARD = 10_000;

export type EppnList = { ok: true; eppns: string[] } | { ok: false; bad: number; problems: string[] };

/** Every line checked (numbered from 1); duplicates folded; the first five problems named. */
export function checkEppnList(lines: unknown[], realm: string): EppnList {
  const problems: string[] = [];
  const list: string[] = [];
  lines.forEach((raw, i) => {
    const eppn = typeof raw === 'string' ? normalizeEppn(raw) : '';
    const problem = typeof raw !== 'string' ? 'is not a string' : eppnProblem(eppn);
    const at = eppn.slice(eppn.lastIndexOf('@') + 1);
    if (problem) problems.push(`line ${i + 1}: eppn ${problem}`);
    else if (at !== realm) problems.push(`line ${i + 1}: realm '${at.slice(0, 100)}' is not the organization's`);
    else list.push(eppn);
  });
  if (problems.length) return { ok: false, bad: problems.length, problems: problems.slice(0, 5) };
  return { ok: true, eppns: [...new Set(list)] };
}

export interface OffboardDeps {
  store: Store;
  provider: ProviderHolder;
  now: () => number;
}

export interface Offboarded {
  found: { eppn: string; passkeys: number }[];
  notFound: string[];
  passkeys: number;
}

const total = (found: { passkeys: number }[]) => found.reduce((n, f) => n + f.passkeys, 0);

/** Who is found in the organization and how many passkeys each has now. */
export async function previewOffboarding(deps: OffboardDeps, orgId: number, eppns: string[]): Promise<Offboarded> {
  const found: { eppn: string; passkeys: number }[] = [];
  const notFound: string[] = [];
  for (const eppn of eppns) {
    const user = await findUserByEppn(deps.store.db, eppn);
    if (!user || user.org_id !== orgId) notFound.push(eppn);
    else found.push({ eppn, passkeys: (await listUserCredentials(deps.store.db, user.id)).length });
  }
  return { found, notFound, passkeys: total(found) };
}

/**
 * Deletes the passkeys of every listed user the organization has, and ends their sessions. A list
 * with anyone the actor may not act on (directory/roles.ts) is refused whole, before anything goes.
 */
export async function offboardUsers(
  deps: OffboardDeps,
  orgId: number,
  eppns: string[],
  actor: Omit<Actor, 'at'>,
): Promise<Offboarded> {
  const { found, notFound } = await previewOffboarding(deps, orgId, eppns);
  const targets = [];
  for (const { eppn } of found) {
    const user = await findUserByEppn(deps.store.db, eppn);
    if (user) targets.push(user);
  }
  await requireWeakerAll(
    deps.store,
    auditActor({ ...actor, at: deps.now() }),
    targets,
    'passkey.delete_user',
    deps.now(),
  );
  const done: { eppn: string; passkeys: number }[] = [];
  for (const { eppn } of found) {
    const { ids, sub } = await removeUserPasskeys(deps.store, { ...actor, at: deps.now() }, orgId, eppn);
    if (sub !== undefined) await endUserSessions(deps.store, deps.provider.current(), sub, deps.now);
    done.push({ eppn, passkeys: ids.length });
  }
  return { found: done, notFound, passkeys: total(done) };
}
