// The XML security layer under the SAML identity provider and the SAML service provider: strict
// parsing, the schema gate, enveloped signatures, the Redirect binding's signature, encryption of
// assertions and the certificates of published keys. docs/saml-xml.md describes it.
export * from './algorithms.ts';
export * from './certificates.ts';
export * from './encryption.ts';
export * from './errors.ts';
export * from './keys.ts';
export * from './parse.ts';
export * from './redirect-binding.ts';
export * from './schema.ts';
export * from './signature.ts';
