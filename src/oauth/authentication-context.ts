// What a sign-in proved, as relying parties read it in the ID token: `amr` (RFC 8176 method
// references) and `acr` (the authentication context class reached), and the login checks that make
// the provider ask for a stronger sign-in when a relying party asks for one (acr_values, claims).
import { interactionPolicy, type KoaContextWithOIDC } from 'oidc-provider';
import { words } from '../vocabulary.ts';
import { offlineAccessCheck } from './offline-access.ts';

/** Phishing-resistant (OpenID EAP ACR values): reached by a passkey sign-in, never by a password. */
export const ACR_PHISHING_RESISTANT = 'phr';
/** The baseline every sign-in reaches, a password included: REFEDS Single-Factor Authentication. */
export const ACR_BASELINE = 'https://refeds.org/profile/sfa';
/** `acr_values_supported` in discovery, strongest first. */
export const ACR_VALUES = [ACR_PHISHING_RESISTANT, ACR_BASELINE] as const;

export const AMR_PASSWORD = ['pwd'];

/** What one passkey assertion showed about the authenticator and the user. */
export interface PasskeyEvidence {
  /** the authenticator verified the user (PIN, biometrics): the UV flag */
  userVerified: boolean;
  /** the credential may be synced to other devices: the BE flag */
  backupEligible: boolean;
}

/**
 * RFC 8176: `hwk` for a key bound to one device, `swk` for one that may be synced (it lives in
 * software the user's accounts copy around); with user verification also `user` (the
 * authenticator checked the user) and `mfa` (something held plus something known or inherent).
 */
export function amrForPasskey({ userVerified, backupEligible }: PasskeyEvidence): string[] {
  const key = backupEligible ? 'swk' : 'hwk';
  return userVerified ? [key, 'user', 'mfa'] : [key];
}

/** The class a sign-in with these methods reached: any public-key method is phishing-resistant. */
export function acrFor(amr: readonly string[]): string {
  return amr.includes('hwk') || amr.includes('swk') ? ACR_PHISHING_RESISTANT : ACR_BASELINE;
}

interface AcrRequest {
  value?: unknown;
  values?: unknown;
}

function claimsAcr(claims: unknown): string[] {
  if (typeof claims !== 'string') return [];
  try {
    const acr = (JSON.parse(claims) as { id_token?: { acr?: AcrRequest } } | null)?.id_token?.acr;
    if (!acr || typeof acr !== 'object') return [];
    const values = Array.isArray(acr.values) ? acr.values : [acr.value];
    return values.filter((v): v is string => typeof v === 'string');
  } catch {
    return [];
  }
}

/**
 * The classes of ours the request asks for (acr_values, or acr in the claims parameter), in
 * the request's order. Values we do not know are ignored, as voluntary acr_values allow.
 */
export function requestedAcrs(params: { acr_values?: unknown; claims?: unknown }): string[] {
  const asked = [...words(params.acr_values), ...claimsAcr(params.claims)];
  return [...new Set(asked.filter((v) => (ACR_VALUES as readonly string[]).includes(v)))];
}

/** A password sign-in satisfies the request: it asks for no class of ours, or for the baseline. */
export function passwordSatisfies(params: { acr_values?: unknown; claims?: unknown }): boolean {
  const asked = requestedAcrs(params);
  return asked.length === 0 || asked.includes(ACR_BASELINE);
}

/**
 * A login check: a session whose sign-in did not reach any class the request asks for in
 * acr_values is asked to sign in again. (An essential acr in the claims parameter is the
 * provider's own `essential_acr(s)` checks.)
 */
function acrValuesCheck(): interactionPolicy.Check {
  return new interactionPolicy.Check(
    'acr_values',
    'the sign-in did not reach a requested authentication context class',
    (ctx: KoaContextWithOIDC) => {
      const asked = requestedAcrs({ acr_values: ctx.oidc.params?.acr_values });
      if (asked.length === 0) return interactionPolicy.Check.NO_NEED_TO_PROMPT;
      const reached = ctx.oidc.session?.acr;
      return reached !== undefined && asked.includes(reached)
        ? interactionPolicy.Check.NO_NEED_TO_PROMPT
        : interactionPolicy.Check.REQUEST_PROMPT;
    },
  );
}

/** oidc-provider's default interaction policy with the checks above and offline_access's. */
export function signInPolicy(): interactionPolicy.Prompt[] {
  const policy = interactionPolicy.base();
  const login = policy.get('login');
  login?.checks.add(offlineAccessCheck(), 0);
  login?.checks.add(acrValuesCheck());
  return policy;
}

/** The ID token always says how and when the user signed in, whatever the client asked for. */
export function withAuthenticationClaims(claims: Record<string, string[]>): Record<string, string[]> {
  return { ...claims, openid: [...new Set([...(claims.openid ?? ['sub']), 'acr', 'amr', 'auth_time'])] };
}
