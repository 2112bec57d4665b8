// Registering a passkey: options for the browser, then verifying its attestation and storing the
// credential with its audit record in one transaction.
import type {
  PublicKeyCredentialCreationOptionsJSON,
  RegistrationResponseJSON,
  VerifiedRegistrationResponse,
} from '@simplewebauthn/server';
import { webauthnServer } from './library.ts';
import { bytes, isUniqueViolation } from '../store/index.ts';
import { insertPasskeys, type PasskeyRow } from '../store/passkeys.ts';
import type { User } from '../store/directory.ts';
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import { recordAudit } from '../audit/index.ts';
import { AAGUID, ZERO_AAGUID } from './formats.ts';
import { defaultPasskeyLabel } from './passkey-names.ts';
import { CEREMONY_TIMEOUT_MS, type Ceremony } from './challenges.ts';
import { asRegistration, type Outcome } from './responses.ts';
import { loadPolicy, policyRefusal, type PasskeyPolicy } from './policy.ts';
import { attestedAgainstMetadata, authenticatorVerdict, ensureMetadataStatements } from './mds.ts';

type RegistrationInfo = NonNullable<VerifiedRegistrationResponse['registrationInfo']>;

export async function registrationOptions(
  ceremony: Ceremony,
  user: User,
  existing: PasskeyRow[],
  binding: string,
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const { generateRegistrationOptions } = await webauthnServer();
  const policy = await loadPolicy(ceremony.store.db, user.org_id);
  const options = await generateRegistrationOptions({
    rpName: ceremony.rpId,
    rpID: ceremony.rpId,
    userName: user.eppn,
    userDisplayName: user.display_name ?? user.name,
    // The user handle is the opaque subject: it names nobody outside this service.
    userID: new TextEncoder().encode(user.sub),
    attestationType: policy.attestation,
    timeout: CEREMONY_TIMEOUT_MS,
    excludeCredentials: existing.map((p) => ({
      id: bytes(p.credential_id).toString('base64url'),
      transports: JSON.parse(p.transports) as string[],
    })),
    // Discoverable credentials: sign-in starts without a username.
    authenticatorSelection: { residentKey: 'required', userVerification: policy.requireUv ? 'required' : 'preferred' },
    supportedAlgorithmIDs: [-7, -8, -257],
  });
  // WebAuthn Level 3 hints, as configured: which kind of authenticator the browser offers first.
  if (ceremony.hints.registration.length) options.hints = [...ceremony.hints.registration];
  await ceremony.challenges.remember(options.challenge, { purpose: 'register', binding, userId: user.id });
  return options;
}

/** The attestation, checked against the challenge; undefined when it does not verify. */
async function verifyAttestation(
  ceremony: Ceremony,
  response: RegistrationResponseJSON,
  expectedChallenge: string,
  policy: PasskeyPolicy,
): Promise<RegistrationInfo | undefined> {
  const { verifyRegistrationResponse } = await webauthnServer();
  try {
    const result = await verifyRegistrationResponse({
      response,
      expectedChallenge,
      expectedOrigin: ceremony.origins,
      expectedRPID: ceremony.rpId,
      requireUserVerification: policy.requireUv,
    });
    return result.verified ? result.registrationInfo : undefined;
  } catch {
    return undefined;
  }
}

/** The request a ceremony arrived in: the browser (names the passkey) and, for the audit trail, id and address. */
export interface RequestOrigin {
  userAgent?: string;
  requestId?: string;
  ip?: string;
  /**
   * Runs in the passkey's transaction before it is stored (a recovery link is used up there): false
   * stores nothing, and the registration fails with `link_used`.
   */
  within?: (trx: Transaction<DB>) => Promise<boolean>;
}

class Withdrawn extends Error {}

/** Stores the new passkey and its audit record together; returns its id. */
function storePasskey(
  ceremony: Ceremony,
  user: User,
  response: RegistrationResponseJSON,
  info: RegistrationInfo,
  { aaguid, label, from, attested }: { aaguid: string; label: string; from: RequestOrigin; attested: boolean },
): Promise<number> {
  const at = ceremony.now();
  return ceremony.store.db.transaction().execute(async (trx) => {
    if (from.within && !(await from.within(trx))) throw new Withdrawn();
    const [id] = await insertPasskeys(trx, [
      {
        user_id: user.id,
        org_id: user.org_id,
        credential_id: Buffer.from(info.credential.id, 'base64url'),
        public_key: Buffer.from(info.credential.publicKey),
        sign_count: info.credential.counter,
        transports: JSON.stringify(response.response.transports ?? []),
        label,
        aaguid,
        backup_eligible: info.credentialDeviceType === 'multiDevice' ? 1 : 0,
        backup_state: info.credentialBackedUp ? 1 : 0,
        mfa_verified: info.userVerified ? 1 : 0,
        created_at: at,
        last_used_at: null,
        attested: attested ? 1 : 0,
      },
    ]);
    await recordAudit(trx, {
      action: 'passkey.register',
      actor: { type: 'user', id: user.eppn, requestId: from.requestId, ip: from.ip },
      at,
      orgId: user.org_id,
      eppn: user.eppn,
      passkeyIds: [id!],
      details: {
        aaguid,
        user_verified: info.userVerified,
        backup_eligible: info.credentialDeviceType === 'multiDevice',
        attestation: info.fmt,
        attested,
      },
    });
    return id!;
  });
}

/** from.userAgent names the passkey when its authenticator is unknown ("Chrome on Linux"). */
export async function verifyRegistration(
  ceremony: Ceremony,
  user: User,
  input: unknown,
  binding: string,
  from: RequestOrigin = {},
): Promise<Outcome<{ passkeyId: number; label: string }>> {
  const response = asRegistration(input);
  if (!response) return { ok: false, reason: 'malformed' };
  const claimed = await ceremony.challenges.claim(response.response.clientDataJSON, 'register', binding);
  if (!claimed || claimed.record.userId !== user.id) return { ok: false, reason: 'challenge' };
  const policy = await loadPolicy(ceremony.store.db, user.org_id);
  if (policy.attestation !== 'none') await ensureMetadataStatements(ceremony.store.db);
  const info = await verifyAttestation(ceremony, response, claimed.challenge, policy);
  if (!info) return { ok: false, reason: 'verification' };
  const aaguid = AAGUID.test(info.aaguid) ? info.aaguid : ZERO_AAGUID;
  const backupEligible = info.credentialDeviceType === 'multiDevice';
  const refused = policyRefusal(policy, { aaguid, backupEligible, userVerified: info.userVerified });
  if (refused) return { ok: false, reason: refused };
  const verdict = await authenticatorVerdict(ceremony.store.db, aaguid);
  if (verdict.refused) return { ok: false, reason: 'authenticator_compromised' };
  // Attested: the library checked the attestation's certificate chain against the roots of the
  // authenticator's imported metadata statement (src/webauthn/mds.ts).
  const attested = verdict.known && (await attestedAgainstMetadata(info));
  const label = defaultPasskeyLabel(aaguid, from.userAgent, ceremony.aaguidData);
  try {
    const passkeyId = await storePasskey(ceremony, user, response, info, { aaguid, label, from, attested });
    return { ok: true, passkeyId, label };
  } catch (err) {
    if (isUniqueViolation(err)) return { ok: false, reason: 'already_registered' };
    if (err instanceof Withdrawn) return { ok: false, reason: 'link_used' };
    throw err;
  }
}
