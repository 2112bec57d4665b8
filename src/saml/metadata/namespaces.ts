// The namespaces and names SAML metadata is read and written with.
export const MD = {
  md: 'urn:oasis:names:tc:SAML:2.0:metadata',
  saml: 'urn:oasis:names:tc:SAML:2.0:assertion',
  ds: 'http://www.w3.org/2000/09/xmldsig#',
  mdui: 'urn:oasis:names:tc:SAML:metadata:ui',
  mdattr: 'urn:oasis:names:tc:SAML:metadata:attribute',
  mdrpi: 'urn:oasis:names:tc:SAML:metadata:rpi',
  shibmd: 'urn:mace:shibboleth:metadata:1.0',
  xml: 'http://www.w3.org/XML/1998/namespace',
  xmlns: 'http://www.w3.org/2000/xmlns/',
} as const;

export const SAML2_PROTOCOL = 'urn:oasis:names:tc:SAML:2.0:protocol';

export const BINDING = {
  redirect: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect',
  post: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST',
} as const;

export const NAMEID_FORMAT = {
  persistent: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
  transient: 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient',
  email: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
  unspecified: 'urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified',
} as const;

/** Entity attributes (mdattr) of the REFEDS entity categories and the Subject Identifier profile. */
export const ENTITY_ATTRIBUTE = {
  category: 'http://macedir.org/entity-category',
  categorySupport: 'http://macedir.org/entity-category-support',
  subjectIdReq: 'urn:oasis:names:tc:SAML:profiles:subject-id:req',
} as const;

export const ATTRNAME_FORMAT_URI = 'urn:oasis:names:tc:SAML:2.0:attrname-format:uri';
