// Signing in with a passkey: options for the browser (no username: discoverable credentials), then
// verifying the assertion, its owner and its signature counter.
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialRequestOptionsJSON,
  VerifiedAuthenticationResponse,
} from '@simplewebauthn/server';
import { webauthnServer } from './library.ts';
import { bytes } from '../store/index.ts';
import { findPasskeyByCredentialId, recordPasskeyUse, type PasskeyRow } from '../store/passkeys.ts';
import { findUserById, type UserAccount } from '../store/directory.ts';
import { recordAudit } from '../audit/index.ts';
import { CEREMONY_TIMEOUT_MS, type Ceremony } from './challenges.ts';
import { asAuthentication, type Outcome } from './responses.ts';
import { authenticatorVerdict } from './mds.ts';

type AuthenticationInfo = VerifiedAuthenticationResponse['authenticationInfo'];
type Transports = string[];

export type AuthenticationOutcome = Outcome<{
  user: UserAccount;
  passkey: PasskeyRow;
  userVerified: boolean;
  /** the assertion's BE flag: the credential may be synced to other devices */
  backupEligible: boolean;
  /** the passkey's authenticator was attested at registration and is not reported compromised since */
  attested: boolean;
}>;

export async function authenticationOptions(
  ceremony: Ceremony,
  binding: string,
  { requireUserVerification = false } = {},
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  // No allowCredentials: the authenticator offers the user's discoverable passkeys.
  const { generateAuthenticationOptions } = await webauthnServer();
  const options = await generateAuthenticationOptions({
    rpID: ceremony.rpId,
    userVerification: requireUserVerification ? 'required' : 'preferred',
    timeout: CEREMONY_TIMEOUT_MS,
  });
  if (ceremony.hints.authentication.length) options.hints = [...ceremony.hints.authentication];
  await ceremony.challenges.remember(options.challenge, { purpose: 'authenticate', binding });
  return options;
}

/** The stored passkey and its owner; the user handle (always sent for discoverable credentials) must name the owner. */
async function loadCredential(
  ceremony: Ceremony,
  response: AuthenticationResponseJSON,
): Promise<Outcome<{ passkey: PasskeyRow; user: UserAccount }>> {
  const passkey = await findPasskeyByCredentialId(ceremony.store.db, Buffer.from(response.id, 'base64url'));
  if (!passkey) return { ok: false, reason: 'unknown_credential' };
  const user = await findUserById(ceremony.store.db, passkey.user_id);
  if (!user) return { ok: false, reason: 'unknown_credential' };
  const { userHandle } = response.response;
  if (!userHandle || Buffer.from(userHandle, 'base64url').toString('utf8') !== user.sub)
    return { ok: false, reason: 'verification' };
  return { ok: true, passkey, user };
}

/** The signature, checked against the challenge and the stored key; undefined when it does not verify. */
async function verifyAssertion(
  ceremony: Ceremony,
  response: AuthenticationResponseJSON,
  expectedChallenge: string,
  passkey: PasskeyRow,
): Promise<AuthenticationInfo | undefined> {
  const { verifyAuthenticationResponse } = await webauthnServer();
  try {
    const result = await verifyAuthenticationResponse({
      response,
      expectedChallenge,
      expectedOrigin: ceremony.origins,
      expectedRPID: ceremony.rpId,
      // The counter is checked below, after the signature, so only a genuine assertion can
      // raise a regression alarm.
      credential: {
        id: response.id,
        publicKey: new Uint8Array(bytes(passkey.public_key)),
        counter: 0,
        transports: JSON.parse(passkey.transports) as Transports,
      },
      requireUserVerification: false,
    });
    return result.verified ? result.authenticationInfo : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records the use, refusing a counter that did not go up. The write is conditional on the counter
 * still being below the presented one: a parallel assertion with the same (or a higher) counter
 * that got there first makes this one a regression.
 */
async function recordUse(
  ceremony: Ceremony,
  {
    passkey,
    user,
    info,
    requestId,
  }: { passkey: PasskeyRow; user: UserAccount; info: AuthenticationInfo; requestId: string },
): Promise<boolean> {
  const stored = Number(passkey.sign_count);
  const now = ceremony.now;
  const record = (db: Parameters<typeof recordPasskeyUse>[0]) =>
    recordPasskeyUse(
      db,
      passkey.id,
      info.newCounter,
      info.credentialBackedUp,
      now(),
      info.credentialDeviceType === 'multiDevice',
    );
  // A passkey's first use is audited (and so becomes an event) with the use itself.
  const firstUse = (db: Parameters<typeof recordAudit>[0]) =>
    recordAudit(db, {
      action: 'passkey.first_use',
      actor: { type: 'user', id: user.eppn, requestId },
      at: now(),
      orgId: passkey.org_id,
      eppn: user.eppn,
      passkeyIds: [passkey.id],
    });
  const fresh =
    !((info.newCounter > 0 || stored > 0) && info.newCounter <= stored) &&
    (passkey.last_used_at === null
      ? await ceremony.store.db.transaction().execute(async (trx) => (await record(trx)) && (await firstUse(trx), true))
      : await record(ceremony.store.db));
  if (fresh) return true;
  // A cloned authenticator is the usual cause: refuse, and leave a trace for the organization.
  await recordAudit(ceremony.store.db, {
    action: 'passkey.counter_regression',
    actor: { type: 'user', id: user.eppn, requestId },
    at: now(),
    orgId: passkey.org_id,
    eppn: user.eppn,
    passkeyIds: [passkey.id],
    details: { stored_counter: stored, presented_counter: info.newCounter },
  });
  return false;
}

export async function verifyAuthentication(
  ceremony: Ceremony,
  input: unknown,
  binding: string,
  requestId: string,
): Promise<AuthenticationOutcome> {
  const response = asAuthentication(input);
  if (!response) return { ok: false, reason: 'malformed' };
  const claimed = await ceremony.challenges.claim(response.response.clientDataJSON, 'authenticate', binding);
  if (!claimed) return { ok: false, reason: 'challenge' };
  const credential = await loadCredential(ceremony, response);
  if (!credential.ok) return credential;
  const { passkey, user } = credential;
  const info = await verifyAssertion(ceremony, response, claimed.challenge, passkey);
  if (!info) return { ok: false, reason: 'verification' };
  if (!(await recordUse(ceremony, { passkey, user, info, requestId })))
    return { ok: false, reason: 'counter_regression' };
  const attested = passkey.attested === 1 && !(await authenticatorVerdict(ceremony.store.db, passkey.aaguid)).refused;
  return {
    ok: true,
    user,
    passkey,
    userVerified: info.userVerified,
    backupEligible: info.credentialDeviceType === 'multiDevice',
    attested,
  };
}
