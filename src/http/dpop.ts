// DPoP (RFC 9449) proofs at the service's own resource APIs, which verify their access tokens
// themselves (bearer.ts). The authorization server's endpoints (token, userinfo, PAR) are
// oidc-provider's; its nonces and ours are computed alike from the same secret, so a nonce one
// endpoint issued is good at another, on every instance.
import { createHash, hkdfSync, timingSafeEqual } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type { Store } from '../store/index.ts';
import { recordProof } from '../store/dpop-proofs.ts';

/** Proof algorithms accepted here and at the authorization server; no `none`, no HMAC. */
export const DPOP_ALGS = ['ES256', 'EdDSA', 'Ed25519', 'PS256', 'RS256'];

/** A proof's `iat` may be this far from the server's clock, either way. */
const DPOP_IAT_WINDOW_SECONDS = 60;

// Nonces change every minute and are accepted for two minutes either side, exactly as
// oidc-provider's (lib/helpers/challenge.js, info "DPoP"), so both accept each other's.
const NONCE_STEP_SECONDS = 60;
const NONCE_INFO = 'DPoP';

export interface DpopNonces {
  /** the nonce to hand out now */
  next(nowMs: number): string;
  /** whether a nonce presented now is current */
  check(nonce: string, nowMs: number): boolean;
}

export function dpopNonces(secret: Buffer): DpopNonces {
  const at = (step: number) => {
    const salt = Buffer.alloc(8);
    salt.writeBigUInt64BE(BigInt(step));
    return Buffer.from(hkdfSync('sha256', secret, salt, NONCE_INFO, 32)).toString('base64url');
  };
  const stepOf = (nowMs: number) => Math.floor(nowMs / 1000 / NONCE_STEP_SECONDS);
  return {
    next: (nowMs) => at(stepOf(nowMs) + 1),
    check(nonce, nowMs) {
      const presented = Buffer.from(nonce);
      let matched = false;
      for (let d = -2; d <= 2; d++) {
        const expected = Buffer.from(at(stepOf(nowMs) + d));
        if (expected.length === presented.length && timingSafeEqual(expected, presented)) matched = true;
      }
      return matched;
    },
  };
}

/** Why a proof was refused: RFC 9449's two error codes. `nonce` is the one to use next. */
export class DpopProofError extends Error {
  readonly code: 'invalid_dpop_proof' | 'use_dpop_nonce';
  readonly nonce: string;
  constructor(code: DpopProofError['code'], message: string, nonce: string) {
    super(message);
    this.code = code;
    this.nonce = nonce;
  }
}

export interface DpopRequest {
  /** the DPoP header as received */
  proof: unknown;
  method: string;
  /** the request URL as the client addressed it: PUBLIC_URL and the path, without query */
  url: string;
  accessToken: string;
  /** the token's cnf.jkt */
  jkt: string;
}

export interface DpopVerifier {
  /** resolves when the proof binds this request to the token's key; throws DpopProofError otherwise */
  verify(request: DpopRequest): Promise<void>;
}

const MAX_PROOF_LENGTH = 8192;
const sha256 = (value: string) => createHash('sha256').update(value).digest('base64url');

function sameUrl(htu: unknown, expected: string): boolean {
  if (typeof htu !== 'string') return false;
  const actual = URL.parse(htu);
  if (!actual) return false;
  actual.hash = '';
  actual.search = '';
  return actual.href === new URL(expected).href;
}

async function signedProof(proof: unknown): Promise<{ payload: JWTPayload; jwk: JWK }> {
  if (typeof proof !== 'string' || proof.length > MAX_PROOF_LENGTH) throw new Error('DPoP proof missing or malformed');
  const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, { algorithms: DPOP_ALGS, typ: 'dpop+jwt' });
  return { payload, jwk: protectedHeader.jwk! };
}

/** The checks of RFC 9449 4.3 that need no database; the message names the first that fails. */
function checkClaims(payload: JWTPayload, request: DpopRequest, nowMs: number): string | undefined {
  if (typeof payload.jti !== 'string' || !payload.jti || payload.jti.length > 256) return 'DPoP proof jti missing';
  if (typeof payload.iat !== 'number' || Math.abs(nowMs / 1000 - payload.iat) > DPOP_IAT_WINDOW_SECONDS)
    return 'DPoP proof iat is not recent';
  if (payload.htm !== request.method) return 'DPoP proof htm mismatch';
  if (!sameUrl(payload.htu, request.url)) return 'DPoP proof htu mismatch';
  if (payload.ath !== sha256(request.accessToken)) return 'DPoP proof ath mismatch';
  return undefined;
}

export function createDpopVerifier(store: Store, nonces: DpopNonces, now: () => number = Date.now): DpopVerifier {
  return {
    async verify(request) {
      const at = now();
      const next = nonces.next(at);
      const refuse = (message: string) => new DpopProofError('invalid_dpop_proof', message, next);
      let proof: Awaited<ReturnType<typeof signedProof>>;
      try {
        proof = await signedProof(request.proof);
      } catch {
        throw refuse('DPoP proof missing or invalid');
      }
      const problem = checkClaims(proof.payload, request, at);
      if (problem) throw refuse(problem);
      if ((await calculateJwkThumbprint(proof.jwk)) !== request.jkt) throw refuse('DPoP proof key does not match');
      const { nonce } = proof.payload;
      if (typeof nonce !== 'string' || !nonces.check(nonce, at))
        throw new DpopProofError('use_dpop_nonce', 'DPoP proof needs a current nonce', next);
      // Last, so a proof refused for another reason is not remembered; kept while its iat is acceptable.
      const id = `rs:${sha256(`${request.jkt}:${proof.payload.jti as string}`)}`;
      if (!(await recordProof(store.db, id, at + (2 * DPOP_IAT_WINDOW_SECONDS + 1) * 1000, at)))
        throw refuse('DPoP proof was already used');
    },
  };
}
