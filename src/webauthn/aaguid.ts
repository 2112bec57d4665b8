// AAGUID -> authenticator name, from the `aaguids` package (the FIDO metadata service names plus
// the community passkey-authenticator-aaguids list). Shipped as data: nothing is fetched at run time.
// A deployment may give its own list in the community format (AAGUID_DATA_FILE, with light and dark
// icons); its entries come first.
import { createRequire } from 'node:module';
import { MAX_LABEL, ZERO_AAGUID } from './formats.ts';
import type { AaguidData, AuthenticatorInfo } from '../authenticators.ts';

export type { AaguidData, AuthenticatorInfo } from '../authenticators.ts';

const names = createRequire(import.meta.url)('aaguids/aaguids.json') as Record<string, string>;

/** The authenticator's model name, or undefined when the AAGUID is unknown or all zero. */
export function authenticatorName(aaguid: string, data?: AaguidData): string | undefined {
  return authenticatorInfo(aaguid, data)?.name;
}

export function authenticatorInfo(aaguid: string, data?: AaguidData): AuthenticatorInfo | undefined {
  if (aaguid === ZERO_AAGUID) return undefined;
  const own = data?.get(aaguid.toLowerCase());
  if (own) return own;
  const name = names[aaguid.toLowerCase()];
  return typeof name === 'string' && name.trim() ? { name: name.trim().slice(0, MAX_LABEL) } : undefined;
}
