// A verified SAML request waiting on the sign-in: carried through the authorization request as its
// `state`, sealed (AES-256-GCM under a key derived from the service's secret), so it comes back to
// /saml2/idp/continue exactly as it was verified and no one can make one up.
import { open, seal } from '../crypto.ts';
import type { Binding } from './requests.ts';

export interface Pending {
  /** the SP's entityID */
  sp: string;
  /** the AuthnRequest's ID; null for IdP-initiated SSO */
  id: string | null;
  /** the verified AssertionConsumerService URL */
  acs: string;
  relayState?: string;
  force: boolean;
  passive: boolean;
  /** RequestedAuthnContext classes (exact comparison) */
  acrs: string[];
  /** the NameIDPolicy Format asked for */
  nameIdFormat: string | null;
  binding: Binding | 'unsolicited';
  /** when the request was verified (ms) */
  at: number;
}

/** A sign-in may take a while (a new passkey, a forgotten password), but not forever. */
export const PENDING_TTL_MS = 30 * 60_000;
const AAD = 'saml-pending';

export function sealPending(key: Buffer, pending: Pending): string {
  return seal(key, Buffer.from(JSON.stringify(pending)), AAD);
}

export function openPending(key: Buffer, box: unknown, now: number): Pending | undefined {
  if (typeof box !== 'string' || box.length > 8000) return undefined;
  const plain = open(key, box, AAD);
  if (!plain) return undefined;
  try {
    const pending = JSON.parse(plain.toString('utf8')) as Pending;
    if (typeof pending.at !== 'number' || now - pending.at > PENDING_TTL_MS) return undefined;
    return pending;
  } catch {
    return undefined;
  }
}
