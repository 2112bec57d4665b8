// WebAuthn registration and authentication ceremonies. RP ID and origin derive from PUBLIC_URL.
// Challenges are single-use, expire, live server-side and are bound to what asked for them
// (an interaction or a signed-in session, in one browser).
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import { bytes, isUniqueViolation } from '../store/index.ts';
import { insertChallenge, takeChallenge } from '../store/challenges.ts';
import { findPasskeyByCredentialId, insertPasskeys, recordPasskeyUse, type PasskeyRow } from '../store/passkeys.ts';
import { findUserById, type User } from '../store/directory.ts';
import { insertAuditEvent } from '../store/audit.ts';
import { ZERO_AAGUID } from './import.ts';
import { defaultPasskeyLabel } from './passkey-names.ts';

export const CHALLENGE_TTL_MS = 10 * 60 * 1000;
const CEREMONY_TIMEOUT_MS = 5 * 60 * 1000;
const TRANSPORTS = new Set(['usb', 'nfc', 'ble', 'internal', 'hybrid']);
const B64URL = /^[A-Za-z0-9_-]*$/;

export type Failure =
  | 'malformed'
  | 'challenge' // unknown, expired, already used, or issued to someone else
  | 'unknown_credential'
  | 'verification'
  | 'counter_regression'
  | 'already_registered';

export type Outcome<T> = ({ ok: true } & T) | { ok: false; reason: Failure };

interface ChallengeRecord {
  purpose: 'register' | 'authenticate';
  binding: string;
  userId?: number;
}

export interface WebAuthn {
  rpId: string;
  origin: string;
  registrationOptions(
    user: User,
    existing: PasskeyRow[],
    binding: string,
  ): Promise<PublicKeyCredentialCreationOptionsJSON>;
  /** userAgent names the passkey when its authenticator is unknown ("Chrome on Linux") */
  verifyRegistration(
    user: User,
    response: unknown,
    binding: string,
    userAgent?: string,
  ): Promise<Outcome<{ passkeyId: number; label: string }>>;
  authenticationOptions(binding: string): Promise<PublicKeyCredentialRequestOptionsJSON>;
  verifyAuthentication(
    response: unknown,
    binding: string,
    requestId: string,
  ): Promise<Outcome<{ user: User; passkey: PasskeyRow; userVerified: boolean }>>;
}

function isB64url(value: unknown, max = 65536): value is string {
  return typeof value === 'string' && value.length <= max && B64URL.test(value);
}

/** The challenge the browser signed over, read from clientDataJSON (verified again later). */
function challengeOf(clientDataJSON: string): string | undefined {
  try {
    const data = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    return isB64url(data.challenge, 200) && data.challenge.length >= 16 ? data.challenge : undefined;
  } catch {
    return undefined;
  }
}

function parseJson(response: unknown): unknown {
  if (typeof response !== 'string') return response;
  if (response.length > 200_000) return undefined;
  try {
    return JSON.parse(response);
  } catch {
    return undefined;
  }
}

