// The adoption funnel of an organization's move onto the service: its users (imported, synced or
// provisioned), those invited by e-mail to make a passkey (mail_invitations), those who signed in at least once, those with a
// passkey and those with only passkeys (no password of their own, nor one their LDAP directory checks). Today's figures are counted live over partial
// indexes of users (migrations 010 and 024); each day's are kept in adoption_daily, written by the
// housekeeping of every instance (an upsert of the same counts: instances racing write one row).
import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely';
import type { AdoptionDailyTable, DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export type AdoptionFigures = Omit<AdoptionDailyTable, 'org_id' | 'day'>;
export type AdoptionDay = Omit<AdoptionDailyTable, 'org_id'>;

export const ADOPTION_STAGES = ['users', 'invited', 'signed_in', 'with_passkey', 'passkey_only'] as const;

/** The UTC day of a time, as YYYY-MM-DD. */
export const dayOf = (at: number): string => new Date(at).toISOString().slice(0, 10);

/**
 * The user signs in with their LDAP directory's password (src/directory/ldap-directories.ts,
 * checkPasswordWithDirectory): they were synced from a directory of their organization that
 * checks passwords, and hold no staff role (staff never sign in with a directory's password).
 * Such a user has a password, though the service stores none: not passkey-only.
 */
function directoryPassword(eb: ExpressionBuilder<DB, 'users'>) {
  return eb
    .selectFrom('ldap_entries as e')
    .innerJoin('ldap_directories as d', 'd.id', 'e.directory_id')
    .select('e.user_id')
    .whereRef('e.user_id', '=', 'users.id')
    .whereRef('d.org_id', '=', 'users.org_id')
    .where('d.password_check', '=', 1)
    .where((w) => w.not(w.exists(w.selectFrom('roles as r').select('r.id').whereRef('r.user_id', '=', 'users.id'))));
}

// The conditions are written out in the SQL text, as those of the partial indexes: SQLite uses a
// partial index only when the query's own words imply its condition.
function figures(eb: ExpressionBuilder<DB, never>, orgId: number) {
  const users = () =>
    eb
      .selectFrom('users')
      .select(sql<number>`count(*)`.as('n'))
      .where('users.org_id', '=', orgId);
  return [
    users().as('users'),
    users()
      .where((w) =>
        w.exists(w.selectFrom('mail_invitations as i').select('i.id').whereRef('i.user_id', '=', 'users.id')),
      )
      .as('invited'),
    users()
      .where(sql<boolean>`users.first_sign_in_at is not null`)
      .as('signed_in'),
    users()
      .where(sql<boolean>`users.passkey_count > 0`)
      .as('with_passkey'),
    users()
      .where(sql<boolean>`users.passkey_count > 0 and users.password_hash is null`)
      .where((w) => w.not(w.exists(directoryPassword(w))))
      .as('passkey_only'),
  ];
}

/** The organization's funnel now. */
export async function adoptionFigures(db: Q, orgId: number): Promise<AdoptionFigures> {
  const row = await db.selectNoFrom((eb) => figures(eb, orgId)).executeTakeFirstOrThrow();
  return {
    users: Number(row.users ?? 0),
    invited: Number(row.invited ?? 0),
    signed_in: Number(row.signed_in ?? 0),
    with_passkey: Number(row.with_passkey ?? 0),
    passkey_only: Number(row.passkey_only ?? 0),
  };
}

/** Records every organization's funnel as today's figures; returns the organizations recorded. */
export async function recordAdoptionDay(db: Q, now: number): Promise<number> {
  const day = dayOf(now);
  const orgs = await db.selectFrom('organizations').select('id').execute();
  for (const { id } of orgs) {
    const f = await adoptionFigures(db, id);
    await db
      .insertInto('adoption_daily')
      .values({ org_id: id, day, ...f })
      .onConflict((oc) => oc.columns(['org_id', 'day']).doUpdateSet(f))
      .execute();
  }
  return orgs.length;
}

/** The recorded days of the organization from `fromDay` on, oldest first. */
export function adoptionHistory(db: Q, orgId: number, fromDay: string): Promise<AdoptionDay[]> {
  return db
    .selectFrom('adoption_daily')
    .select(['day', ...ADOPTION_STAGES])
    .where('org_id', '=', orgId)
    .where('day', '>=', fromDay)
    .orderBy('day')
    .execute();
}

/** Every organization's most recently recorded figures (for the metrics). */
export function latestAdoption(db: Q): Promise<AdoptionDailyTable[]> {
  const latest = db
    .selectFrom('adoption_daily')
    .select(['org_id', (eb) => eb.fn.max('day').as('day')])
    .groupBy('org_id')
    .as('l');
  return db
    .selectFrom('adoption_daily as a')
    .innerJoin(latest, (join) => join.onRef('l.org_id', '=', 'a.org_id').onRef('l.day', '=', 'a.day'))
    .selectAll('a')
    .orderBy('a.org_id')
    .execute();
}

/** Notes a user's first successful sign-in; later ones change nothing. */
export async function markFirstSignIn(db: Q, userId: number, at: number): Promise<void> {
  await db
    .updateTable('users')
    .set({ first_sign_in_at: at })
    .where('id', '=', userId)
    .where('first_sign_in_at', 'is', null)
    .execute();
}
