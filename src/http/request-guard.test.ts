import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { containsNul } from './request-guard.ts';

describe('containsNul', () => {
  it('finds a NUL in any string, key or value, at any depth it reads', () => {
    assert.equal(containsNul({ a: ['x', { b: 'y\u0000' }] }), true);
    assert.equal(containsNul({ ['k\u0000']: 1 }), true);
    assert.equal(containsNul({ a: ['x', { b: 'y' }], n: 1, t: true, z: null }), false);
  });

  it('leaves bytes alone: an upload is not text', () => {
    assert.equal(containsNul({ file: Buffer.from([0, 1, 2]) }), false);
  });

  it('refuses nesting deeper than any form or API uses instead of leaving it unchecked', () => {
    let deep: unknown = 'clean';
    for (let i = 0; i < 40; i++) deep = { next: deep };
    assert.equal(containsNul(deep), true);
    let shallow: unknown = 'clean';
    for (let i = 0; i < 10; i++) shallow = { next: shallow };
    assert.equal(containsNul(shallow), false);
  });
});
