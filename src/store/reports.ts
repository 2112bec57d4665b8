// The organization report (src/console/report-api.ts): aggregates over one organization's users
// and passkeys, each one scan of the organization's rows.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export interface PasskeyTotals {
  passkeys: number;
  synced: number;
  withoutUserVerification: number;
  unusedSince: number;
  usersWithPasskey: number;
}

/** Passkey counts of the organization; unusedSince: not used (or, never used, made) since `cutoff`. */
export async function passkeyTotals(db: Q, orgId: number, cutoff: number): Promise<PasskeyTotals> {
  const row = await db
    .selectFrom('passkeys')
    .select([
      sql<string>`count(*)`.as('passkeys'),
      sql<string>`coalesce(sum(case when backup_eligible = 1 then 1 else 0 end), 0)`.as('synced'),
      sql<string>`coalesce(sum(case when mfa_verified = 0 then 1 else 0 end), 0)`.as('without_uv'),
      sql<string>`coalesce(sum(case when coalesce(last_used_at, created_at) < ${cutoff} then 1 else 0 end), 0)`.as(
        'unused',
      ),
      sql<string>`count(distinct user_id)`.as('users'),
    ])
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return {
    passkeys: Number(row.passkeys),
    synced: Number(row.synced),
    withoutUserVerification: Number(row.without_uv),
    unusedSince: Number(row.unused),
    usersWithPasskey: Number(row.users),
  };
}

/** Passkeys per AAGUID, most first. */
export async function passkeysByModel(db: Q, orgId: number): Promise<{ aaguid: string; count: number }[]> {
  const rows = await db
    .selectFrom('passkeys')
    .select(['aaguid', sql<string>`count(*)`.as('n')])
    .where('org_id', '=', orgId)
    .groupBy('aaguid')
    .orderBy(sql`count(*)`, 'desc')
    .orderBy('aaguid')
    .execute();
  return rows.map((r) => ({ aaguid: r.aaguid, count: Number(r.n) }));
}

/** Users of the organization, and those with neither a password nor a passkey (no way to sign in). */
export async function userTotals(db: Q, orgId: number): Promise<{ users: number; noSignInMethod: number }> {
  const row = await db
    .selectFrom('users')
    .select([
      sql<string>`count(*)`.as('users'),
      sql<string>`coalesce(sum(case when users.password_hash is null and not exists (select 1 from passkeys p where p.user_id = users.id) then 1 else 0 end), 0)`.as(
        'none',
      ),
    ])
    .where('org_id', '=', orgId)
    .executeTakeFirstOrThrow();
  return { users: Number(row.users), noSignInMethod: Number(row.none) };
}
