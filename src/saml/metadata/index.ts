// SAML metadata: service providers' metadata read into typed descriptors, and the identity
// provider's own metadata built and signed. Built on the XML security layer (../xml).
export * from './aggregate.ts';
export * from './errors.ts';
export * from './namespaces.ts';
export * from './sp-descriptor.ts';
export * from './idp-metadata.ts';
export * from './idp-descriptor.ts';
export * from './sp-metadata.ts';
