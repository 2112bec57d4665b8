// The identity provider's SAML paths that the layers below the SAML feature need to know (kept
// apart from the registry so that knowing them does not load the SAML XML libraries).

/** Where the authorization server sends an SP's sign-in back to (its client's one redirect URI). */
export const SAML_CONTINUE_PATH = '/saml2/idp/continue';
