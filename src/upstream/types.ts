// What every upstream identity provider (OpenID Connect or SAML 2.0) hands to the shared sign-in
// finish once its protocol checks passed, and what a registered provider is (docs/upstream.md).

/** What an upstream sign-in established, after every protocol check passed. */
export interface UpstreamAssertion {
  providerId: string;
  /** OIDC: `sub`. SAML: the persistent NameID, or subject-id / pairwise-id when released. */
  subject: string;
  /** Normalised attribute names: email, email_verified ('true'|'false'), eppn, external_id,
   *  given_name, family_name, name, plus whatever `--map <attribute>=<claim>` names. */
  attributes: Record<string, string | string[]>;
  /** The upstream's own authentication methods that are trustworthy (may be empty). */
  amr: string[];
  /** As the upstream stated it; never raised. */
  acr?: string;
  /** When the user authenticated at the upstream (ms since the epoch): OIDC `auth_time`, SAML `AuthnInstant`. */
  authTime?: number;
}

/** How far an upstream's clock may be from ours, either way (the SAML time checks, a sign-in's freshness). */
export const UPSTREAM_CLOCK_SKEW_MS = 3 * 60_000;

/**
 * Whether the upstream sign-in an assertion reports happened after `since` (ms since the epoch), as
 * a request for a fresh sign-in (OIDC prompt=login with max_age=0, SAML ForceAuthn) wants: its auth
 * time (OIDC auth_time, SAML AuthnInstant) is stated and not earlier than `since` less the clock
 * skew. An upstream that answers from a session of its own, ignoring the request, fails it.
 */
export function signedInSince(assertion: Pick<UpstreamAssertion, 'authTime'>, since: number): boolean {
  const at = assertion.authTime;
  return at !== undefined && Number.isFinite(at) && at >= since - UPSTREAM_CLOCK_SKEW_MS;
}

export const UPSTREAM_TYPES = ['oidc', 'saml'] as const;
export type UpstreamType = (typeof UPSTREAM_TYPES)[number];

export const LINK_BY = ['email', 'eppn', 'external_id', 'none'] as const;
export type LinkBy = (typeof LINK_BY)[number];

export const OIDC_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'] as const;
export type OidcAuthMethod = (typeof OIDC_AUTH_METHODS)[number];

/** The OpenID Connect side of a provider. */
export interface OidcSettings {
  issuer: string;
  clientId: string;
  /** the client secret, sealed at rest (never shown); null with private_key_jwt */
  hasClientSecret: boolean;
  scopes: string[];
  authMethod: OidcAuthMethod;
  /** private_key_jwt: the public JWK the upstream registers for this client */
  publicJwk?: Record<string, unknown>;
}

/** The SAML side of a provider: its IdP entityID and metadata document, as given. */
export interface SamlSettings {
  entityId: string;
  metadataXml: string;
  /** where the metadata came from (a file name or https URL), for `upstream show` */
  metadataSource?: string;
  /** the trusted federation the metadata is copied from and kept current by (`--federation`) */
  federationId?: number;
  /** since when (ms), and why, the federation's metadata has no usable entry for the entity: the last is kept until its validUntil */
  federationMissing?: { since: number; reason: string };
  /** the provider vouches for the mail attribute it releases (`--email-verified`): email_verified 'true' */
  emailVerified: boolean;
  /** a Response whose assertion is not encrypted is refused (`--require-encryption`) */
  requireEncryption: boolean;
}

/** A registered upstream identity provider of an organization. */
export interface UpstreamProvider {
  id: string;
  orgId: number;
  type: UpstreamType;
  name: string;
  /** the logo on its sign-in button, served at /upstream/<id>/logo (the bytes are read only to serve it) */
  logo?: { type: string; bytes: number; etag: string };
  enabled: boolean;
  linkBy: LinkBy;
  createUsers: boolean;
  /** the userid_sec namespace its identities appear in (without the `userid-` prefix), e.g. google */
  namespace?: string;
  /** attribute name -> claim (OIDC) or SAML attribute name, over the defaults */
  mappings: Record<string, string>;
  /** which of the upstream's own `amr` values the service's session repeats (`--trust-amr`) */
  trustAmr: string[];
  oidc?: OidcSettings;
  saml?: SamlSettings;
  createdAt: number;
  updatedAt: number;
}

/** An upstream sign-in under way: created when the browser is sent upstream, consumed once on return. */
export interface UpstreamRequest {
  /** OIDC `state` / SAML AuthnRequest `ID` */
  id: string;
  providerId: string;
  /** the oidc-provider interaction (/interaction/<uid>) the sign-in belongs to ('' for a link) */
  interactionUid: string;
  /** a link started from the account page: the account and the session it was started from */
  link?: UpstreamLinkPurpose;
  /** OIDC nonce */
  nonce?: string;
  /** OIDC PKCE code verifier */
  codeVerifier?: string;
  createdAt: number;
  expiresAt: number;
}

/** What a link request is bound to: the signed-in account and its session (oidc-provider's uid). */
export interface UpstreamLinkPurpose {
  userId: number;
  sessionUid: string;
}

/** A link between an account and an upstream identity. */
export interface UpstreamLink {
  providerId: string;
  userId: number;
  subject: string;
  createdAt: number;
  lastUsedAt: number | null;
}

/** RFC 8176 method references an upstream may state; anything else it says is dropped. */
export const KNOWN_AMR = new Set([
  'face',
  'fpt',
  'geo',
  'hwk',
  'iris',
  'kba',
  'mca',
  'mfa',
  'otp',
  'pin',
  'pop',
  'pwd',
  'rba',
  'retina',
  'sc',
  'sms',
  'swk',
  'tel',
  'user',
  'vbm',
  'wia',
]);
