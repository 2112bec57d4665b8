// What the browser posts back from a ceremony, checked for shape before any of it is believed,
// and what a ceremony can answer.
import type {
  AuthenticationResponseJSON,
  AuthenticatorTransport,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { isB64url, TRANSPORTS } from './formats.ts';

export type Failure =
  | 'malformed'
  | 'challenge' // unknown, expired, already used, or issued to someone else
  | 'unknown_credential'
  | 'verification'
  | 'counter_regression'
  | 'already_registered'
  // the organization's authenticator policy refuses the new credential (src/webauthn/policy.ts)
  | 'policy_authenticator'
  | 'policy_device_bound'
  | 'policy_user_verification'
  // the imported FIDO metadata says the authenticator must not be trusted (src/webauthn/mds.ts)
  | 'authenticator_compromised'
  // the recovery link was used, revoked or expired while the passkey was being made
  | 'link_used';

export type Outcome<T> = ({ ok: true } & T) | { ok: false; reason: Failure };

function parseJson(response: unknown): unknown {
  if (typeof response !== 'string') return response;
  if (response.length > 200_000) return undefined;
  try {
    return JSON.parse(response);
  } catch {
    return undefined;
  }
}

export function asAuthentication(input: unknown): AuthenticationResponseJSON | undefined {
  const r = parseJson(input) as AuthenticationResponseJSON | undefined;
  if (typeof r !== 'object' || r === null || r.type !== 'public-key') return undefined;
  if (!isB64url(r.id, 1400) || r.id.length === 0 || r.rawId !== r.id) return undefined;
  const p = r.response;
  if (typeof p !== 'object' || p === null) return undefined;
  if (!isB64url(p.clientDataJSON) || !isB64url(p.authenticatorData) || !isB64url(p.signature)) return undefined;
  if (p.userHandle !== undefined && p.userHandle !== null && !isB64url(p.userHandle, 200)) return undefined;
  return {
    id: r.id,
    rawId: r.rawId,
    type: 'public-key',
    clientExtensionResults: {},
    response: {
      clientDataJSON: p.clientDataJSON,
      authenticatorData: p.authenticatorData,
      signature: p.signature,
      ...(p.userHandle ? { userHandle: p.userHandle } : {}),
    },
  };
}

export function asRegistration(input: unknown): RegistrationResponseJSON | undefined {
  const r = parseJson(input) as RegistrationResponseJSON | undefined;
  if (typeof r !== 'object' || r === null || r.type !== 'public-key') return undefined;
  if (!isB64url(r.id, 1400) || r.id.length === 0 || r.rawId !== r.id) return undefined;
  const p = r.response;
  if (typeof p !== 'object' || p === null || !isB64url(p.clientDataJSON) || !isB64url(p.attestationObject))
    return undefined;
  const transports = Array.isArray(p.transports)
    ? p.transports.filter((t): t is AuthenticatorTransport => typeof t === 'string' && TRANSPORTS.has(t))
    : [];
  return {
    id: r.id,
    rawId: r.rawId,
    type: 'public-key',
    clientExtensionResults: {},
    response: { clientDataJSON: p.clientDataJSON, attestationObject: p.attestationObject, transports },
  };
}
