// keptLookup, the cache under the client and service provider lookups: a value is kept until an
// invalidation of its key, concurrent lookups share one load, and nothing unknown or raced is kept.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Invalidations, keptLookup } from '../../src/store/invalidation.ts';

/** A lookup over a map, counting its loads; `gate` holds loads until it is opened. */
function counted(invalidations: Invalidations | undefined, options: { until?: (v: { name: string }) => number } = {}) {
  const rows = new Map<string, { name: string }>([['a', { name: 'A' }]]);
  let loads = 0;
  let gate: Promise<void> = Promise.resolve();
  const lookup = keptLookup(invalidations, {
    topic: 'client',
    max: 10,
    keepMs: 60_000,
    load: async (key) => {
      loads++;
      await gate;
      const row = rows.get(key);
      return row && { ...row };
    },
    ...options,
  });
  return {
    lookup,
    rows,
    loads: () => loads,
    hold: () => {
      let open!: () => void;
      gate = new Promise<void>((resolve) => (open = resolve));
      return () => open();
    },
  };
}

describe('keptLookup', () => {
  it('keeps a value: the second lookup loads nothing and gets the same object', async () => {
    const c = counted(new Invalidations());
    const first = await c.lookup('a');
    assert.deepEqual(first, { name: 'A' });
    assert.equal(await c.lookup('a'), first);
    assert.equal(c.loads(), 1);
  });

  it('shares one load among concurrent lookups of a key', async () => {
    const c = counted(new Invalidations());
    const open = c.hold();
    const both = Promise.all([c.lookup('a'), c.lookup('a')]);
    open();
    const [x, y] = await both;
    assert.equal(x, y);
    assert.equal(c.loads(), 1);
  });

  it('does not keep an unknown key', async () => {
    const c = counted(new Invalidations());
    assert.equal(await c.lookup('nobody'), undefined);
    assert.equal(await c.lookup('nobody'), undefined);
    assert.equal(c.loads(), 2);
  });

  it('drops a key on its invalidation, not on another key or topic; null drops everything', async () => {
    const bus = new Invalidations();
    const c = counted(bus);
    await c.lookup('a');
    bus.deliver({ topic: 'client', key: 'b' });
    bus.deliver({ topic: 'user', key: 'a' });
    await c.lookup('a');
    assert.equal(c.loads(), 1);
    c.rows.set('a', { name: 'A2' });
    bus.deliver({ topic: 'client', key: 'a' });
    assert.deepEqual(await c.lookup('a'), { name: 'A2' });
    assert.equal(c.loads(), 2);
    bus.deliver(null);
    await c.lookup('a');
    assert.equal(c.loads(), 3);
  });

  it('hands out, but does not keep, a value loaded while an invalidation arrived', async () => {
    const bus = new Invalidations();
    const c = counted(bus);
    const open = c.hold();
    const raced = c.lookup('a');
    bus.deliver({ topic: 'client', key: 'other' });
    open();
    assert.deepEqual(await raced, { name: 'A' });
    await c.lookup('a');
    assert.equal(c.loads(), 2);
  });

  it('keeps a value no longer than until() says', async () => {
    const c = counted(new Invalidations(), { until: () => Date.now() + 30 });
    await c.lookup('a');
    await c.lookup('a');
    assert.equal(c.loads(), 1);
    await sleep(60);
    await c.lookup('a');
    assert.equal(c.loads(), 2);
  });

  it('without invalidations keeps a value for a second only', async () => {
    const c = counted(undefined);
    await c.lookup('a');
    await c.lookup('a');
    assert.equal(c.loads(), 1);
    await sleep(1100);
    await c.lookup('a');
    assert.equal(c.loads(), 2);
  });

  it('does not keep a failed load', async () => {
    let loads = 0;
    const lookup = keptLookup(new Invalidations(), {
      topic: 'client',
      max: 10,
      keepMs: 60_000,
      load: async () => {
        loads++;
        throw new Error('database away');
      },
    });
    await assert.rejects(lookup('a'), /database away/);
    await assert.rejects(lookup('a'), /database away/);
    assert.equal(loads, 2);
  });
});
