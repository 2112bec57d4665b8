import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { AccessToken, TokenVerifier } from '../http/bearer.ts';
import { AppError } from '../errors.ts';
import { cachingVerifier } from './verified-token-cache.ts';

/** A verifier that accepts tokens named in `valid` (exp in epoch seconds) and counts its calls. */
function countingVerifier(valid: Record<string, number>) {
  const calls: string[] = [];
  const verifier: TokenVerifier = {
    issuer: 'https://idp.example.test',
    async verify(token, audience) {
      calls.push(`${audience} ${token}`);
      const exp = valid[token];
      if (exp === undefined) throw new AppError(401, 'Token missing or invalid');
      return { clientId: 'c', sub: 'c', jti: token, exp, scopes: new Set(['passkey.read']) } satisfies AccessToken;
    },
  };
  return { verifier, calls };
}

describe('verified token cache', () => {
  it('verifies a token once while it is unexpired', async () => {
    const { verifier, calls } = countingVerifier({ a: 1000 });
    let clock = 900_000;
    const cached = cachingVerifier(verifier, () => clock);
    assert.equal((await cached.verify('a', 'aud')).jti, 'a');
    clock = 999_000;
    assert.equal((await cached.verify('a', 'aud')).jti, 'a');
    assert.deepEqual(calls, ['aud a']);
  });

  it('verifies again once the token has expired by the injected clock, and then refuses it', async () => {
    const valid: Record<string, number> = { a: 1000 };
    const { verifier, calls } = countingVerifier(valid);
    let clock = 999_999;
    const cached = cachingVerifier(verifier, () => clock);
    await cached.verify('a', 'aud');
    clock = 1_000_000; // exp is exclusive
    delete valid.a;
    await assert.rejects(cached.verify('a', 'aud'), (e: AppError) => e.status === 401);
    assert.deepEqual(calls, ['aud a', 'aud a']);
  });

  it('keys by audience: a token verified for one API is verified again for another', async () => {
    const { verifier, calls } = countingVerifier({ a: 1000 });
    const cached = cachingVerifier(verifier, () => 0);
    await cached.verify('a', 'one');
    await cached.verify('a', 'two');
    await cached.verify('a', 'one');
    assert.deepEqual(calls, ['one a', 'two a']);
  });

  it('never caches a refusal', async () => {
    const { verifier, calls } = countingVerifier({});
    const cached = cachingVerifier(verifier, () => 0);
    await assert.rejects(cached.verify('x', 'aud'));
    await assert.rejects(cached.verify('x', 'aud'));
    assert.equal(calls.length, 2);
  });

  it('holds at most its capacity, dropping the least recently used token', async () => {
    const { verifier, calls } = countingVerifier({ a: 1000, b: 1000, c: 1000 });
    const cached = cachingVerifier(verifier, () => 0, 2);
    await cached.verify('a', 'aud');
    await cached.verify('b', 'aud');
    await cached.verify('a', 'aud'); // a is now the most recently used
    await cached.verify('c', 'aud'); // drops b
    await cached.verify('a', 'aud');
    await cached.verify('b', 'aud');
    assert.deepEqual(calls, ['aud a', 'aud b', 'aud c', 'aud b']);
  });
});
