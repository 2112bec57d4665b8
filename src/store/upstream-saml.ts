// The SAML side of the upstream provider registry: the providers an IdP entityID belongs to (a
// Response names its Issuer; the same IdP may serve several organizations).
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { selectProvider, type UpstreamProviderRow } from './upstream.ts';

type Q = Kysely<DB> | Transaction<DB>;

export function listSamlUpstreamRows(db: Q, entityId: string): Promise<UpstreamProviderRow[]> {
  return selectProvider(db).where('type', '=', 'saml').where('saml_entity_id', '=', entityId).orderBy('id').execute();
}

/** The SAML providers bound to a trusted federation (`upstream add --federation`), of every organization. */
export function listFederationUpstreamRows(db: Q, federationId: number): Promise<UpstreamProviderRow[]> {
  return selectProvider(db)
    .where('type', '=', 'saml')
    .where('saml_federation_id', '=', federationId)
    .orderBy('org_id')
    .orderBy('id')
    .execute();
}
