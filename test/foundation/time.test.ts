import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { iso } from '../../src/time.ts';

/** The reference: Date's ISO form (YYYY-MM-DDTHH:mm:ss.sssZ for these years) with the offset spelled out. */
const expected = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}+00:00`;

describe('iso()', () => {
  it('formats UTC with an explicit offset', () => {
    assert.equal(iso(Date.UTC(2024, 0, 15, 10, 30, 0, 999)), '2024-01-15T10:30:00+00:00');
    assert.equal(iso(0), '1970-01-01T00:00:00+00:00');
    assert.equal(iso(Date.UTC(2000, 1, 29, 23, 59, 59)), '2000-02-29T23:59:59+00:00');
    assert.equal(iso(Date.UTC(9999, 11, 31, 23, 59, 59, 999)), '9999-12-31T23:59:59+00:00');
  });

  it('agrees with Date on the first and last millisecond of every day from 1970 to 9999', () => {
    const days = Math.floor(Date.UTC(10000, 0, 1) / 86_400_000);
    for (let day = 0; day < days; day++) {
      for (const ms of [day * 86_400_000, day * 86_400_000 + 86_399_999]) {
        if (iso(ms) !== expected(ms)) assert.fail(`${ms}: ${iso(ms)} instead of ${expected(ms)}`);
      }
    }
  });

  it('agrees with Date on random times', () => {
    for (let i = 0; i < 200_000; i++) {
      const ms = Math.floor(Math.random() * Date.UTC(10000, 0, 1));
      if (iso(ms) !== expected(ms)) assert.fail(`${ms}: ${iso(ms)} instead of ${expected(ms)}`);
    }
  });

  it('leaves times before 1970, from year 10000 on, and fractions of a millisecond to Date', () => {
    assert.equal(iso(-1), '1969-12-31T23:59:59+00:00');
    assert.equal(iso(Date.UTC(1900, 0, 1)), '1900-01-01T00:00:00+00:00');
    assert.equal(iso(Date.UTC(10000, 0, 1)), '+010000-01-01T00:00:00+00:00');
    assert.equal(iso(1.5), '1970-01-01T00:00:00+00:00');
  });
});
