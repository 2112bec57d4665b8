import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { memoryRelease, RELEASE_AFTER_GROWTH_MB, type MemoryReleaseEvent } from '../../src/memory.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Grows the process by about `mb` megabytes of objects that are garbage once it returns. */
function churn(mb: number): number {
  const kept: number[][] = [];
  for (let i = 0; i < mb * 64; i++) kept.push(Array.from({ length: 2048 }, (_, j) => i + j + 0.5));
  return kept.length;
}

describe('memory release', () => {
  it('gives back what garbage left resident, at once when asked', () => {
    const events: MemoryReleaseEvent[] = [];
    const memory = memoryRelease(0, (e) => events.push(e));
    try {
      churn(64);
      const event = memory.releaseNow();
      assert.deepEqual(events, [event]);
      assert.ok(event.afterMb < event.beforeMb - 16, `released ${event.beforeMb} -> ${event.afterMb} MB`);
      assert.ok(event.ms >= 0);
    } finally {
      memory.stop();
    }
  });

  it('releases once after a busy period that grew the process, only when an interval passed without requests', async () => {
    const events: MemoryReleaseEvent[] = [];
    const memory = memoryRelease(50, (e) => events.push(e));
    try {
      churn(RELEASE_AFTER_GROWTH_MB * 4);
      // busy: a request in every interval
      for (let i = 0; i < 8; i++) {
        memory.served();
        await sleep(20);
      }
      assert.equal(events.length, 0, 'nothing released while requests keep coming');
      await sleep(250);
      assert.equal(events.length, 1, 'released after an idle interval');
      await sleep(200);
      assert.equal(events.length, 1, 'and not again while nothing grew');
    } finally {
      memory.stop();
    }
  });

  it('leaves a process that did not grow alone', async () => {
    const events: MemoryReleaseEvent[] = [];
    const before = memoryRelease(0, () => {});
    before.releaseNow();
    before.stop();
    const memory = memoryRelease(30, (e) => events.push(e));
    try {
      memory.served();
      await sleep(200);
      assert.equal(events.length, 0);
    } finally {
      memory.stop();
    }
  });
});
