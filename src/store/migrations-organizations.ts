// Migrations about organizations themselves.
import { sql, type Kysely, type Migration } from 'kysely';

/** organizations.disabled_at: set while the organization is disabled (none of its users signs in). */
export function migration034(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table organizations add column disabled_at bigint`.execute(db);
    },
  };
}
