// Upstream identity providers (docs/upstream.md): each organization's OpenID Connect and SAML 2.0
// providers (the OIDC client secret and private key sealed under IDP_SECRET), the links between
// accounts and upstream identities (one per identity and provider, one per account and provider),
// and the upstream sign-ins under way (single use, expiring; housekeeping removes the old ones).
import { type Kysely, type Migration, sql } from 'kysely';

export function migration025(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        `create table if not exists upstream_providers (
          id text primary key,
          org_id bigint not null references organizations(id) on delete cascade,
          type text not null,
          name text not null,
          logo_url text,
          enabled integer not null default 1,
          link_by text not null default 'none',
          create_users integer not null default 0,
          namespace text,
          mappings text not null default '{}',
          oidc_issuer text,
          oidc_client_id text,
          oidc_client_secret text,
          oidc_scopes text,
          oidc_auth_method text,
          oidc_private_jwk text,
          oidc_public_jwk text,
          saml_entity_id text,
          saml_metadata text,
          saml_metadata_source text,
          created_at bigint not null,
          updated_at bigint not null)`,
        `create index if not exists upstream_providers_org on upstream_providers(org_id)`,
        `create table if not exists upstream_links (
          provider_id text not null references upstream_providers(id) on delete cascade,
          user_id bigint not null references users(id) on delete cascade,
          subject text not null,
          created_at bigint not null,
          last_used_at bigint,
          primary key (provider_id, subject),
          unique (provider_id, user_id))`,
        `create index if not exists upstream_links_user on upstream_links(user_id)`,
        `create table if not exists upstream_requests (
          id text primary key,
          provider_id text not null references upstream_providers(id) on delete cascade,
          interaction_uid text not null,
          nonce text,
          code_verifier text,
          created_at bigint not null,
          expires_at bigint not null,
          consumed_at bigint,
          assertion text,
          finished_at bigint)`,
        `create index if not exists upstream_requests_expires on upstream_requests(expires_at)`,
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}

/**
 * The browser an upstream sign-in was started in: the SHA-256 of the random value of a cookie set at
 * the start, which the callback and the ACS require before the request is consumed. Null on requests
 * started before (they are refused at the callback, and expire within minutes).
 */
/**
 * Which of an upstream's own authentication method references (RFC 8176 `amr`) the service repeats in its
 * sessions: space-separated, `pwd` unless the operator trusts the provider with more (`--trust-amr`).
 */
export function migration030(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_providers add column trust_amr text not null default 'pwd'`.execute(db);
    },
  };
}

/**
 * What an upstream request is for: `sign-in` (an interaction's, as before) or `link` (the signed-in
 * user links a provider from the account page): then the account (`user_id`) and the session
 * (`session_uid`) it was started from, which the return to the account page must still be.
 */
export function migration033(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_requests add column purpose text not null default 'sign-in'`.execute(db);
      await sql`alter table upstream_requests add column user_id bigint`.execute(db);
      await sql`alter table upstream_requests add column session_uid text`.execute(db);
    },
  };
}

export function migration029(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_requests add column browser_hash text`.execute(db);
    },
  };
}

/**
 * An upstream provider's logo, served by the service itself (`/upstream/<id>/logo`): its type, its bytes
 * (a PNG, WebP or SVG of at most 100 KiB, checked as the organizations' logos are) and a version of its
 * content (the ETag, and the query of the URL the sign-in page links). The `logo_url` of migration 025 is
 * kept as it is and no longer read or written: the pages never loaded it (their Content-Security-Policy
 * loads images of this service only), and the release before this one still writes it.
 */
export function migration032(dialect: 'sqlite' | 'postgres'): Migration {
  const blob = dialect === 'postgres' ? 'bytea' : 'blob';
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_providers add column logo_type text`.execute(db);
      await sql.raw(`alter table upstream_providers add column logo_data ${blob}`).execute(db);
      await sql`alter table upstream_providers add column logo_etag text`.execute(db);
    },
  };
}
