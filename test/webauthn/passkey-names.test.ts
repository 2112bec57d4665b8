// Default passkey names from the AAGUID or the User-Agent, and the names a user may choose.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { browserName, defaultPasskeyLabel, validLabel } from '../../src/webauthn/passkey-names.ts';
import { MAX_LABEL, ZERO_AAGUID } from '../../src/webauthn/formats.ts';

const GOOGLE_PM = 'ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4';

describe('passkey names', () => {
  it('names the browser and platform from common User-Agent strings', () => {
    const cases: [string, string | undefined][] = [
      [
        'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
        'Chrome on Linux',
      ],
      [
        'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36',
        'Chrome on Linux',
      ],
      [
        'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0',
        'Edge on Windows',
      ],
      [
        'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15',
        'Safari on macOS',
      ],
      [
        'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1',
        'Safari on iPhone',
      ],
      [
        'Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1',
        'Chrome on iPhone',
      ],
      [
        'Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36',
        'Samsung Internet on Android',
      ],
      ['Mozilla/5.0 (Android 14; Mobile; rv:132.0) Gecko/132.0 Firefox/132.0', 'Firefox on Android'],
      [
        'Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
        'Chrome on ChromeOS',
      ],
      ['curl/8.5.0', undefined],
    ];
    for (const [ua, name] of cases) assert.equal(browserName(ua), name, ua);
    assert.equal(browserName(undefined), undefined);
    assert.equal(browserName('x'.repeat(5000)), undefined);
  });

  it('prefers the authenticator model, then the browser, then a plain word', () => {
    const chrome =
      'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
    assert.equal(defaultPasskeyLabel(GOOGLE_PM, chrome), 'Google Password Manager');
    assert.equal(defaultPasskeyLabel(ZERO_AAGUID, chrome), 'Chrome on Linux');
    assert.equal(defaultPasskeyLabel(ZERO_AAGUID, undefined), 'Passkey');
  });

  it('accepts printable names of 1 to 100 characters, trimmed', () => {
    assert.equal(validLabel('  Work laptop  '), 'Work laptop');
    assert.equal(validLabel('Jobb-PC 👩‍💻 Ærlig'), 'Jobb-PC 👩‍💻 Ærlig');
    assert.equal(validLabel('é'.repeat(MAX_LABEL)), 'é'.repeat(MAX_LABEL));
    assert.equal(validLabel('😀'.repeat(MAX_LABEL)), '😀'.repeat(MAX_LABEL), 'counted in characters, not UTF-16 units');
    for (const bad of [
      '',
      '   ',
      'x'.repeat(MAX_LABEL + 1),
      'tab\there',
      'new\nline',
      'nul\u0000',
      'del\u007f',
      'evil\u202Egnp.exe',
      'iso\u2066late',
      'line\u2028sep',
      'private\uE000',
      'b\uFEFFom',
      'lone\uD800',
    ]) {
      assert.equal(validLabel(bad), undefined, JSON.stringify(bad));
    }
    assert.equal(validLabel(42), undefined);
    assert.equal(validLabel(['a']), undefined);
  });
});
