// The client secret check that remembers what matched (src/clients/index.ts).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { keyring } from '../../src/crypto.ts';
import { hashSecret, rememberingSecretCheck } from '../../src/clients/index.ts';
import { TEST_SECRET } from '../helpers.ts';

describe('remembering client secret check', () => {
  const keys = keyring(TEST_SECRET);
  const stored = hashSecret(keys, 'the-secret');

  it('accepts the secret again, and only while the stored hash it matched is current', () => {
    const check = rememberingSecretCheck(keys);
    const owner = {};
    assert.equal(check(owner, stored, 'the-secret'), true);
    assert.equal(check(owner, stored, 'the-secret'), true, 'remembered');
    assert.equal(check(owner, hashSecret(keys, 'rotated'), 'the-secret'), false, 'stored hash changed');
    assert.equal(check(owner, `${hashSecret(keys, 'rotated')} ${stored}`, 'the-secret'), true, 'overlap');
    assert.equal(check(owner, null, 'the-secret'), false, 'no secret stored');
  });

  it('never accepts a wrong secret, however often it is tried, nor one remembered for another owner', () => {
    const check = rememberingSecretCheck(keys);
    const a = {};
    for (let i = 0; i < 3; i++) assert.equal(check(a, stored, 'the-secreT'), false);
    assert.equal(check(a, stored, 'the-secret'), true);
    assert.equal(check({}, hashSecret(keys, 'other'), 'the-secret'), false);
    assert.equal(check(a, stored, 'x'.repeat(513)), false, 'too long');
  });
});
