// The userinfo claims cache keeps an answer until it ends (token expiry or USERINFO_CACHE_TTL) and
// then lets it go: ended answers are swept, so what is kept follows the rate of new tokens rather
// than filling up to the count bound with answers no one may read.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { answerCache } from '../../src/userinfo/openid-userinfo.ts';

const answer = (until: number, token: string) => ({
  body: '{}',
  until,
  dependsOn: [`token\u0000${token}`, 'user\u00001', 'client\u0000rp'],
});

describe('userinfo answer cache', () => {
  it('sweeps ended answers and what they depend on once a cache time has passed', async () => {
    const purgeEveryMs = 1000;
    const cache = answerCache(purgeEveryMs);
    const start = Date.now();
    for (let i = 0; i < 100; i++) cache.set(`t${i}`, answer(Date.now() + 20, `t${i}`), start);
    assert.deepEqual(cache.size(), { answers: 100, dependencies: 102 });
    await sleep(40);
    // within the cache time, nothing is swept yet (no timer runs)
    cache.set('fresh', answer(Date.now() + 60_000, 'fresh'), start + purgeEveryMs / 2);
    assert.equal(cache.size().answers, 101);
    // the first answer kept after a cache time drops the ended ones and their index entries
    cache.set('later', answer(Date.now() + 60_000, 'later'), start + purgeEveryMs + 5);
    assert.deepEqual(cache.size(), { answers: 2, dependencies: 4 });
    assert.equal(cache.get('t1'), undefined);
    assert.ok(cache.get('fresh'));
  });

  it('does not hand out an answer past its end, swept or not', async () => {
    const cache = answerCache(60_000);
    cache.set('t', answer(Date.now() + 10, 't'), Date.now());
    await sleep(30);
    assert.equal(cache.get('t'), undefined);
  });
});
