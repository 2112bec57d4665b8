// @simplewebauthn/server and its ASN.1/X.509 dependencies cost several megabytes of memory and tens
// of milliseconds to load: they are loaded on the first passkey ceremony (or import), not at start.

let server: Promise<typeof import('@simplewebauthn/server')> | undefined;
let helpers: Promise<typeof import('@simplewebauthn/server/helpers')> | undefined;

/** The library's ceremony functions, loaded once on first use. */
export function webauthnServer(): Promise<typeof import('@simplewebauthn/server')> {
  server ??= import('@simplewebauthn/server');
  return server;
}

/** The library's helpers (COSE decoding), loaded once on first use. */
export function webauthnHelpers(): Promise<typeof import('@simplewebauthn/server/helpers')> {
  helpers ??= import('@simplewebauthn/server/helpers');
  return helpers;
}
