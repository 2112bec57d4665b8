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
import { availableParallelism } from 'node:os';
import { createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto';
import type { JWK } from 'jose';
import { ExternalSigningKey } from 'oidc-provider';
import type { SigningAlg } from './keys.ts';

/** The release of the provider's experimental feature this class implements. */
export const EXTERNAL_SIGNING_ACK = 'experimental-01';

interface SignOptions {
  digest: string;
  dsaEncoding?: 'ieee-p1363';
}

/** How each algorithm the service signs with maps onto crypto.sign. */
const SIGN_OPTIONS: Record<SigningAlg, SignOptions> = {
  // JWS wants the raw r || s concatenation (RFC 7518, 3.4), not DER
  ES256: { digest: 'sha256', dsaEncoding: 'ieee-p1363' },
  RS256: { digest: 'sha256' },
};

/** Whether n processes of the service leave no core idle for libuv's pool. */
export function signInline(processes: number, cores = availableParallelism()): boolean {
  return processes > 1 && processes >= cores;
}

export class NodeSigningKey extends ExternalSigningKey {
  readonly #public: KeyObject;
  readonly #digest: string;
  /** what crypto.sign takes as its key: the private key, with the signature's encoding where it has one */
  readonly #key: KeyObject | { key: KeyObject; dsaEncoding: 'ieee-p1363' };
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
    this.#key = options.dsaEncoding ? { key: privateKey, dsaEncoding: options.dsaEncoding } : privateKey;
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
    if (this.#inline) return Promise.resolve(sign(this.#digest, data, this.#key));
    return new Promise((resolve, reject) => {
      sign(this.#digest, data, this.#key, (err, signature) => (err ? reject(err) : resolve(signature)));
    });
  }
}
