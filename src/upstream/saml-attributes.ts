// What an upstream SAML identity provider's attributes mean here: urn:oid names (the SAML2 profile
// of X.500/LDAP, what Shibboleth IdP and SimpleSAMLphp send), AD FS / Entra ID claim URIs, and the
// plain LDAP names some IdPs send with the basic name format, read into the normalised names of an
// UpstreamAssertion. `--map <attribute>=<SAML attribute name>` adds to them or replaces one.

/** SAML attribute name → normalised attribute name. */
export const SAML_ATTRIBUTE_NAMES: Record<string, string> = {
  'urn:oid:1.3.6.1.4.1.5923.1.1.1.6': 'eppn',
  'urn:oid:0.9.2342.19200300.100.1.3': 'email',
  'urn:oid:2.5.4.42': 'given_name',
  'urn:oid:2.5.4.4': 'family_name',
  'urn:oid:2.16.840.1.113730.3.1.241': 'name',
  'urn:oid:2.5.4.3': 'cn',
  'urn:oid:0.9.2342.19200300.100.1.1': 'uid',
  'urn:oid:1.3.6.1.4.1.5923.1.1.1.1': 'affiliation',
  'urn:oid:1.3.6.1.4.1.5923.1.1.1.9': 'scoped_affiliation',
  'urn:oid:1.3.6.1.4.1.5923.1.1.1.7': 'entitlement',
  'urn:oid:2.16.840.1.113730.3.1.3': 'employee_number',
  'urn:oid:1.3.6.1.4.1.25178.1.2.9': 'home_organization',
  eduPersonPrincipalName: 'eppn',
  mail: 'email',
  givenName: 'given_name',
  sn: 'family_name',
  displayName: 'name',
  uid: 'uid',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress': 'email',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname': 'given_name',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname': 'family_name',
  'http://schemas.microsoft.com/identity/claims/displayname': 'name',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn': 'upn',
  'http://schemas.microsoft.com/identity/claims/objectidentifier': 'object_id',
};

/** The subject identifiers of the SAML V2.0 Subject Identifier Attributes Profile. */
export const SUBJECT_ID = 'urn:oasis:names:tc:SAML:attribute:subject-id';
export const PAIRWISE_ID = 'urn:oasis:names:tc:SAML:attribute:pairwise-id';

/** Attributes whose value is `something@scope`, trusted only in a scope the IdP's metadata lists. */
const SCOPED = new Set(['eppn', 'scoped_affiliation']);

export interface SamlAttribute {
  name: string;
  friendlyName?: string;
  values: string[];
}

export interface AttributeRules {
  /** shibmd:Scope of the IdP's metadata; empty: scoped values are taken as they come */
  scopes: string[];
  /** normalised name → SAML attribute Name (or FriendlyName), over the defaults */
  mappings: Record<string, string>;
  /** the provider is configured to vouch for its mail attribute (`--email-verified`) */
  emailVerified: boolean;
}

/** True when `value` is `x@scope` with a scope the IdP may assert (or the IdP lists no scopes). */
export function inScope(value: string, scopes: string[]): boolean {
  if (scopes.length === 0) return true;
  const at = value.lastIndexOf('@');
  if (at <= 0 || at === value.length - 1) return false;
  return scopes.includes(value.slice(at + 1).toLowerCase());
}

/**
 * The normalised attributes: the defaults above, then the mappings (which win), scoped values out
 * of the IdP's scopes dropped, and `email_verified` as the provider's configuration says.
 */
export function normaliseAttributes(
  attributes: SamlAttribute[],
  rules: AttributeRules,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const put = (name: string, values: string[]) => {
    const kept = SCOPED.has(name) ? values.filter((v) => inScope(v, rules.scopes)) : values;
    if (kept.length === 0) return;
    out[name] = kept.length === 1 ? kept[0]! : kept;
  };
  for (const attribute of attributes) {
    const name = SAML_ATTRIBUTE_NAMES[attribute.name];
    if (name && out[name] === undefined) put(name, attribute.values);
  }
  for (const [name, samlName] of Object.entries(rules.mappings)) {
    const found = attributes.find((a) => a.name === samlName) ?? attributes.find((a) => a.friendlyName === samlName);
    if (found) {
      delete out[name];
      put(name, found.values);
    }
  }
  // eppn is single-valued (eduPerson): several values are no identifier at all
  if (Array.isArray(out.eppn)) delete out.eppn;
  if (Array.isArray(out.email)) out.email = out.email[0]!;
  if (typeof out.email === 'string') out.email_verified = rules.emailVerified ? 'true' : 'false';
  return out;
}

/** AuthnContextClassRef values whose meaning maps onto RFC 8176 `amr` values without guessing. */
const AMR_OF_CLASS: Record<string, string[]> = {
  'urn:oasis:names:tc:SAML:2.0:ac:classes:Password': ['pwd'],
  'urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport': ['pwd'],
  'https://refeds.org/profile/mfa': ['mfa'],
  'http://schemas.microsoft.com/claims/multipleauthn': ['mfa'],
};

export function amrOfClass(classRef: string | undefined): string[] {
  return classRef ? (AMR_OF_CLASS[classRef] ?? []) : [];
}
