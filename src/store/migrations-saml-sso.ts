// SAML single sign-on: the AuthnRequest (and LogoutRequest) IDs already accepted, each SP's
// persistent NameID of each user, and which SPs of a session received an assertion (for single
// logout).
import { type Kysely, type Migration, sql } from 'kysely';

export function migration018(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const statements = [
        // sha256(entityID, request ID): the same ID from two SPs is two requests
        'create table if not exists saml_request_ids (id text primary key, expires_at bigint not null)',
        'create index if not exists saml_request_ids_expires on saml_request_ids(expires_at)',
        `create table if not exists saml_persistent_ids (
          user_id bigint not null references users(id) on delete cascade,
          entity_id text not null,
          name_id text not null unique,
          created_at bigint not null,
          primary key (user_id, entity_id))`,
        // the oidc-provider session (its uid) and each SP that received an assertion in it
        `create table if not exists saml_session_sps (
          session_uid text not null,
          entity_id text not null,
          user_id bigint not null references users(id) on delete cascade,
          name_id text not null,
          name_id_format text not null,
          session_index text not null,
          created_at bigint not null,
          expires_at bigint not null,
          primary key (session_uid, entity_id))`,
        'create index if not exists saml_session_sps_expires on saml_session_sps(expires_at)',
      ];
      for (const statement of statements) await sql.raw(statement).execute(db);
    },
  };
}
