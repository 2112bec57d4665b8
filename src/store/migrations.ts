// Schema migrations, run on every start, in one transaction. On PostgreSQL, Kysely's Migrator holds
// an advisory lock for the run, so several instances starting at once migrate exactly once; on
// SQLite the transaction's write lock (BEGIN IMMEDIATE) does the same.
import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from 'kysely';
import { identityKey } from './migration-dialect.ts';
import { migration011 } from './migrations-provisioning.ts';
import { migration017, migration021 } from './migrations-service-providers.ts';
import { migration018 } from './migrations-saml-sso.ts';
import { migration020 } from './migrations-saml-sp-blocks.ts';
import { migration022 } from './migrations-mail.ts';
import { migration028 } from './migrations-secrets.ts';
import { migration024 } from './migrations-adoption.ts';
import { migration023, migration027 } from './migrations-ldap.ts';
import { migration025, migration029, migration030, migration032, migration033 } from './migrations-upstream.ts';
import { migration026, migration031 } from './migrations-upstream-saml.ts';
import { migration035 } from './migrations-outbox.ts';
import { migration034 } from './migrations-organizations.ts';

type Dialect = 'sqlite' | 'postgres';

function migration001(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  const blob = dialect === 'postgres' ? 'bytea' : 'blob';
  return {
    async up(db: Kysely<any>) {
      const statements = [
        `create table if not exists organizations (
          id bigint primary key,
          realm text not null unique,
          name text not null,
          created_at bigint not null)`,
        `create table if not exists users (
          id ${pk},
          sub text not null unique,
          org_id bigint not null references organizations(id),
          eppn text not null unique,
          name text not null,
          email text,
          nin text,
          password_hash text,
          photo_handle text,
          created_at bigint not null,
          updated_at bigint not null)`,
        `create index if not exists users_org on users(org_id, id)`,
        `create index if not exists users_email on users(email)`,
        `create table if not exists user_ids (
          user_id bigint not null references users(id) on delete cascade,
          namespace text not null,
          identifier text not null,
          primary key (namespace, identifier))`,
        `create index if not exists user_ids_user on user_ids(user_id)`,
        `create table if not exists clients (
          client_id text primary key,
          secret_hash text,
          name text not null,
          redirect_uris text not null,
          post_logout_redirect_uris text not null,
          grant_types text not null,
          scopes text not null,
          groups text not null,
          first_party integer not null default 0,
          userinfo_signed_response_alg text,
          created_at bigint not null,
          updated_at bigint not null)`,
        `create table if not exists client_orgs (
          client_id text not null references clients(client_id) on delete cascade,
          org_id bigint not null references organizations(id) on delete cascade,
          kind text not null,
          primary key (client_id, org_id, kind))`,
        `create table if not exists passkeys (
          id ${pk},
          user_id bigint not null references users(id) on delete cascade,
          org_id bigint not null references organizations(id),
          credential_id ${blob} not null unique,
          public_key ${blob} not null,
          sign_count bigint not null default 0,
          transports text not null,
          label text not null,
          aaguid text not null,
          backup_eligible integer not null default 0,
          backup_state integer not null default 0,
          mfa_verified integer not null default 0,
          created_at bigint not null,
          last_used_at bigint)`,
        `create index if not exists passkeys_org on passkeys(org_id, id)`,
        `create index if not exists passkeys_user on passkeys(user_id, id)`,
        `create table if not exists photos (
          handle text primary key,
          user_id bigint not null references users(id) on delete cascade,
          bytes ${blob} not null,
          etag text not null,
          width integer not null,
          height integer not null,
          updated_at bigint not null)`,
        `create index if not exists photos_user on photos(user_id)`,
        `create table if not exists oidc_payloads (
          id text not null,
          type text not null,
          payload text not null,
          grant_id text,
          user_code text,
          uid text,
          expires_at bigint,
          consumed_at bigint,
          primary key (type, id))`,
        `create index if not exists oidc_payloads_grant on oidc_payloads(grant_id)`,
        `create index if not exists oidc_payloads_uid on oidc_payloads(uid)`,
        `create index if not exists oidc_payloads_user_code on oidc_payloads(user_code)`,
        `create index if not exists oidc_payloads_expires on oidc_payloads(expires_at)`,
        `create table if not exists signing_keys (
          kid text primary key,
          alg text not null,
          private_jwk text not null,
          public_jwk text not null,
          created_at bigint not null,
          activates_at bigint not null,
          retired_at bigint)`,
        `create table if not exists audit_events (
          id ${pk},
          at bigint not null,
          kind text not null,
          client_id text,
          org_id bigint,
          eppn text,
          passkey_ids text not null,
          request_id text,
          details text not null)`,
        `create index if not exists audit_events_org on audit_events(org_id, at)`,
        `create index if not exists audit_events_at on audit_events(at)`,
        `create table if not exists consents (
          user_id bigint not null references users(id) on delete cascade,
          client_id text not null references clients(client_id) on delete cascade,
          scopes text not null,
          created_at bigint not null,
          primary key (user_id, client_id))`,
        `create table if not exists rate_limits (
          key text primary key,
          window_start bigint not null,
          count integer not null)`,
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Mail lookups compare lower-cased addresses for equality (indexed, same result on both
// dialects); national id lookups are scoped by organization.
function migration002(): Migration {
  return {
    async up(db: Kysely<any>) {
      const rows = await db.selectFrom('users').select(['id', 'email']).where('email', 'is not', null).execute();
      for (const row of rows as { id: number; email: string }[]) {
        const normalized = row.email.trim().toLowerCase();
        if (normalized !== row.email)
          await db.updateTable('users').set({ email: normalized }).where('id', '=', row.id).execute();
      }
      await sql.raw('drop index if exists users_email').execute(db);
      await sql.raw('create index if not exists users_org_email on users(org_id, email)').execute(db);
      await sql.raw('create index if not exists users_org_nin on users(org_id, nin)').execute(db);
    },
  };
}

/** Every migration, by name; Kysely runs them in the order of their names. */
function allMigrations(dialect: Dialect): Record<string, Migration> {
  return {
    '001_initial': migration001(dialect),
    '002_lookup_indexes': migration002(),
    '003_logout': migration003(dialect),
    '004_dpop': migration004(),
    '005_operations': migration005(),
    '006_invalidations': migration006(dialect),
    '007_events': migration007(dialect),
    '008_passkey_lifecycle': migration008(dialect),
    '009_roles': migration009(dialect),
    '010_console': migration010(dialect),
    '011_provisioning': migration011(dialect),
    '012_passkey_list_index': migration012(dialect),
    '013_console_sessions': migration013(),
    '014_client_introspection': migration014(),
    '015_stream_verification': migration015(),
    '016_scim_email_primary': migration016(),
    '017_service_providers': migration017(),
    '018_saml_sso': migration018(),
    '019_saml_federations': migration019(dialect),
    '020_saml_sp_blocks': migration020(),
    '021_federation_signed_requests': migration021(),
    '022_mail': migration022(dialect),
    '023_ldap_directories': migration023(dialect),
    '024_adoption': migration024(),
    '025_upstream_providers': migration025(),
    '026_upstream_saml_options': migration026(),
    '027_ldap_groups': migration027(),
    '028_kept_keys': migration028(),
    '029_upstream_browser_binding': migration029(),
    '030_upstream_trusted_amr': migration030(),
    '031_upstream_saml_federation': migration031(),
    '032_upstream_logos': migration032(dialect),
    '033_upstream_link_requests': migration033(),
    '034_organization_disabled': migration034(),
    '035_outbox_pending_index': migration035(),
  };
}

/** Migrations recorded in the database that are not among `known`: run by a newer release. */
async function newerMigrations(db: Kysely<any>, dialect: Dialect, known: string[]): Promise<string[]> {
  const present =
    dialect === 'sqlite'
      ? sql`select 1 as present from sqlite_master where type = 'table' and name = 'schema_migrations'`
      : sql`select 1 as present from information_schema.tables
            where table_name = 'schema_migrations' and table_schema = current_schema()`;
  if ((await present.execute(db)).rows.length === 0) return [];
  const last = [...known].sort().at(-1) ?? '';
  const rows = await db.selectFrom('schema_migrations').select('name').execute();
  return rows.map((r: { name: string }) => r.name).filter((name) => !known.includes(name) && name > last);
}

/** The names of the migrations this code knows, in order: the last is the schema version it expects. */
export function migrationNames(): string[] {
  return Object.keys(allMigrations('sqlite')).sort();
}

/** Runs the migrations not yet run, all of them or (tests of a migration's backfill) up to and including `upTo`. */
export async function migrate(db: Kysely<any>, dialect: Dialect, upTo?: string): Promise<string[]> {
  const migrations = allMigrations(dialect);
  // A newer release, upgraded first (docs/operations.md, Upgrading instances one at a time), may have
  // run migrations this code does not know. They only add (docs/architecture.md, Migrations: expand,
  // then contract), so this code works on the database as it is: they are taken as run, where
  // Kysely would otherwise refuse a database with a migration it has no definition of.
  for (const name of await newerMigrations(db, dialect, Object.keys(migrations)))
    migrations[name] = {
      up: () => Promise.reject(new Error(`migration ${name} belongs to a newer release`)),
    };
  const provider: MigrationProvider = { getMigrations: async () => migrations };
  // Kysely runs the pending migrations and their records in schema_migrations in one transaction
  // where the dialect's adapter declares transactional DDL: PostgreSQL's does, and so does ours for
  // SQLite (src/store/sqlite.ts). A run that stops part-way leaves the schema as it was, and the next
  // start runs it again. No migration may therefore start or end a transaction of its own, or use
  // what cannot run in one (PRAGMA foreign_keys, VACUUM, CREATE INDEX CONCURRENTLY).
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
  });
  const { error, results } = await (upTo === undefined ? migrator.migrateToLatest() : migrator.migrateTo(upTo));
  if (error) throw error instanceof Error ? error : new Error('migration failed', { cause: error });
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

// Logout: the clients' back- and front-channel logout URIs; the account of each authorization
// artifact as a column, so a user's sessions and grants are found without reading every payload;
// and the back-channel logout deliveries with their outcome, retried until they succeed or give up.
function migration003(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  const accountOf = dialect === 'postgres' ? "(payload::json ->> 'accountId')" : "json_extract(payload, '$.accountId')";
  return {
    async up(db: Kysely<any>) {
      const statements = [
        'alter table clients add column backchannel_logout_uri text',
        'alter table clients add column frontchannel_logout_uri text',
        'alter table oidc_payloads add column account_id text',
        `update oidc_payloads set account_id = ${accountOf}`,
        'create index if not exists oidc_payloads_account on oidc_payloads(account_id)',
        `create table if not exists logout_deliveries (
          id ${pk},
          client_id text not null,
          sub text not null,
          sid text,
          created_at bigint not null,
          attempts integer not null default 0,
          last_attempt_at bigint,
          next_attempt_at bigint,
          status integer,
          error text,
          delivered_at bigint)`,
        'create index if not exists logout_deliveries_due on logout_deliveries(next_attempt_at)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Clients that must push their authorization requests (RFC 9126), and the DPoP proof ids (RFC 9449)
// seen recently, shared by every instance so a proof is accepted once.
function migration004(): Migration {
  return {
    async up(db: Kysely<any>) {
      const statements = [
        'alter table clients add column require_par integer not null default 0',
        'create table if not exists dpop_proofs (id text primary key, expires_at bigint not null)',
        'create index if not exists dpop_proofs_expires on dpop_proofs(expires_at)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Operations: users and clients that can be disabled; a user's display name and verified e-mail;
// a client's previous secret, valid until the end of a rotation's overlap; organizations' branding;
// and the audit trail's actor, subject and source address, with the indexes its filters use.
function migration005(): Migration {
  return {
    async up(db: Kysely<any>) {
      const statements = [
        'alter table users add column display_name text',
        'alter table users add column email_verified integer not null default 0',
        'alter table users add column disabled_at bigint',
        'alter table clients add column disabled_at bigint',
        'alter table clients add column previous_secret_hash text',
        'alter table clients add column previous_secret_expires_at bigint',
        'alter table organizations add column branding text',
        'alter table audit_events add column actor_type text',
        'alter table audit_events add column actor text',
        'alter table audit_events add column subject text',
        'alter table audit_events add column source text',
        'create index if not exists audit_events_actor on audit_events(actor, id)',
        'create index if not exists audit_events_subject on audit_events(subject, id)',
        'create index if not exists audit_events_kind on audit_events(kind, id)',
        'create index if not exists audit_events_org_id on audit_events(org_id, id)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Cache invalidations (src/store/invalidation.ts): a row per change that a cache must drop,
// written in the change's transaction and kept a minute. On PostgreSQL a trigger also sends it as
// a NOTIFY, delivered at commit (a rolled-back change sends nothing); SQLite processes poll it.
function migration006(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  const notify = [
    `create or replace function idp_invalidation_notify() returns trigger language plpgsql as $$
     begin
       perform pg_notify('idp_invalidations', json_build_object('id', new.id, 'topic', new.topic, 'key', new.key)::text);
       return null;
     end $$`,
    `create trigger invalidations_notify after insert on invalidations
     for each row execute function idp_invalidation_notify()`,
  ];
  return {
    async up(db: Kysely<any>) {
      const statements = [
        `create table if not exists invalidations (id ${pk}, topic text not null, key text not null, at bigint not null)`,
        'create index if not exists invalidations_at on invalidations(at)',
        ...(dialect === 'postgres' ? notify : []),
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Events (src/events/): the outbox, written in the transaction of the change it reports; one
// delivery per event and destination (a webhook or a Shared Signals stream), claimed with a lease
// by the delivery job of whichever instance gets it first; the webhooks and streams themselves.
function migration007(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<any>) {
      const statements = [
        `create table if not exists events (
          id ${pk},
          at bigint not null,
          type text not null,
          org_id integer,
          subject text,
          data text not null)`,
        'create index if not exists events_at on events(at)',
        `create table if not exists webhooks (
          id ${pk},
          org_id integer not null,
          url text not null,
          event_types text not null,
          secret text not null,
          previous_secret text,
          previous_secret_expires_at bigint,
          created_at bigint not null)`,
        'create index if not exists webhooks_org on webhooks(org_id)',
        `create table if not exists ssf_streams (
          id text primary key,
          client_id text not null,
          delivery_method text not null,
          endpoint_url text,
          authorization_header text,
          events_requested text not null,
          description text,
          status text not null,
          reason text,
          all_subjects integer not null,
          created_at bigint not null,
          updated_at bigint not null)`,
        'create index if not exists ssf_streams_client on ssf_streams(client_id)',
        `create table if not exists ssf_stream_subjects (
          stream_id text not null,
          sub text not null,
          primary key (stream_id, sub))`,
        `create table if not exists event_deliveries (
          id ${pk},
          event_id bigint not null,
          destination text not null,
          subject text,
          state text not null,
          attempts integer not null default 0,
          next_attempt_at bigint,
          lease_until bigint,
          last_attempt_at bigint,
          last_status integer,
          last_error text,
          delivered_at bigint,
          created_at bigint not null)`,
        'create index if not exists event_deliveries_due on event_deliveries(state, next_attempt_at)',
        'create index if not exists event_deliveries_order on event_deliveries(destination, subject, id)',
        'create index if not exists event_deliveries_event on event_deliveries(event_id)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// The passkey lifecycle: an organization's authenticator policy, whether a passkey's
// authenticator was attested to a trusted root, the FIDO Metadata Service entries an operator
// imported, and one-time recovery links (stored as hashes).
function migration008(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<any>) {
      const statements = [
        'alter table organizations add column passkey_policy text',
        'alter table passkeys add column attested integer not null default 0',
        `create table if not exists mds_authenticators (
          aaguid text primary key,
          description text not null,
          status text not null,
          status_date text,
          icon text,
          statement text not null,
          updated_at bigint not null)`,
        `create table if not exists mds_imports (
          id ${pk},
          serial integer not null,
          next_update text not null,
          entries integer not null,
          imported_at bigint not null)`,
        `create table if not exists recovery_links (
          id ${pk},
          token_hash text not null unique,
          user_id integer not null,
          org_id integer not null,
          created_at bigint not null,
          expires_at bigint not null,
          used_at bigint,
          revoked_at bigint,
          created_by text not null,
          delete_others integer not null default 0)`,
        'create index if not exists recovery_links_user on recovery_links(user_id, id)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// Staff roles per organization (src/directory/roles.ts): helpdesk and org-admin in one
// organization, operator across all (org_id 0, which names no organization).
function migration009(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<any>) {
      const statements = [
        `create table if not exists roles (
          id ${pk},
          user_id bigint not null references users(id) on delete cascade,
          org_id bigint not null,
          role text not null,
          granted_at bigint not null,
          granted_by text not null,
          unique (user_id, role, org_id))`,
        'create index if not exists roles_org on roles(org_id, role)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// The staff console (src/store/user-search.ts, src/store/reports.ts).
//
// User search reads a prefix of eppn, e-mail, name or display name as an index range within the
// organization. PostgreSQL's indexes are in the "C" collation (code point order, the order of
// SQLite's BINARY), so a range is exactly a prefix whatever the database's collation. SQLite's
// also hold eppn, so the matches are sorted by eppn from the index alone (a table lookup per match
// made a one-letter search of 100,000 people 8 times slower); PostgreSQL could only do that with
// the whole row's columns included, and is fast enough without.
//
// The organization report must not grow with the organization (a million passkeys), so what it
// counts is kept as it changes, by triggers on passkeys (whichever statement changes them, foreign
// key cascades included): passkey_counts holds each organization's passkeys by authenticator
// model, synced or not and verified or not; users.passkey_count each user's passkeys, which partial
// indexes turn into users with a passkey and users with no way to sign in. Passkeys not used since
// a date are counted through an index on the date they were last used (or made).
function migration010(dialect: Dialect): Migration {
  const postgres = dialect === 'postgres';
  const c = postgres ? ' collate "C"' : '';
  const eppn = postgres ? '' : ', eppn';
  const indexes = [
    `create index if not exists users_org_eppn on users(org_id, eppn${c})`,
    `create index if not exists users_org_email_prefix on users(org_id, email${c}${eppn})`,
    `create index if not exists users_org_name on users(org_id, (lower(name)${c})${eppn})`,
    `create index if not exists users_org_display_name on users(org_id, (lower(display_name)${c})${eppn})`,
    // PostgreSQL answers from an index alone only when it holds every column the query names.
    postgres
      ? 'create index if not exists passkeys_org_unused on passkeys(org_id, (coalesce(last_used_at, created_at))) include (last_used_at, created_at)'
      : 'create index if not exists passkeys_org_unused on passkeys(org_id, coalesce(last_used_at, created_at))',
  ];
  const counted = [
    'alter table users add column passkey_count bigint not null default 0',
    `create table if not exists passkey_counts (
      org_id bigint not null,
      aaguid text not null,
      backup_eligible integer not null,
      mfa_verified integer not null,
      passkeys bigint not null,
      primary key (${COUNTED}))`,
    ...(postgres ? postgresCountTriggers() : sqliteCountTriggers()),
    `insert into passkey_counts (${COUNTED}, passkeys) select ${COUNTED}, count(*) from passkeys group by ${COUNTED}`,
    `update users set passkey_count = (select count(*) from passkeys where passkeys.user_id = users.id)
     where id in (select user_id from passkeys)`,
    'create index if not exists users_org_without_passkey on users(org_id, id) where passkey_count = 0',
    'create index if not exists users_org_no_sign_in on users(org_id, id) where passkey_count = 0 and password_hash is null',
  ];
  return {
    async up(db: Kysely<any>) {
      // The counts and the triggers that keep them start together: like every migration, this one
      // runs in the migrations' transaction (migrate, above).
      for (const statement of [...indexes, ...counted]) await sql.raw(statement).execute(db);
    },
  };
}

/** The columns passkey_counts counts by. */
const COUNTED = 'org_id, aaguid, backup_eligible, mfa_verified';

function sqliteCountTriggers(): string[] {
  const count = (row: string, n: number) =>
    `update users set passkey_count = passkey_count + ${n} where id = ${row}.user_id;
     insert into passkey_counts (${COUNTED}, passkeys)
     values (${row}.org_id, ${row}.aaguid, ${row}.backup_eligible, ${row}.mfa_verified, ${n})
     on conflict (${COUNTED}) do update set passkeys = passkeys + ${n};`;
  const changed = ['user_id', ...COUNTED.split(', ')].map((col) => `old.${col} is not new.${col}`).join(' or ');
  return [
    `create trigger passkey_counts_insert after insert on passkeys begin ${count('new', 1)} end`,
    `create trigger passkey_counts_delete after delete on passkeys begin ${count('old', -1)} end`,
    `create trigger passkey_counts_update after update of user_id, ${COUNTED} on passkeys when ${changed}
     begin ${count('old', -1)} ${count('new', 1)} end`,
  ];
}

// On PostgreSQL, passkey_counts has a few rows per organization that every passkey change would
// update: taken at once, a long import would hold them to its end, stopping every registration of
// the organization, and two transactions taking them in different orders would deadlock. So each
// statement only notes its changes (one row per user and kind, from the transition tables) and the
// transaction folds them in at commit (a deferred trigger, once per transaction): the users in id
// order, then passkey_counts in key order, held for the moment the commit takes. Users are locked
// FOR NO KEY UPDATE, which the foreign key checks of passkey inserts (FOR KEY SHARE) do not wait for.
// Within the changing transaction the counts are those of before it; a rolled-back one changes none.
function postgresCountTriggers(): string[] {
  const kind = `user_id, ${COUNTED}`;
  const note = (table: string, sign: string) => `
    insert into passkey_count_changes (txid, ${kind}, n)
      select txid_current(), ${kind}, ${sign}count(*) from ${table} group by ${kind};
    insert into passkey_count_folds (txid) select txid_current() where exists (select from ${table})
      on conflict do nothing;`;
  const columns = (row: string) =>
    kind
      .split(', ')
      .map((x) => `${row}.${x}`)
      .join(', ');
  const moved = `
    insert into passkey_count_changes (txid, ${kind}, n) values
      (txid_current(), ${columns('old')}, -1), (txid_current(), ${columns('new')}, 1);
    insert into passkey_count_folds (txid) values (txid_current()) on conflict do nothing;`;
  const fold = `
    perform 1 from users
      where id in (select user_id from passkey_count_changes where txid = txid_current())
      order by id for no key update;
    update users set passkey_count = users.passkey_count + c.n
      from (select user_id, sum(n) as n from passkey_count_changes where txid = txid_current() group by user_id) c
      where users.id = c.user_id and c.n <> 0;
    insert into passkey_counts (${COUNTED}, passkeys)
      select ${COUNTED}, sum(n) from passkey_count_changes where txid = txid_current()
      group by ${COUNTED} having sum(n) <> 0 order by ${COUNTED}
      on conflict (${COUNTED}) do update set passkeys = passkey_counts.passkeys + excluded.passkeys;
    delete from passkey_count_changes where txid = txid_current();
    delete from passkey_count_folds where txid = txid_current();`;
  const fn = (name: string, body: string) =>
    `create or replace function ${name}() returns trigger language plpgsql as $$ begin ${body} return null; end $$`;
  return [
    // No passkey is written between the counting below and the triggers taking over.
    'lock table passkeys in share row exclusive mode',
    `create table if not exists passkey_count_changes (
      txid bigint not null,
      user_id bigint not null,
      org_id bigint not null,
      aaguid text not null,
      backup_eligible integer not null,
      mfa_verified integer not null,
      n bigint not null)`,
    'create index if not exists passkey_count_changes_txid on passkey_count_changes(txid)',
    'create table if not exists passkey_count_folds (txid bigint primary key)',
    fn('passkey_counts_added', note('added', '')),
    fn('passkey_counts_removed', note('removed', '-')),
    fn('passkey_counts_moved', moved),
    fn('passkey_counts_fold', fold),
    `create trigger passkey_counts_insert after insert on passkeys referencing new table as added
     for each statement execute function passkey_counts_added()`,
    `create trigger passkey_counts_delete after delete on passkeys referencing old table as removed
     for each statement execute function passkey_counts_removed()`,
    // A sign-in may set backup_eligible again; only a change calls the function.
    `create trigger passkey_counts_update after update of ${kind} on passkeys for each row
     when ((${columns('old')}) is distinct from (${columns('new')}))
     execute function passkey_counts_moved()`,
    `create constraint trigger passkey_counts_fold after insert on passkey_count_folds
     deferrable initially deferred for each row execute function passkey_counts_fold()`,
  ];
}

// One user's passkey list (the passkey API's most frequent read) from the index alone: the user's
// index carries the listed columns, so the list reads the index entries, which sit together, instead
// of one table row per passkey, which sit wherever each passkey was made. On PostgreSQL the columns
// are INCLUDEd (not part of the key); it reads the index alone where the visibility map allows. The
// price is a wider index that a sign-in (last_used_at) and a rename also update.
function migration012(dialect: Dialect): Migration {
  const listed = 'label, created_at, last_used_at, mfa_verified, aaguid';
  const index =
    dialect === 'postgres'
      ? `create index passkeys_user on passkeys(user_id, id) include (${listed})`
      : `create index passkeys_user on passkeys(user_id, id, ${listed})`;
  return {
    async up(db: Kysely<any>) {
      await sql.raw('drop index if exists passkeys_user').execute(db);
      await sql.raw(index).execute(db);
    },
  };
}

// Console sessions live in a sealed cookie; each carries the user's console generation as it was at
// sign-in. Signing out of the console, and everything that ends a user's sessions (disabling,
// removal, deleting all their passkeys, offboarding), counts the generation up, so every console
// session issued before ends at its next request. The console reads the user's row on every
// request anyway: the check costs no query.
function migration013(): Migration {
  return {
    async up(db: Kysely<any>) {
      await sql.raw('alter table users add column console_generation integer not null default 0').execute(db);
    },
  };
}

// Resource servers: confidential clients an operator allows to introspect the access tokens of the
// users of their organizations and the service's JWT access tokens (docs/tokens.md).
function migration014(): Migration {
  return {
    async up(db: Kysely<any>) {
      await sql.raw('alter table clients add column introspection integer not null default 0').execute(db);
    },
  };
}

// SSF's min_verification_interval: when the stream last accepted a verification request, so the next
// one inside the interval is refused by the conditional update that records it (atomic on both
// dialects, also between instances).
function migration015(): Migration {
  return {
    async up(db: Kysely<any>) {
      await sql.raw('alter table ssf_streams add column verification_requested_at bigint').execute(db);
    },
  };
}

// Whether the organization's directory called the user's address primary (SCIM `emails[].primary`, 1 or 0), so
// it is returned as sent. Null: nothing said (users of the import, the CLI, the console), read as primary.
function migration016(): Migration {
  return {
    async up(db: Kysely<any>) {
      await sql.raw('alter table users add column email_primary integer').execute(db);
    },
  };
}

// SAML federations: each trusted aggregate (its URL, the pinned certificate, the limits and release
// policy the operator set, and the state of its last fetch), and the service providers the last
// verified aggregate (or an MDQ answer) held, as parsed descriptors. The service serves them from
// here, so a restart while the federation is unreachable still knows them until their validUntil.
function migration019(dialect: Dialect): Migration {
  const pk = identityKey(dialect);
  return {
    async up(db: Kysely<any>) {
      const statements = [
        `create table if not exists saml_federations (
          id ${pk},
          url text not null unique,
          certificate text not null,
          max_validity_ms bigint not null,
          refresh_ms bigint not null,
          releases text not null,
          mdq_url text,
          state text not null,
          last_error text,
          name text,
          entities integer not null default 0,
          valid_until bigint,
          etag text,
          last_modified text,
          last_fetched_at bigint,
          last_attempt_at bigint,
          next_refresh_at bigint not null,
          lease_until bigint,
          created_at bigint not null)`,
        `create table if not exists saml_federation_entities (
          federation_id bigint not null references saml_federations(id) on delete cascade,
          entity_id text not null,
          client_id text not null,
          source text not null,
          descriptor text not null,
          categories text not null,
          valid_until bigint not null,
          fetched_at bigint not null,
          primary key (federation_id, entity_id))`,
        'create index if not exists saml_federation_entities_entity on saml_federation_entities(entity_id)',
        'create index if not exists saml_federation_entities_client on saml_federation_entities(client_id)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}
