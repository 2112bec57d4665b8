// The algorithm identifiers the layer speaks, and which of them it accepts.
export const NS = {
  protocol: 'urn:oasis:names:tc:SAML:2.0:protocol',
  assertion: 'urn:oasis:names:tc:SAML:2.0:assertion',
  metadata: 'urn:oasis:names:tc:SAML:2.0:metadata',
  dsig: 'http://www.w3.org/2000/09/xmldsig#',
  xenc: 'http://www.w3.org/2001/04/xmlenc#',
} as const;

export const SIGNATURE = {
  rsaSha1: 'http://www.w3.org/2000/09/xmldsig#rsa-sha1',
  rsaSha256: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
  rsaSha384: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha384',
  rsaSha512: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha512',
} as const;

export const DIGEST = {
  sha1: 'http://www.w3.org/2000/09/xmldsig#sha1',
  sha256: 'http://www.w3.org/2001/04/xmlenc#sha256',
  sha384: 'http://www.w3.org/2001/04/xmldsig-more#sha384',
  sha512: 'http://www.w3.org/2001/04/xmlenc#sha512',
} as const;

export const TRANSFORM = {
  enveloped: 'http://www.w3.org/2000/09/xmldsig#enveloped-signature',
  excC14n: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  excC14nWithComments: 'http://www.w3.org/2001/10/xml-exc-c14n#WithComments',
} as const;

export const ENCRYPTION = {
  aes128Gcm: 'http://www.w3.org/2009/xmlenc11#aes128-gcm',
  aes256Gcm: 'http://www.w3.org/2009/xmlenc11#aes256-gcm',
  aes128Cbc: 'http://www.w3.org/2001/04/xmlenc#aes128-cbc',
  aes256Cbc: 'http://www.w3.org/2001/04/xmlenc#aes256-cbc',
} as const;

export const KEY_TRANSPORT = {
  rsaOaepMgf1p: 'http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p',
  rsaOaep: 'http://www.w3.org/2009/xmlenc11#rsa-oaep',
} as const;

/** The node:crypto hash behind each signature algorithm the layer accepts (RSA only). */
export const SIGNATURE_HASH: Record<string, 'sha1' | 'sha256' | 'sha384' | 'sha512'> = {
  [SIGNATURE.rsaSha1]: 'sha1',
  [SIGNATURE.rsaSha256]: 'sha256',
  [SIGNATURE.rsaSha384]: 'sha384',
  [SIGNATURE.rsaSha512]: 'sha512',
};

export const DIGEST_HASH: Record<string, 'sha1' | 'sha256' | 'sha384' | 'sha512'> = {
  [DIGEST.sha1]: 'sha1',
  [DIGEST.sha256]: 'sha256',
  [DIGEST.sha384]: 'sha384',
  [DIGEST.sha512]: 'sha512',
};

/** Signature algorithms accepted on input: SHA-2 always, SHA-1 only for a peer that still sends it. */
export function acceptedSignatureAlgorithms(allowSha1 = false): string[] {
  const sha2 = [SIGNATURE.rsaSha256, SIGNATURE.rsaSha384, SIGNATURE.rsaSha512];
  return allowSha1 ? [...sha2, SIGNATURE.rsaSha1] : sha2;
}

export function acceptedDigestAlgorithms(allowSha1 = false): string[] {
  const sha2 = [DIGEST.sha256, DIGEST.sha384, DIGEST.sha512];
  return allowSha1 ? [...sha2, DIGEST.sha1] : sha2;
}
