import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { compactVerify, importJWK, type JWK } from 'jose';
import { derToJoseSignature, NodeSigningKey, signInline } from '../../src/oauth/signing-key.ts';

/** A JWS signed by the key: header and payload encoded as oidc-provider encodes them, the key's signature. */
async function jws(key: NodeSigningKey, alg: string): Promise<string> {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part({ alg, kid: key.kid })}.${part({ sub: 'x', iat: 1 })}`;
  const signature = await key.sign(Buffer.from(input));
  return `${input}.${Buffer.from(signature).toString('base64url')}`;
}

function privateJwk(alg: 'ES256' | 'RS256', kid: string): JWK {
  const pair =
    alg === 'ES256'
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...pair.privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' } as JWK;
}

describe('signing keys (node:crypto behind oidc-provider)', () => {
  for (const [alg, inline] of [
    ['ES256', false],
    ['RS256', false],
    ['ES256', true],
    ['RS256', true],
  ] as const) {
    it(`${alg}${inline ? ', signing inline' : ''}: signatures verify against the public JWK the provider publishes`, async () => {
      const jwk = privateJwk(alg, `k-${alg}`);
      const key = new NodeSigningKey(jwk, { inline });
      assert.equal(key.kid, `k-${alg}`);
      assert.equal(key.alg, alg);
      assert.equal(key.use, 'sig');
      // the public half only, as the JWKS shows it
      const published = key.keyObject().export({ format: 'jwk' });
      assert.equal(published.d, undefined);
      assert.equal(key.kty, jwk.kty);
      assert.equal(alg === 'ES256' ? key.x : key.n, alg === 'ES256' ? jwk.x : jwk.n);
      const verified = await compactVerify(await jws(key, alg), await importJWK({ ...published, alg }, alg));
      assert.equal(verified.protectedHeader.alg, alg);
    });
  }

  it('ES256 signatures are the 64-byte r || s of JWS, not DER', async () => {
    const jwk = privateJwk('ES256', 'k');
    assert.equal((await new NodeSigningKey(jwk).sign(Buffer.from('data'))).length, 64);
    assert.equal((await new NodeSigningKey(jwk, { inline: true }).sign(Buffer.from('data'))).length, 64);
  });

  it('signs inline only when the processes leave no core idle for the pool', () => {
    assert.equal(signInline(1, 2), false);
    assert.equal(signInline(1, 1), false); // one process: the pool may still overlap with I/O waits
    assert.equal(signInline(2, 4), false);
    assert.equal(signInline(2, 2), true);
    assert.equal(signInline(4, 2), true);
  });

  it('a signature from another key does not verify', async () => {
    const signer = new NodeSigningKey(privateJwk('ES256', 'a'));
    const other = new NodeSigningKey(privateJwk('ES256', 'b'));
    const otherPublic = await importJWK({ ...other.keyObject().export({ format: 'jwk' }), alg: 'ES256' }, 'ES256');
    await assert.rejects(compactVerify(await jws(signer, 'ES256'), otherPublic));
  });

  it('refuses a key without a supported algorithm or a kid', () => {
    assert.throws(
      () => new NodeSigningKey({ ...privateJwk('ES256', 'k'), alg: 'ES384' }),
      /unsupported algorithm ES384/,
    );
    assert.throws(
      () => new NodeSigningKey({ ...privateJwk('ES256', 'k'), alg: undefined }),
      /unsupported algorithm \(none\)/,
    );
    assert.throws(
      () => new NodeSigningKey({ ...privateJwk('ES256', 'k'), alg: 'toString' }),
      /unsupported algorithm toString/,
    );
    assert.throws(() => new NodeSigningKey({ ...privateJwk('ES256', 'k'), kid: undefined }), /without a kid/);
  });

  it('rewrites DER ECDSA signatures as r || s, short and sign-padded integers included', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const data = Buffer.from('signing input');
    let short = 0;
    for (let i = 0; i < 2000; i++) {
      const der = sign('sha256', data, privateKey);
      const rLength = der[3]!;
      const sLength = der[4 + rLength + 1]!;
      if (rLength < 32 || sLength < 32) short += 1;
      const jose = derToJoseSignature(der, 32);
      assert.equal(jose.length, 64);
      assert.ok(verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, jose));
    }
    // about 1 in 128 signatures has an r or s below 2^248: the loop met that case
    assert.ok(short > 0);
  });

  it('places each integer right-aligned and drops the sign byte', () => {
    const r = Buffer.concat([Buffer.from([0x00, 0x80]), Buffer.alloc(31, 0x11)]); // 33 bytes, top bit set
    const s = Buffer.alloc(30, 0x22); // 30 bytes: two leading zero bytes in r || s
    const der = Buffer.concat([
      Buffer.from([0x30, 4 + r.length + s.length, 0x02, r.length]),
      r,
      Buffer.from([0x02, s.length]),
      s,
    ]);
    const jose = derToJoseSignature(der, 32);
    assert.deepEqual(jose.subarray(0, 32), r.subarray(1));
    assert.deepEqual(jose.subarray(32), Buffer.concat([Buffer.alloc(2), s]));
  });

  it('refuses a malformed DER signature', () => {
    const good = sign('sha256', Buffer.from('x'), generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
    const withByte = (at: number, value: number) => Buffer.from(good).fill(value, at, at + 1);
    for (const bad of [
      Buffer.alloc(0),
      withByte(0, 0x31), // not a SEQUENCE
      withByte(1, good[1]! + 1), // length beyond the end
      withByte(2, 0x03), // r not an INTEGER
      Buffer.concat([good, Buffer.from([0])]), // a byte past the SEQUENCE
      Buffer.concat([Buffer.from([0x30, good[1]! + 1]), good.subarray(2), Buffer.from([0])]), // a byte after s, inside it
      Buffer.from([0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x05, 0x01]), // s runs past the end
      Buffer.concat([Buffer.from([0x30, 38, 0x02, 33]), Buffer.alloc(33, 0x11), Buffer.from([0x02, 0x01, 0x01])]), // r of 33 significant bytes
    ])
      assert.throws(() => derToJoseSignature(bad, 32), /malformed ECDSA signature/);
  });
});
