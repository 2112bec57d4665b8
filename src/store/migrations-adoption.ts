// The adoption funnel of an organization's move (the console report): when each user first signed
// in, and the figures recorded once a day so the report can draw the last 90 days.
import { type Kysely, type Migration, sql } from 'kysely';

export function migration024(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      for (const statement of [
        'alter table users add column first_sign_in_at bigint',
        // from the audit trail (as far as it is kept), else from a passkey's last use
        `update users set first_sign_in_at = f.at from (
          select org_id, eppn, min(at) as at from audit_events
          where kind = 'signin.succeeded' and eppn is not null group by org_id, eppn) as f
         where users.org_id = f.org_id and users.eppn = f.eppn`,
        `update users set first_sign_in_at = (
          select min(last_used_at) from passkeys where passkeys.user_id = users.id)
         where first_sign_in_at is null and passkey_count > 0`,
        'create index if not exists users_org_signed_in on users(org_id, id) where first_sign_in_at is not null',
        'create index if not exists users_org_passkey_only on users(org_id, id) where passkey_count > 0 and password_hash is null',
        `create table if not exists adoption_daily (
          org_id bigint not null,
          day text not null,
          users bigint not null,
          invited bigint not null,
          signed_in bigint not null,
          with_passkey bigint not null,
          passkey_only bigint not null,
          primary key (org_id, day))`,
      ])
        await sql.raw(statement).execute(db);
    },
  };
}
