// The messages themselves: escaped, self-contained, in both languages; and the SMTP settings' checks.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildMessage } from '../../src/events/mail-messages.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

describe('e-mail messages', () => {
  const hostile = {
    locale: 'en' as const,
    brand: { name: '<script>alert(1)</script> & "Co"', color: '#1a56b0', footer: '<img src=x onerror=alert(1)>' },
    orgName: 'unused',
    eppn: 'ada"><b>@example.org',
    email: 'ada@mail.example',
  };

  it('escapes every value in the HTML part', () => {
    const m = buildMessage({
      ...hostile,
      kind: 'invitation',
      url: 'https://idp.example.test/recover/a"b<c',
      expiresAt: 0,
    });
    assert.doesNotMatch(m.html, /<script>|<img src=x|<b>@|a"b<c/);
    assert.match(m.html, /&lt;script&gt;alert\(1\)&lt;\/script&gt; &amp; &quot;Co&quot;/);
    assert.match(m.subject, /Create your passkey for <script>/, 'the subject is plain text');
    assert.match(m.text, /https:\/\/idp\.example\.test\/recover\/a"b<c/, 'the text part is plain text');
  });

  it('loads nothing from elsewhere: the logo travels inside the message', () => {
    const m = buildMessage({
      ...hostile,
      brand: { name: 'Example', logo: { type: 'image/png', data: PNG } },
      kind: 'notification',
      notice: 'passkey_added',
      by: 'helpdesk',
      at: Date.UTC(2026, 0, 15, 10, 30),
    });
    assert.match(m.html, /<img src="cid:logo@idp"/);
    assert.deepEqual(
      m.attachments.map((a) => [a.cid, a.contentType]),
      [['logo@idp', 'image/png']],
    );
    for (const [, url] of m.html.matchAll(/(?:src|href)="([^"]*)"/g)) assert.ok(url!.startsWith('cid:'), url);
    assert.doesNotMatch(m.html, /url\(|@import|<link|<script/);
    assert.match(m.text, /When: 15 Jan 2026, 10:30 UTC/);
    assert.match(m.text, /By: your organization’s helpdesk/);
  });

  it('speaks Norwegian Bokmål', () => {
    const m = buildMessage({
      ...hostile,
      locale: 'nb',
      kind: 'recovery',
      url: 'https://x.test/recover/t',
      expiresAt: 0,
    });
    assert.match(m.subject, /^Registrer en ny passnøkkel for /);
    assert.match(m.html, /<html lang="nb">/);
  });
});

describe('SMTP settings', () => {
  const base = { PUBLIC_URL: 'http://localhost:3000', IDP_SECRET: 'test-secret-0123456789-abcdefghijklmnop' };

  it('takes smtp:// and smtps:// with a From', () => {
    const c = loadConfig({
      ...base,
      SMTP_URL: 'smtps://u:p%40ss@mail.example:465',
      SMTP_FROM: 'IdP <idp@example.org>',
    });
    assert.equal(c.smtpUrl, 'smtps://u:p%40ss@mail.example:465');
    assert.equal(c.smtpFrom, 'IdP <idp@example.org>');
    assert.equal(loadConfig(base).smtpUrl, undefined);
  });

  it('refuses bad values clearly, never repeating the URL', () => {
    for (const [env, message] of [
      [{ SMTP_URL: 'http://mail.example', SMTP_FROM: 'a@b.c' }, /smtp:\/\/ or smtps:\/\//],
      [{ SMTP_URL: 'smtp://user:secret@', SMTP_FROM: 'a@b.c' }, /not a URL/],
      [{ SMTP_URL: 'smtp://mail.example/path', SMTP_FROM: 'a@b.c' }, /must not have a path/],
      [{ SMTP_URL: 'smtp://mail.example' }, /SMTP_FROM: is required/],
      [{ SMTP_URL: 'smtp://mail.example', SMTP_FROM: 'not an address' }, /SMTP_FROM/],
      [{ SMTP_URL: 'smtp://mail.example', SMTP_FROM: 'a@b.c\r\nBcc: x@y.z' }, /SMTP_FROM/],
    ] as const) {
      assert.throws(
        () => loadConfig({ ...base, ...env }),
        (err: unknown) => err instanceof ConfigError && message.test(err.message) && !err.message.includes('secret'),
        JSON.stringify(env),
      );
    }
  });
});
