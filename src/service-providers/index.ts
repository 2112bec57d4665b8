// SAML service providers (the registry, each SP paired with a client) and the identity provider's
// SAML keys. docs/saml.md describes both.
export * from './client-id.ts';
export * from './metadata-source.ts';
export * from './registry.ts';
export * from './saml-keys.ts';
export * from './release.ts';
export * from './applications.ts';
export { supportedEntityCategories } from './federations.ts';
