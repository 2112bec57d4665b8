// The passkey object of the administration interface (its field list and formats), the one
// representation the passkey API and the admin CLI both show.
import type { Kysely } from 'kysely';
import type { DB } from '../store/schema.ts';
import { listPasskeyAuthenticators, type PasskeyListRow } from '../store/passkeys.ts';
import { authenticatorName, type AaguidData } from './aaguid.ts';
import { iso } from '../time.ts';

export type PasskeyObject = {
  id: number;
  eppn: string;
  label: string;
  created_at: string;
  last_used_at: string | null;
  mfa_verified: boolean;
  aaguid: string;
};

export function passkeyObject(row: PasskeyListRow): PasskeyObject {
  return {
    id: row.id,
    eppn: row.eppn,
    label: row.label,
    created_at: iso(row.created_at),
    last_used_at: row.last_used_at === null ? null : iso(row.last_used_at),
    mfa_verified: row.mfa_verified === 1,
    aaguid: row.aaguid.toLowerCase(),
  };
}

/** What is known of a passkey's authenticator, shown beside the passkey object (an extension, never in the API's own list). */
export interface AuthenticatorDetails {
  /** the model's name (AAGUID lists, then the imported FIDO metadata); null when unknown */
  name: string | null;
  /** backup eligible: a synced passkey; false: bound to one device */
  synced: boolean;
  /** backup state at the last sign-in (or registration) */
  backed_up: boolean;
  user_verified: boolean;
  transports: string[];
  /** the registration's attestation verified to a root of the imported FIDO metadata */
  attested: boolean;
  /** the imported FIDO metadata's latest status for the model, null when not listed */
  metadata_status: string | null;
}

export async function passkeyDetails(
  db: Kysely<DB>,
  ids: number[],
  data?: AaguidData,
): Promise<Map<number, AuthenticatorDetails>> {
  const rows = await listPasskeyAuthenticators(db, ids);
  return new Map(
    rows.map((r) => [
      r.id,
      {
        name: authenticatorName(r.aaguid, data) ?? r.description ?? null,
        synced: r.backup_eligible === 1,
        backed_up: r.backup_state === 1,
        user_verified: r.mfa_verified === 1,
        transports: JSON.parse(r.transports) as string[],
        attested: r.attested === 1,
        metadata_status: r.status ?? null,
      },
    ]),
  );
}
