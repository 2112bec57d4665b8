// The client id of a service provider's paired client: derived from its entityID, so every
// instance, and a federation's SP met for the first time, arrive at the same one.
import { createHash } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** RFC 4648 base32 (lower case, no padding). */
function base32(bytes: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** `saml-` and the first 26 characters of base32(SHA-256(entityID)): 130 bits, lower case. */
export function serviceProviderClientId(entityId: string): string {
  return `saml-${base32(createHash('sha256').update(entityId, 'utf8').digest()).slice(0, 26)}`;
}
