// Where events may go: receiver URLs checked at registration, and names checked again when they
// resolve at delivery, so a name pointing at a private or loopback address is refused (SSRF).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkedLookup, checkTargetUrl, post, type TargetPolicy } from '../../src/events/targets.ts';

const PRODUCTION: TargetPolicy = { development: false, allowPrivate: false };
const DEVELOPMENT: TargetPolicy = { development: true, allowPrivate: false };
const ALLOWED: TargetPolicy = { development: false, allowPrivate: true };

function resolve(policy: TargetPolicy, name: string): Promise<string> {
  return new Promise((ok, fail) =>
    checkedLookup(policy)(name, { family: 0 }, (err, address) => (err ? fail(err) : ok(String(address)))),
  );
}

describe('event receiver targets', () => {
  it('accepts public https URLs and refuses the rest with a reason', () => {
    assert.equal(checkTargetUrl('https://hooks.example.com/x?a=1', PRODUCTION), 'https://hooks.example.com/x?a=1');
    const refused: [string, TargetPolicy, RegExp][] = [
      ['http://hooks.example.com/x', PRODUCTION, /must be https/],
      ['http://127.0.0.1:9/x', PRODUCTION, /must be https/],
      ['https://user:pw@hooks.example.com/', PRODUCTION, /credentials/],
      ['https://hooks.example.com/#frag', PRODUCTION, /fragment/],
      ['https://192.168.1.10/x', PRODUCTION, /private or special-use/],
      ['https://169.254.169.254/latest/meta-data', PRODUCTION, /private or special-use/],
      ['https://100.64.0.1/x', PRODUCTION, /private or special-use/],
      ['https://[fd00::1]/x', PRODUCTION, /private or special-use/],
      ['https://[::ffff:10.0.0.1]/x', PRODUCTION, /private or special-use/],
      ['https://localhost/x', PRODUCTION, /loopback/],
      ['gopher://hooks.example.com/', PRODUCTION, /https/],
    ];
    for (const [url, policy, message] of refused) assert.throws(() => checkTargetUrl(url, policy), message, url);
    assert.equal(checkTargetUrl('http://127.0.0.1:9/x', DEVELOPMENT), 'http://127.0.0.1:9/x');
    assert.equal(checkTargetUrl('https://10.1.2.3/x', ALLOWED), 'https://10.1.2.3/x');
  });

  it('refuses a name that resolves to a loopback address at delivery, unless allowed', async () => {
    await assert.rejects(resolve(PRODUCTION, 'localhost'), /resolves to a private or special-use address/);
    assert.match(await resolve(ALLOWED, 'localhost'), /^(127\.|::1)/);
    assert.match(await resolve(DEVELOPMENT, 'localhost'), /^(127\.|::1)/);
    await assert.rejects(
      post('https://localhost:9/x', '{}', {}, PRODUCTION),
      /resolves to a private or special-use address/,
    );
    await assert.rejects(post('https://10.0.0.1/x', '{}', {}, PRODUCTION), /private or special-use/);
  });
});
