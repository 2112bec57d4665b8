// The passkey object of the administration interface (its field list and formats), the one
// representation the passkey API and the admin CLI both show.
import type { PasskeyListRow } from '../store/passkeys.ts';
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
