// An organization's LDAP directories (Active Directory, OpenLDAP): how to reach and read each one,
// its sync state (the high-water mark of the last run, the lease a running sync holds), and which
// of the organization's users each directory provides (by the entry's stable id), so a sync only
// ever disables or removes the users it brought in.
import { type Kysely, type Migration, sql } from 'kysely';
import { identityKey } from './migration-dialect.ts';

type Dialect = 'sqlite' | 'postgres';

export function migration023(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        `create table if not exists ldap_directories (
          id ${pk},
          org_id bigint not null references organizations(id) on delete cascade,
          url text not null,
          starttls integer not null default 0,
          ca_pem text,
          bind_dn text not null,
          bind_password text not null,
          base_dn text not null,
          filter text not null,
          mapping text not null,
          groups_base_dn text,
          sync_every_ms bigint,
          on_missing text not null,
          password_check integer not null default 0,
          created_at bigint not null,
          created_by text not null,
          high_water text,
          runs_since_full integer not null default 0,
          last_full_at bigint,
          last_sync_at bigint,
          last_sync_status text,
          last_sync_summary text,
          lease_until bigint,
          lease_owner text)`,
        `create index if not exists ldap_directories_org on ldap_directories(org_id)`,
        `create table if not exists ldap_entries (
          directory_id bigint not null references ldap_directories(id) on delete cascade,
          external_id text not null,
          user_id bigint not null unique references users(id) on delete cascade,
          dn text not null,
          disabled_by_directory integer not null default 0,
          primary key (directory_id, external_id))`,
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

/**
 * The groups each directory provides (by the group entry's stable id, so a renamed group stays the
 * same group), and per user entry a digest of what the directory last said of it, so a run skips
 * entries that did not change without reading their users.
 */
export function migration027(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        `create table if not exists ldap_groups (
          directory_id bigint not null references ldap_directories(id) on delete cascade,
          external_id text not null,
          group_id bigint not null unique references groups(id) on delete cascade,
          dn text not null,
          primary key (directory_id, external_id))`,
        `alter table ldap_entries add column digest text`,
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}
