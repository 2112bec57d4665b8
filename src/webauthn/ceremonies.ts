// WebAuthn for this service: the registration and authentication ceremonies (registration.ts,
// authentication.ts) over one challenge store (challenges.ts), bound to PUBLIC_URL.
import type {
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
} from '@simplewebauthn/server';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import type { PasskeyRow } from '../store/passkeys.ts';
import type { User } from '../store/directory.ts';
import { createCeremony } from './challenges.ts';
import { registrationOptions, verifyRegistration, type RequestOrigin } from './registration.ts';
import { authenticationOptions, verifyAuthentication, type AuthenticationOutcome } from './authentication.ts';
import type { Outcome } from './responses.ts';

export { CHALLENGE_TTL_MS } from './challenges.ts';
export type { Failure, Outcome } from './responses.ts';

export interface WebAuthn {
  rpId: string;
  origin: string;
  registrationOptions(
    user: User,
    existing: PasskeyRow[],
    binding: string,
  ): Promise<PublicKeyCredentialCreationOptionsJSON>;
  /** from.userAgent names the passkey when its authenticator is unknown ("Chrome on Linux") */
  verifyRegistration(
    user: User,
    response: unknown,
    binding: string,
    from?: RequestOrigin,
  ): Promise<Outcome<{ passkeyId: number; label: string }>>;
  /** requireUserVerification: the request asked for a class only a user-verified passkey reaches */
  authenticationOptions(
    binding: string,
    options?: { requireUserVerification?: boolean },
  ): Promise<PublicKeyCredentialRequestOptionsJSON>;
  verifyAuthentication(response: unknown, binding: string, requestId: string): Promise<AuthenticationOutcome>;
}

export function createWebAuthn(config: Config, store: Store, now: () => number = Date.now): WebAuthn {
  const ceremony = createCeremony(config, store, now);
  return {
    rpId: ceremony.rpId,
    origin: ceremony.origin,
    registrationOptions: (user, existing, binding) => registrationOptions(ceremony, user, existing, binding),
    verifyRegistration: (user, response, binding, from) => verifyRegistration(ceremony, user, response, binding, from),
    authenticationOptions: (binding, options) => authenticationOptions(ceremony, binding, options),
    verifyAuthentication: (response, binding, requestId) =>
      verifyAuthentication(ceremony, response, binding, requestId),
  };
}
