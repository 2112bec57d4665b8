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

/**
 * A SAML upstream provider taken from a trusted federation's aggregate (`upstream add --federation`):
 * the federation it is bound to (its metadata is replaced from each newer aggregate; the federation
 * cannot be removed while providers are bound to it), and since when, with why, the aggregate no
 * longer gives a usable entry for it (null while it does).
 */
export function migration031(): Migration {
  return {
    async up(db: Kysely<unknown>) {
      await sql`alter table upstream_providers add column saml_federation_id bigint references saml_federations(id)`.execute(
        db,
      );
      await sql`alter table upstream_providers add column saml_federation_missing_since bigint`.execute(db);
      await sql`alter table upstream_providers add column saml_federation_missing_reason text`.execute(db);
      await sql`create index if not exists upstream_providers_federation on upstream_providers(saml_federation_id)`.execute(
        db,
      );
    },
  };
}
