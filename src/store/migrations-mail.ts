// E-mail (docs/email.md): the language a user's messages are written in, and the invitations sent
// to bring users to a passkey (who, when, which recovery link, reminded when), which the adoption
// report counts. The messages themselves are deliveries of the events outbox.
import { type Kysely, type Migration, sql } from 'kysely';
import { identityKey } from './migration-dialect.ts';

type Dialect = 'sqlite' | 'postgres';

export function migration022(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        'alter table users add column language text',
        `create table if not exists mail_invitations (
          id ${pk},
          org_id integer not null,
          user_id bigint not null references users(id) on delete cascade,
          recovery_link_id bigint not null,
          invited_at bigint not null,
          invited_by text not null,
          remind_after_ms bigint,
          reminded_at bigint)`,
        'create index if not exists mail_invitations_org on mail_invitations(org_id, user_id)',
        'create index if not exists mail_invitations_user on mail_invitations(user_id)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}
