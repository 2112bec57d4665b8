// Service providers of a trusted federation that an operator blocked one by one (`saml sp disable
// <entityID>` for an SP that is not registered): kept apart from the federation's entities, which
// every refresh of the aggregate replaces, so a block outlives the refreshes until `saml sp enable`.
import { type Kysely, type Migration, sql } from 'kysely';

export function migration020(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql
        .raw(
          `create table if not exists saml_sp_blocks (
          entity_id text primary key,
          blocked_at bigint not null)`,
        )
        .execute(db);
    },
  };
}
