// An organization's authenticator policy: which authenticators may register passkeys (AAGUID allow
// and deny lists), whether user verification and device-bound keys are required, which attestation
// the browser is asked for, and the sign-in choices that go with passkeys (the upgrade offered
// after a password sign-in, passwords refused for users with a passkey). Stored as JSON on the
// organization; an organization without one has the defaults below.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import type { Store } from '../store/index.ts';
import { findOrganization, updateOrganizationPolicy } from '../store/directory.ts';
import { recordAudit, SYSTEM, type Change } from '../audit/index.ts';
import { badRequest, notFound } from '../errors.ts';
import { AAGUID, ZERO_AAGUID } from './formats.ts';

type Q = Kysely<DB> | Transaction<DB>;

export const ATTESTATION_CONVEYANCE = ['none', 'direct', 'enterprise'] as const;
export type AttestationConveyance = (typeof ATTESTATION_CONVEYANCE)[number];

export interface PasskeyPolicy {
  /** when not empty, only these authenticators may register */
  allowAaguids: string[];
  denyAaguids: string[];
  requireUv: boolean;
  /** refuse backup-eligible (synced) credentials */
  requireDeviceBound: boolean;
  attestation: AttestationConveyance;
  /** after a password sign-in, offer a passkey to a user without one */
  passkeyUpgrade: boolean;
  /** a user with a passkey cannot sign in with a password */
  passkeyOnly: boolean;
  /** what becomes of a user's passkeys when provisioning (SCIM) deactivates them */
  onDeactivate: 'keep' | 'delete';
  /** 'email': a user who lost their passkey may have a recovery link sent to their address (docs/email.md) */
  selfRecovery: 'email' | 'off';
}

export const DEFAULT_POLICY: PasskeyPolicy = {
  allowAaguids: [],
  denyAaguids: [],
  requireUv: false,
  requireDeviceBound: false,
  attestation: 'none',
  passkeyUpgrade: true,
  passkeyOnly: false,
  onDeactivate: 'keep',
  selfRecovery: 'off',
};

interface StoredPolicy {
  allow_aaguids?: string[];
  deny_aaguids?: string[];
  require_uv?: boolean;
  require_device_bound?: boolean;
  attestation?: AttestationConveyance;
  passkey_upgrade?: boolean;
  passkey_only?: boolean;
  on_deactivate?: 'keep' | 'delete';
  self_recovery?: 'email' | 'off';
}

export function parsePolicy(stored: string | null | undefined): PasskeyPolicy {
  if (!stored) return { ...DEFAULT_POLICY };
  const p = JSON.parse(stored) as StoredPolicy;
  return {
    allowAaguids: p.allow_aaguids ?? [],
    denyAaguids: p.deny_aaguids ?? [],
    requireUv: p.require_uv === true,
    requireDeviceBound: p.require_device_bound === true,
    attestation: p.attestation ?? 'none',
    passkeyUpgrade: p.passkey_upgrade ?? DEFAULT_POLICY.passkeyUpgrade,
    passkeyOnly: p.passkey_only === true,
    onDeactivate: p.on_deactivate === 'delete' ? 'delete' : 'keep',
    selfRecovery: p.self_recovery === 'email' ? 'email' : 'off',
  };
}

/** The policy as stored and as `org policy --json` prints it. */
export function policyJson(policy: PasskeyPolicy): Required<StoredPolicy> {
  return {
    allow_aaguids: policy.allowAaguids,
    deny_aaguids: policy.denyAaguids,
    require_uv: policy.requireUv,
    require_device_bound: policy.requireDeviceBound,
    attestation: policy.attestation,
    passkey_upgrade: policy.passkeyUpgrade,
    passkey_only: policy.passkeyOnly,
    on_deactivate: policy.onDeactivate,
    self_recovery: policy.selfRecovery,
  };
}

export async function loadPolicy(db: Q, orgId: number): Promise<PasskeyPolicy> {
  return parsePolicy((await findOrganization(db, orgId))?.passkey_policy);
}

/** An AAGUID as given on the command line, lower case; a clear error otherwise. */
export function aaguidOption(value: string): string {
  const aaguid = value.trim().toLowerCase();
  if (!AAGUID.test(aaguid)) throw badRequest(`${value} is not an AAGUID (8-4-4-4-12 hexadecimal digits)`);
  return aaguid;
}

export function attestationOption(value: string): AttestationConveyance {
  const found = ATTESTATION_CONVEYANCE.find((a) => a === value);
  if (!found) throw badRequest(`--attestation must be one of ${ATTESTATION_CONVEYANCE.join(', ')}`);
  return found;
}

/** Replaces the organization's policy, audited in the same transaction. */
export async function setPasskeyPolicy(
  store: Store,
  orgId: number,
  policy: PasskeyPolicy,
  { actor = SYSTEM, now = Date.now() }: Change = {},
): Promise<PasskeyPolicy> {
  const overlap = policy.allowAaguids.filter((a) => policy.denyAaguids.includes(a));
  if (overlap.length) throw badRequest(`${overlap[0]} cannot be both allowed and denied`);
  return store.db.transaction().execute(async (trx) => {
    if (!(await findOrganization(trx, orgId))) throw notFound(`organization ${orgId} not found`);
    const stored = policyJson(policy);
    await updateOrganizationPolicy(trx, orgId, JSON.stringify(stored));
    await recordAudit(trx, { action: 'org.policy', actor, at: now, subject: String(orgId), orgId, details: stored });
    return policy;
  });
}

/** What a new credential showed at registration. */
export interface NewCredential {
  aaguid: string;
  backupEligible: boolean;
  userVerified: boolean;
}

export type PolicyRefusal = 'policy_authenticator' | 'policy_device_bound' | 'policy_user_verification';

/** Why the policy refuses this credential, or undefined when it may register. */
export function policyRefusal(policy: PasskeyPolicy, credential: NewCredential): PolicyRefusal | undefined {
  const { aaguid } = credential;
  if (policy.denyAaguids.includes(aaguid)) return 'policy_authenticator';
  if (policy.allowAaguids.length > 0 && (aaguid === ZERO_AAGUID || !policy.allowAaguids.includes(aaguid)))
    return 'policy_authenticator';
  if (policy.requireDeviceBound && credential.backupEligible) return 'policy_device_bound';
  if (policy.requireUv && !credential.userVerified) return 'policy_user_verification';
  return undefined;
}
