// SAML service providers, each paired with a row in clients (its protocol 'saml'), and the
// identity provider's SAML keys (private parts sealed under IDP_SECRET, as signing_keys are).
import { type Kysely, type Migration, sql } from 'kysely';

export function migration017(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        // 'oidc' | 'saml': a 'saml' client is a service provider's, changed through it only
        `alter table clients add column protocol text not null default 'oidc'`,
        `create table if not exists service_providers (
          entity_id text primary key,
          client_id text not null unique,
          name text not null,
          groups text not null,
          first_party integer not null default 0,
          name_id text not null,
          encrypt text not null,
          sign text not null,
          allow_unsolicited integer not null default 0,
          disabled_at bigint,
          federation_id text,
          metadata text not null,
          descriptor text not null,
          created_at bigint not null,
          updated_at bigint not null)`,
        `create table if not exists saml_keys (
          kid text primary key,
          key_use text not null,
          private_key text not null,
          certificate text not null,
          created_at bigint not null,
          activates_at bigint not null,
          retired_at bigint)`,
        `create index if not exists saml_keys_use on saml_keys(key_use, activates_at)`,
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

// A trusted federation's policy that every request of its service providers be signed
// (`saml federation add --require-signed-requests`), whatever an SP's own metadata says.
export function migration021(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql
        .raw('alter table saml_federations add column require_signed_requests integer not null default 0')
        .execute(db);
    },
  };
}
