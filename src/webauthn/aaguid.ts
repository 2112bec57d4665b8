// AAGUID -> authenticator name, from the `aaguids` package (the FIDO metadata service names plus
// the community passkey-authenticator-aaguids list). Shipped as data: nothing is fetched at run time.
import { createRequire } from 'node:module';
import { MAX_LABEL, ZERO_AAGUID } from './formats.ts';

const names = createRequire(import.meta.url)('aaguids/aaguids.json') as Record<string, string>;

/** The authenticator's model name, or undefined when the AAGUID is unknown or all zero. */
export function authenticatorName(aaguid: string): string | undefined {
  if (aaguid === ZERO_AAGUID) return undefined;
  const name = names[aaguid.toLowerCase()];
  return typeof name === 'string' && name.trim() ? name.trim().slice(0, MAX_LABEL) : undefined;
}
