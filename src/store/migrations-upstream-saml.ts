// The SAML side of upstream identity providers (docs/upstream.md): whether the provider vouches for
// the mail attribute it releases (so it counts as a verified address for linking by e-mail), and
// whether it must encrypt its assertions. Both off by default.
import { type Kysely, type Migration, sql } from 'kysely';

export function migration026(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_providers add column saml_email_verified integer not null default 0`.execute(db);
      await sql`alter table upstream_providers add column saml_require_encryption integer not null default 0`.execute(
        db,
      );
    },
  };
}
