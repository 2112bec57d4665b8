// The formats of WebAuthn data the service accepts, wherever it comes from: a ceremony in the
// browser or a credential import.
import type { AuthenticatorTransport } from '@simplewebauthn/server';

/** The all-zero AAGUID: the authenticator supplied none. */
export const ZERO_AAGUID = '00000000-0000-0000-0000-000000000000';
export const AAGUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The longest passkey name, in characters. */
export const MAX_LABEL = 100;

const B64URL = /^[A-Za-z0-9_-]*$/;

/** The transports SimpleWebAuthn takes and a browser's registration may report. */
export const TRANSPORTS: ReadonlySet<string> = new Set<AuthenticatorTransport>([
  'ble',
  'hybrid',
  'internal',
  'nfc',
  'usb',
]);

/** What an imported credential may carry besides: the other values WebAuthn Level 3 defines. */
export const IMPORTED_TRANSPORTS: ReadonlySet<string> = new Set([...TRANSPORTS, 'cable', 'smart-card']);

export function isB64url(value: unknown, max = 65536): value is string {
  return typeof value === 'string' && value.length <= max && B64URL.test(value);
}