function asAuthentication(input: unknown): AuthenticationResponseJSON | undefined {
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

function asRegistration(input: unknown): RegistrationResponseJSON | undefined {
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

export function createWebAuthn(config: Config, store: Store, now: () => number = Date.now): WebAuthn {
  const rpId = new URL(config.publicUrl).hostname;
  const origin = config.publicUrl;

  const remember = (challenge: string, record: ChallengeRecord) =>
    insertChallenge(store.db, challenge, JSON.stringify(record), now() + CHALLENGE_TTL_MS);

  /** Consumes the challenge named in clientDataJSON; it must have been issued for this purpose and binding. */
  const claim = async (
    clientDataJSON: string,
    purpose: ChallengeRecord['purpose'],
    binding: string,
  ): Promise<{ challenge: string; record: ChallengeRecord } | undefined> => {
    const challenge = challengeOf(clientDataJSON);
    if (!challenge) return undefined;
    const stored = await takeChallenge(store.db, challenge, now());
    if (!stored) return undefined;
    const record = JSON.parse(stored) as ChallengeRecord;
    if (record.purpose !== purpose || record.binding !== binding) return undefined;
    return { challenge, record };
  };

  return {
    rpId,
    origin,

    async registrationOptions(user, existing, binding) {
      const options = await generateRegistrationOptions({
        rpName: rpId,
        rpID: rpId,
        userName: user.eppn,
        userDisplayName: user.name,
        // The user handle is the opaque subject: it names nobody outside this service.
        userID: new TextEncoder().encode(user.sub),
        attestationType: 'none',
        timeout: CEREMONY_TIMEOUT_MS,
        excludeCredentials: existing.map((p) => ({
          id: bytes(p.credential_id).toString('base64url'),
          transports: JSON.parse(p.transports),
        })),
        // Discoverable credentials: sign-in starts without a username.
        authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
        supportedAlgorithmIDs: [-7, -8, -257],
      });
      await remember(options.challenge, { purpose: 'register', binding, userId: user.id });
      return options;
    },

    async verifyRegistration(user, input, binding, userAgent) {
      const response = asRegistration(input);
      if (!response) return { ok: false, reason: 'malformed' };
      const claimed = await claim(response.response.clientDataJSON, 'register', binding);
      if (!claimed || claimed.record.userId !== user.id) return { ok: false, reason: 'challenge' };
      let info;
      try {
        const result = await verifyRegistrationResponse({
          response,
          expectedChallenge: claimed.challenge,
          expectedOrigin: origin,
          expectedRPID: rpId,
          requireUserVerification: false,
        });
        if (!result.verified) return { ok: false, reason: 'verification' };
        info = result.registrationInfo;
      } catch {
        return { ok: false, reason: 'verification' };
      }
      const aaguid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(info.aaguid)
        ? info.aaguid
        : ZERO_AAGUID;
      const finalLabel = defaultPasskeyLabel(aaguid, userAgent);
      const at = now();
      try {
        const passkeyId = await store.db.transaction().execute(async (trx) => {
          const [id] = await insertPasskeys(trx, [
            {
              user_id: user.id,
              org_id: user.org_id,
              credential_id: Buffer.from(info.credential.id, 'base64url'),
              public_key: Buffer.from(info.credential.publicKey),
              sign_count: info.credential.counter,
              transports: JSON.stringify(response.response.transports ?? []),
              label: finalLabel,
              aaguid,
              backup_eligible: info.credentialDeviceType === 'multiDevice' ? 1 : 0,
              backup_state: info.credentialBackedUp ? 1 : 0,
              mfa_verified: info.userVerified ? 1 : 0,
              created_at: at,
              last_used_at: null,
            },
          ]);
          await insertAuditEvent(trx, {
            at,
            kind: 'passkey.register',
            orgId: user.org_id,
            eppn: user.eppn,
            passkeyIds: [id!],
            details: { aaguid },
          });
          return id!;
        });
        return { ok: true, passkeyId, label: finalLabel };
      } catch (err) {
        if (isUniqueViolation(err)) return { ok: false, reason: 'already_registered' };
        throw err;
      }
    },

    async authenticationOptions(binding) {
      // No allowCredentials: the authenticator offers the user's discoverable passkeys.
      const options = await generateAuthenticationOptions({
        rpID: rpId,
        userVerification: 'preferred',
        timeout: CEREMONY_TIMEOUT_MS,
      });
      await remember(options.challenge, { purpose: 'authenticate', binding });
      return options;
    },

    async verifyAuthentication(input, binding, requestId) {
      const response = asAuthentication(input);
      if (!response) return { ok: false, reason: 'malformed' };
      const claimed = await claim(response.response.clientDataJSON, 'authenticate', binding);
      if (!claimed) return { ok: false, reason: 'challenge' };
      const passkey = await findPasskeyByCredentialId(store.db, Buffer.from(response.id, 'base64url'));
      if (!passkey) return { ok: false, reason: 'unknown_credential' };
      const user = await findUserById(store.db, passkey.user_id);
      if (!user) return { ok: false, reason: 'unknown_credential' };
      // Discoverable credentials always return the user handle; it must name the credential's owner.
      if (
        !response.response.userHandle ||
        Buffer.from(response.response.userHandle, 'base64url').toString('utf8') !== user.sub
      ) {
        return { ok: false, reason: 'verification' };
      }
      let info;
      try {
        const result = await verifyAuthenticationResponse({
          response,
          expectedChallenge: claimed.challenge,
          expectedOrigin: origin,
          expectedRPID: rpId,
          // The counter is checked below, after the signature, so only a genuine assertion can
          // raise a regression alarm.
          credential: {
            id: response.id,
            publicKey: new Uint8Array(bytes(passkey.public_key)),
            counter: 0,
            transports: JSON.parse(passkey.transports),
          },
          requireUserVerification: false,
        });
        if (!result.verified) return { ok: false, reason: 'verification' };
        info = result.authenticationInfo;
      } catch {
        return { ok: false, reason: 'verification' };
      }
      const stored = Number(passkey.sign_count);
      const regression = async () => {
        // A cloned authenticator is the usual cause: refuse, and leave a trace for the organization.
        await insertAuditEvent(store.db, {
          at: now(),
          kind: 'passkey.counter_regression',
          orgId: passkey.org_id,
          eppn: user.eppn,
          passkeyIds: [passkey.id],
          requestId,
          details: { stored_counter: stored, presented_counter: info.newCounter },
        });
        return { ok: false, reason: 'counter_regression' } as const;
      };
      if ((info.newCounter > 0 || stored > 0) && info.newCounter <= stored) return regression();
      // The write is conditional on the counter still being below the presented one: a parallel
      // assertion with the same (or a higher) counter that got there first makes this one a regression.
      if (!(await recordPasskeyUse(store.db, passkey.id, info.newCounter, info.credentialBackedUp, now())))
        return regression();
      return { ok: true, user, passkey, userVerified: info.userVerified };
    },
  };
}
