// The costliest kind of imported password hash an organization still holds: every password check
// of the organization does one derivation of that kind (passwords.ts, verifyPassword), so an
// account whose imported hash no sign-in has replaced yet costs what an unknown one, or one without
// a password, does (docs/sign-in.md, Timing). Found by reading the organization's hashes that are
// not the service's own, a page at a time, and kept per process for a minute: a new import counts
// within that time; once every imported hash is replaced, checks cost one argon2id again.
import type { Store } from '../store/index.ts';
import { foreignPasswordHashes } from '../store/directory.ts';
import { passwordCheckCost } from './passwords.ts';

/** How long a realm's answer is kept. */
export const PROFILE_TTL_MS = 60_000;
const PAGE = 2_000;

const profiles = new Map<string, { until: number; costliest: Promise<string | null> }>();

async function readCostliest(store: Store, realm: string): Promise<string | null> {
  let costliest: string | null = null;
  let top = 0;
  let after = 0;
  for (;;) {
    const page = await foreignPasswordHashes(store.db, realm, after, PAGE);
    for (const row of page) {
      const cost = passwordCheckCost(row.password_hash!);
      if (cost !== undefined && cost > top) [top, costliest] = [cost, row.password_hash];
    }
    if (page.length < PAGE) return costliest;
    after = Number(page.at(-1)!.id);
  }
}

/**
 * A hash of the costliest imported kind in the organization of this realm, or null when it holds
 * none (or there is no such organization).
 */
export function costliestImportedHash(store: Store, realm: string, now = Date.now()): Promise<string | null> {
  const known = profiles.get(realm);
  if (known && known.until > now) return known.costliest;
  const costliest = readCostliest(store, realm);
  profiles.set(realm, { until: now + PROFILE_TTL_MS, costliest });
  // a failed read is not kept: the next check reads again
  costliest.catch(() => profiles.delete(realm));
  if (profiles.size > 10_000) profiles.delete(profiles.keys().next().value!);
  return costliest;
}

/** Forgets what was read (tests, and after an import in this process). */
export function forgetPasswordProfiles(): void {
  profiles.clear();
}
