// The provider's active signing keys, signing through node:crypto's one-shot callback API.
//
// oidc-provider signs JWTs with jose, which signs through WebCrypto; each signature goes through
// WebCrypto's argument conversions and algorithm normalisation on the event loop before the
// signing itself runs on libuv's pool. node:crypto's crypto.sign(..., callback) runs the same
// signature on the same pool without that conversion work (docs/passkey-api.md has the figures). The
// provider accepts such keys as ExternalSigningKey (its externalSigningSupport feature): it builds
// the JWS itself and asks the key only for the signature of the signing input, and publishes the
// key's public half, from keyObject(), in its JWKS.
//
// Where every core already runs one of the service's event loops (WORKERS at or above the number of
// cores), the pool has no idle core to sign on: handing each signature over and back only adds
// thread switches, so the keys sign on the calling thread instead (`inline`).
//
// crypto.sign is given the KeyObject itself, never the `{ key, dsaEncoding }` options form: Node
// (24.x) tells a KeyObject and a CryptoKey apart from other objects by reading their native slots
// and catching the TypeError that throws for anything else, so the options object costs two
// constructed errors with captured stack traces per signature (about 55-90 µs of the event loop's
// time here, as much as the signature itself or more). ES256 signatures therefore come back
// DER-encoded and are rewritten here as the r || s that JWS wants (RFC 7518, 3.4).
import { availableParallelism } from 'node:os';
import { createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto';
import type { JWK } from 'jose';
import { ExternalSigningKey } from 'oidc-provider';
import type { SigningAlg } from './keys.ts';

/** The release of the provider's experimental feature this class implements. */
export const EXTERNAL_SIGNING_ACK = 'experimental-01';

interface SignOptions {
  digest: string;
  /** the size in bytes of r and of s in an ECDSA signature, which comes back DER-encoded */
  ecdsaSize?: number;
}

/** How each algorithm the service signs with maps onto crypto.sign. */
const SIGN_OPTIONS: Record<SigningAlg, SignOptions> = {
  ES256: { digest: 'sha256', ecdsaSize: 32 },
  RS256: { digest: 'sha256' },
};

const SEQUENCE = 0x30;
const INTEGER = 0x02;

/**
 * An ECDSA signature in DER (`SEQUENCE { r INTEGER, s INTEGER }`, RFC 3279) as JWS encodes it:
 * r and s as unsigned big-endian numbers of `size` bytes each, concatenated. Only short-form
 * lengths occur for the curves used here (P-256: at most 72 bytes in all).
 */
export function derToJoseSignature(der: Uint8Array, size: number): Buffer {
  const malformed = () => new Error('malformed ECDSA signature');
  if (der[0] !== SEQUENCE || der[1] !== der.length - 2 || der[1] > 0x7f) throw malformed();
  const out = Buffer.alloc(size * 2);
  let at = 2;
  for (const slot of [0, size]) {
    const length = der[at + 1]!;
    if (der[at] !== INTEGER || length > 0x7f || at + 2 + length > der.length) throw malformed();
    let start = at + 2;
    const end = start + length;
    // a leading zero byte only keeps a positive number's top bit clear
    while (start < end - 1 && der[start] === 0) start += 1;
    if (end - start > size) throw malformed();
    out.set(der.subarray(start, end), slot + size - (end - start));
    at = end;
  }
  if (at !== der.length) throw malformed();
  return out;
}

/** Whether n processes of the service leave no core idle for libuv's pool. */
export function signInline(processes: number, cores = availableParallelism()): boolean {
  return processes > 1 && processes >= cores;
}

export class NodeSigningKey extends ExternalSigningKey {
  readonly #public: KeyObject;
  readonly #digest: string;
  readonly #key: KeyObject;
  readonly #ecdsaSize: number | undefined;
  readonly #inline: boolean;

  /** inline: sign on the calling thread rather than on libuv's pool (see above) */
  constructor(jwk: JWK, { inline = false }: { inline?: boolean } = {}) {
    super();
    const { alg, kid } = jwk;
    if (!kid) throw new Error('signing key without a kid');
    const options = alg && Object.hasOwn(SIGN_OPTIONS, alg) ? SIGN_OPTIONS[alg as SigningAlg] : undefined;
    if (!alg || !options) throw new Error(`signing key ${kid}: unsupported algorithm ${alg ?? '(none)'}`);
    const privateKey = createPrivateKey({ key: jwk, format: 'jwk' });
    this.#public = createPublicKey(privateKey);
    this.#digest = options.digest;
    this.#key = privateKey;
    this.#ecdsaSize = options.ecdsaSize;
    this.#inline = inline;
    // the typings declare only getters; the class has setters for both
    const self = this as unknown as { kid: string; alg: string };
    self.kid = kid;
    self.alg = alg;
  }

  override keyObject(): KeyObject {
    return this.#public;
  }

  override sign(data: Uint8Array): Promise<Buffer> {
    if (this.#inline) return Promise.resolve(this.#encoded(sign(this.#digest, data, this.#key)));
    return new Promise<Buffer>((resolve, reject) => {
      sign(this.#digest, data, this.#key, (err, signature) => (err ? reject(err) : resolve(signature)));
    }).then((signature) => this.#encoded(signature));
  }

  /** The signature as JWS encodes it. */
  #encoded(signature: Buffer): Buffer {
    return this.#ecdsaSize === undefined ? signature : derToJoseSignature(signature, this.#ecdsaSize);
  }
}
