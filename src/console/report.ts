// The organization report, shared by the API (GET /2/report) and the console's report page:
// users and passkey coverage, passkeys by authenticator model, synced or device-bound, without
// user verification, not used for N days, users with no way to sign in; and the adoption funnel of
// the organization's move, today and as recorded on each of the last 90 days.
import type { Store } from '../store/index.ts';
import type { Config } from '../config.ts';
import { passkeyTotals, passkeysByModel, userTotals } from '../store/reports.ts';
import { adoptionFigures, adoptionHistory, dayOf } from '../store/adoption.ts';
import { authenticatorName } from '../webauthn/aaguid.ts';

export const DEFAULT_UNUSED_DAYS = 180;
const DAY = 86_400_000;
/** The days the report's adoption history covers, today included. */
export const ADOPTION_HISTORY_DAYS = 90;

export async function organizationReport(
  deps: { store: Store; config: Config; now: () => number },
  orgId: number,
  days: number,
) {
  const db = deps.store.db;
  const now = deps.now();
  const today = dayOf(now);
  const [users, totals, models, adoption, recorded] = await Promise.all([
    userTotals(db, orgId),
    passkeyTotals(db, orgId, now - days * DAY),
    passkeysByModel(db, orgId),
    adoptionFigures(db, orgId),
    adoptionHistory(db, orgId, dayOf(now - (ADOPTION_HISTORY_DAYS - 1) * DAY)),
  ]);
  return {
    org_id: orgId,
    users: users.users,
    users_with_passkey: totals.usersWithPasskey,
    coverage_percent: users.users === 0 ? 0 : Math.round((1000 * totals.usersWithPasskey) / users.users) / 10,
    users_without_sign_in_method: users.noSignInMethod,
    passkeys: totals.passkeys,
    synced: totals.synced,
    device_bound: totals.passkeys - totals.synced,
    without_user_verification: totals.withoutUserVerification,
    unused_days: days,
    unused: totals.unusedSince,
    by_model: models.map((m) => ({
      aaguid: m.aaguid,
      name: authenticatorName(m.aaguid, deps.config.aaguidData) ?? null,
      passkeys: m.count,
    })),
    adoption,
    // the recorded days before today, and today as it is now
    adoption_history: [...recorded.filter((d) => d.day < today), { day: today, ...adoption }],
  };
}

export type OrganizationReport = Awaited<ReturnType<typeof organizationReport>>;
