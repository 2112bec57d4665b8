// What a sign-in proved, as relying parties read it in the ID token: `amr` (RFC 8176 method
// references) and `acr` (the authentication context class reached), and the login checks that make
// the provider ask for a stronger sign-in when a relying party asks for one (acr_values, claims).
import { interactionPolicy, type KoaContextWithOIDC } from 'oidc-provider';
import { words } from '../vocabulary.ts';
import { offlineAccessCheck } from './offline-access.ts';

/**
 * Phishing-resistant and hardware-protected (OpenID EAP ACR values `phrh`): NIST SP 800-63B-4
 * AAL3. A device-bound (backup-ineligible) passkey, with user verification, whose authenticator
 * was attested to a root of the imported FIDO metadata and is not reported compromised.
 */
export const ACR_HARDWARE = 'phrh';
/** REFEDS MFA: a passkey with user verification, synced or not (NIST SP 800-63B-4: AAL2). */
export const ACR_MFA = 'https://refeds.org/profile/mfa';
/** Phishing-resistant (OpenID EAP ACR values): reached by a passkey sign-in, never by a password. */
export const ACR_PHISHING_RESISTANT = 'phr';
/** The baseline every sign-in reaches, a password included: REFEDS Single-Factor Authentication. */
export const ACR_BASELINE = 'https://refeds.org/profile/sfa';
/**
 * `acr_values_supported` in discovery, strongest first. Each class includes the ones after it:
 * a sign-in that reached one also satisfies a request for any weaker one.
 */
export const ACR_VALUES = [ACR_HARDWARE, ACR_MFA, ACR_PHISHING_RESISTANT, ACR_BASELINE] as const;

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
 * software the user's accounts copy around); `user` for the user presence every assertion
 * proves; with user verification also `mfa` (something held plus something known or inherent).
 */
export function amrForPasskey({ userVerified, backupEligible }: PasskeyEvidence): string[] {
  const key = backupEligible ? 'swk' : 'hwk';
  return userVerified ? [key, 'user', 'mfa'] : [key, 'user'];
}

/** The classes a sign-in with these methods reached, strongest first; attested: see ACR_HARDWARE. */
export function classesReached(amr: readonly string[], attested = false): string[] {
  if (!amr.includes('hwk') && !amr.includes('swk')) return [ACR_BASELINE];
  const mfa = amr.includes('mfa');
  return [
    ...(mfa && attested && amr.includes('hwk') ? [ACR_HARDWARE] : []),
    ...(mfa ? [ACR_MFA] : []),
    ACR_PHISHING_RESISTANT,
    ACR_BASELINE,
  ];
}

/**
 * The class a sign-in records: the strongest one the request asked for that it reached, else
 * phishing-resistant for a passkey and the baseline for a password. The ID token says it.
 */
export function acrFor(amr: readonly string[], { attested = false, asked = [] as string[] } = {}): string {
  const reached = classesReached(amr, attested);
  const chosen = ACR_VALUES.find((v) => asked.includes(v) && reached.includes(v));
  if (chosen) return chosen;
  return reached.includes(ACR_PHISHING_RESISTANT) ? ACR_PHISHING_RESISTANT : ACR_BASELINE;
}

/**
 * Every class asked for needs user verification (MFA, AAL3): a sign-in without it could satisfy
 * none. A request that also accepts a weaker class leaves user verification to the authenticator.
 */
export function requiresUserVerification(asked: readonly string[]): boolean {
  return asked.length > 0 && asked.every((a) => a === ACR_MFA || a === ACR_HARDWARE);
}

/** A session whose sign-in recorded `recorded` satisfies a request for any class in asked. */
export function acrSatisfies(recorded: string | undefined, asked: readonly string[]): boolean {
  const rank = (v: string) => (ACR_VALUES as readonly string[]).indexOf(v);
  if (recorded === undefined || rank(recorded) < 0) return false;
  return asked.some((a) => rank(a) >= rank(recorded));
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
      return acrSatisfies(ctx.oidc.session?.acr, asked)
        ? interactionPolicy.Check.NO_NEED_TO_PROMPT
        : interactionPolicy.Check.REQUEST_PROMPT;
    },
  );
}

/**
 * A login check: a session whose account the provider no longer finds (findAccount said no: the
 * user is gone, or may no longer sign in, their organization disabled since the session began) is
 * asked to sign in again, which says why. oidc-provider otherwise takes any session with an
 * account id as signed in, and its later checks expect the account.
 */
function accountCheck(): interactionPolicy.Check {
  return new interactionPolicy.Check(
    'account_unavailable',
    'the account of the session can no longer sign in',
    'login_required',
    (ctx: KoaContextWithOIDC) =>
      ctx.oidc.session?.accountId && !ctx.oidc.account
        ? interactionPolicy.Check.REQUEST_PROMPT
        : interactionPolicy.Check.NO_NEED_TO_PROMPT,
  );
}

/** oidc-provider's default interaction policy with the checks above and offline_access's. */
export function signInPolicy(): interactionPolicy.Prompt[] {
  const policy = interactionPolicy.base();
  const login = policy.get('login');
  login?.checks.add(accountCheck(), 0);
  login?.checks.add(offlineAccessCheck(), 0);
  login?.checks.add(acrValuesCheck());
  return policy;
}

/** The ID token always says how and when the user signed in, whatever the client asked for. */
export function withAuthenticationClaims(claims: Record<string, string[]>): Record<string, string[]> {
  return { ...claims, openid: [...new Set([...(claims.openid ?? ['sub']), 'acr', 'amr', 'auth_time'])] };
}
