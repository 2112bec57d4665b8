// The signer of oidc-provider's cookies: the digests Keygrip makes (so cookies signed before it, or
// by an instance without it, stay valid), any key of a rollover verifying, and nothing else.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { cookieSigner } from '../../src/oauth/cookie-signer.ts';

// Keygrip itself, as the cookies library (through koa) uses it for an array of keys
const Keygrip = createRequire(import.meta.url)('keygrip') as new (keys: string[]) => {
  sign(data: string): string;
  index(data: string, digest: string): number;
};

describe('cookie signer', () => {
  const keys = ['current-key-0123456789', 'previous-key-0123456789'];

  it('signs as Keygrip signs, for every key and any cookie text', () => {
    for (const data of ['_session=abc', '_interaction=Zm9v; x', 'é=ü', '']) {
      assert.equal(cookieSigner(keys).sign(data), new Keygrip(keys).sign(data));
      assert.equal(cookieSigner([keys[1]!]).sign(data), new Keygrip([keys[1]!]).sign(data));
    }
  });

  it('says which key made a digest, as Keygrip does, and -1 for any other digest', () => {
    const signer = cookieSigner(keys);
    const byPrevious = new Keygrip([keys[1]!]).sign('_session=abc');
    assert.equal(signer.index('_session=abc', signer.sign('_session=abc')), 0);
    assert.equal(signer.index('_session=abc', byPrevious), 1);
    assert.equal(new Keygrip(keys).index('_session=abc', byPrevious), 1);
    assert.ok(signer.verify('_session=abc', byPrevious));
    // another value, a changed digest, another length, another key, nothing
    const good = signer.sign('_session=abc');
    assert.equal(signer.index('_session=abd', good), -1);
    assert.equal(signer.index('_session=abc', `${good.slice(0, -1)}${good.endsWith('A') ? 'B' : 'A'}`), -1);
    assert.equal(signer.index('_session=abc', `${good}A`), -1);
    assert.equal(signer.index('_session=abc', cookieSigner(['someone-else-0123456789']).sign('_session=abc')), -1);
    assert.equal(signer.index('_session=abc', ''), -1);
    assert.equal(signer.verify('_session=abc', undefined as unknown as string), false);
  });

  it('needs a key', () => {
    assert.throws(() => cookieSigner([]), /needs a key/);
  });
});
