// The keys kept across a replacement of the master secret (src/crypto.ts, KEPT_KEYS): the key of
// client-secret hashes and the key of SAML pairwise ids, sealed under the current secret.
import { type Kysely, type Migration, sql } from 'kysely';

export function migration028(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql
        .raw(
          `create table if not exists kept_keys (
            name text primary key,
            sealed text not null,
            created_at bigint not null)`,
        )
        .execute(db);
    },
  };
}
