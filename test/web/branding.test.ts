// Branding: the deployment's BRAND_* settings and an organization's own (`org brand`) on the
// pages, the files they link, the checks every value goes through, and the language switcher.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { cli, dialects, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { contrast } from '../../src/brand.ts';
import { findOrganization } from '../../src/store/directory.ts';
import { listAuditEvents } from '../../src/store/audit.ts';

const PASSWORD = 'correct horse battery staple';
const dir = mkdtempSync(join(tmpdir(), 'idp-brand-'));
// The smallest PNG: a 1x1 transparent pixel.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const SVG =
  '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="40" fill="#0b6e4f"/></svg>';
const file = (name: string, data: Buffer | string) => {
  const path = join(dir, name);
  writeFileSync(path, data);
  return path;
};
const pngFile = file('logo.png', PNG);
const svgFile = file('logo.svg', SVG);
const textFile = file('logo.txt', 'not an image');
const bigFile = file('big.png', Buffer.concat([PNG, Buffer.alloc(101 * 1024)]));

const BASE = { DATABASE_URL: ':memory:', IDP_SECRET: 'x'.repeat(40), PUBLIC_URL: 'https://idp.example.test' };

function refused(env: Record<string, string>, variable: string, message: RegExp) {
  assert.throws(
    () => loadConfig({ ...BASE, ...env }),
    (err: unknown) => err instanceof ConfigError && err.variable === variable && message.test(err.message),
  );
}

describe('BRAND_* settings', () => {
  it('accepts a full brand, normalizing colours and URLs', () => {
    const { brand } = loadConfig({
      ...BASE,
      BRAND_NAME: '  Example University Login ',
      BRAND_COLOR: '#0B6E4F',
      BRAND_COLOR_DARK: '#8cf',
      BRAND_LOGO_FILE: pngFile,
      BRAND_SUPPORT_URL: 'mailto:help@example.org',
      BRAND_PRIVACY_URL: 'https://example.org/privacy',
      BRAND_FOOTER: 'Example University IT',
    });
    assert.equal(brand.name, 'Example University Login');
    assert.equal(brand.color, '#0b6e4f');
    assert.equal(brand.colorDark, '#88ccff');
    assert.deepEqual(brand.logo, { type: 'image/png', data: PNG });
    assert.equal(brand.supportUrl, 'mailto:help@example.org');
    assert.equal(brand.privacyUrl, 'https://example.org/privacy');
    assert.equal(brand.footer, 'Example University IT');
    assert.deepEqual(loadConfig(BASE).brand, {});
  });

  it('an SVG logo is recognized by its root element', () => {
    assert.equal(loadConfig({ ...BASE, BRAND_LOGO_FILE: svgFile }).brand.logo?.type, 'image/svg+xml');
  });

  it('refuses colours that are not hexadecimal or do not stand out from the page', () => {
    refused({ BRAND_COLOR: 'green' }, 'BRAND_COLOR', /#rgb or #rrggbb/);
    refused({ BRAND_COLOR: '#12345' }, 'BRAND_COLOR', /#rgb or #rrggbb/);
    // Yellow on a light page: about 1.0:1.
    refused(
      { BRAND_COLOR: '#ffff00' },
      'BRAND_COLOR',
      /contrast of 1\.\d\d:1 .* at least 4\.5:1, choose a darker colour/,
    );
    refused({ BRAND_COLOR_DARK: '#222222' }, 'BRAND_COLOR_DARK', /choose a lighter colour/);
    // The default accent passes, so the check is not stricter than the service's own colours.
    assert.ok(contrast('#1f4fd1', '#f4f4f6') >= 4.5);
    assert.ok(contrast('#8fb0ff', '#1e1e23') >= 4.5);
  });

  it('refuses links that are not https (or mailto), and http except on localhost', () => {
    refused({ BRAND_SUPPORT_URL: 'javascript:alert(1)' }, 'BRAND_SUPPORT_URL', /https or mailto/);
    refused({ BRAND_PRIVACY_URL: 'http://example.org/privacy' }, 'BRAND_PRIVACY_URL', /http only on localhost/);
    refused({ BRAND_PRIVACY_URL: 'privacy.html' }, 'BRAND_PRIVACY_URL', /absolute/);
    assert.equal(
      loadConfig({ ...BASE, BRAND_SUPPORT_URL: 'http://localhost:3000/help' }).brand.supportUrl,
      'http://localhost:3000/help',
    );
  });

  it('refuses over-long or control-character names and footers', () => {
    refused({ BRAND_NAME: 'n'.repeat(61) }, 'BRAND_NAME', /at most 60 characters/);
    refused({ BRAND_FOOTER: 'f'.repeat(201) }, 'BRAND_FOOTER', /at most 200 characters/);
    refused({ BRAND_NAME: 'Evil\u202eCorp' }, 'BRAND_NAME', /control or formatting/);
  });

  it('refuses a logo file that is missing, too large or not an image', () => {
    refused({ BRAND_LOGO_FILE: join(dir, 'missing.png') }, 'BRAND_LOGO_FILE', /cannot read the logo file .*ENOENT/);
    refused({ BRAND_LOGO_FILE: dir }, 'BRAND_LOGO_FILE', /is not a file/);
    refused({ BRAND_LOGO_FILE: bigFile }, 'BRAND_LOGO_FILE', /at most 100 KiB/);
    refused({ BRAND_LOGO_FILE: textFile }, 'BRAND_LOGO_FILE', /PNG, WebP or SVG/);
  });

  it('a refused value stops start-up with one line naming the variable (a real process)', () => {
    const r = spawnSync(process.execPath, ['src/main.ts', 'serve'], {
      env: { ...process.env, LOG_LEVEL: 'warn', PORT: '0', PUBLIC_URL: 'http://127.0.0.1:1', BRAND_COLOR: '#eeeeee' },
      encoding: 'utf8',
      timeout: 20000,
    });
    assert.equal(r.status, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^configuration error: BRAND_COLOR: the light-scheme colour #eeeeee has a contrast/);
  });
});

/** A cookie jar over inject(). */
function browser(ctx: TestContext, headers: Record<string, string> = {}) {
  const jar = new Map<string, string>();
  const remember = (res: LightMyRequestResponse) => {
    for (const c of res.cookies) jar.set(c.name, c.value);
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  return {
    jar,
    async get(url: string, extra: Record<string, string> = {}) {
      const res = await ctx.app.inject({ method: 'GET', url, headers: { ...headers, cookie: cookie(), ...extra } });
      remember(res);
      return res;
    },
    async post(url: string, form: Record<string, string>) {
      const res = await ctx.app.inject({
        method: 'POST',
        url,
        headers: { ...headers, cookie: cookie(), 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams(form).toString(),
      });
      remember(res);
      return res;
    },
  };
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1];
const linkOf = (body: string, pattern: RegExp) => pattern.exec(body)?.[1]?.replaceAll('&amp;', '&');

for (const dialect of dialects()) {
  describe(`branded pages (${dialect})`, () => {
    let ctx: TestContext;
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);

    before(async () => {
      ctx = await startTestApp(dialect, {
        BRAND_NAME: 'Campus <Login> & Co',
        BRAND_COLOR: '#0b6e4f',
        BRAND_LOGO_FILE: pngFile,
        BRAND_SUPPORT_URL: 'https://help.example.org/?a=1&b=2',
        BRAND_PRIVACY_URL: 'https://example.org/privacy',
        BRAND_FOOTER: 'Run by <Example> IT',
      });
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      await seedOrg(ctx, 2, 'other.org', 'Other College');
      await seedUser(ctx, 1, 'ada@example.org', { name: 'Ada', password: PASSWORD });
      await seedUser(ctx, 2, 'bob@other.org', { name: 'Bob', password: PASSWORD });
    });
    after(() => ctx.close());

    async function signedIn(eppn: string) {
      const b = browser(ctx);
      const page = await b.get('/account');
      const res = await b.post('/account/login', { _csrf: csrfOf(page.body)!, username: eppn, password: PASSWORD });
      assert.equal(res.statusCode, 303, res.body);
      return b;
    }

    it('the sign-in page wears the deployment brand, every value escaped', async () => {
      const res = await browser(ctx).get('/account');
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /<title>Sign in – Campus &lt;Login&gt; &amp; Co<\/title>/);
      assert.match(
        res.body,
        /<header class="site"><img class="site-logo" src="\/brand\/site\/logo\?v=[\w-]{16}" alt=""><span class="site-name">Campus &lt;Login&gt; &amp; Co<\/span><\/header>/,
      );
      assert.match(res.body, /<link rel="stylesheet" href="\/brand\/site\/style\.css\?v=[\w-]{16}">/);
      assert.match(res.body, /<p class="site-footer-text">Run by &lt;Example&gt; IT<\/p>/);
      assert.match(res.body, /<a href="https:\/\/help\.example\.org\/\?a=1&amp;b=2">Help<\/a>/);
      assert.match(res.body, /<a href="https:\/\/example\.org\/privacy">Privacy policy<\/a>/);
      assert.doesNotMatch(res.body, /<Login>|<Example>/);
    });

    it('serves the colours and the logo at versioned URLs, with the headers an image needs', async () => {
      const page = (await browser(ctx).get('/account')).body;
      const css = await ctx.app.inject({ url: linkOf(page, /href="(\/brand\/site\/style\.css[^"]*)"/)! });
      assert.equal(css.statusCode, 200);
      assert.match(css.headers['content-type'] as string, /^text\/css/);
      assert.match(css.body, /--accent:#0b6e4f;--accent-fg:#ffffff/);
      assert.doesNotMatch(css.body, /prefers-color-scheme/, 'no dark colour set: the default dark accent stays');
      assert.match(css.headers['cache-control'] as string, /immutable/);

      const logo = await ctx.app.inject({ url: linkOf(page, /src="(\/brand\/site\/logo[^"]*)"/)! });
      assert.equal(logo.statusCode, 200);
      assert.equal(logo.headers['content-type'], 'image/png');
      assert.deepEqual(logo.rawPayload, PNG);
      assert.equal(logo.headers['x-content-type-options'], 'nosniff');
      assert.match(logo.headers['content-security-policy'] as string, /sandbox/);

      const stale = await ctx.app.inject({ url: '/brand/site/logo?v=old' });
      assert.equal(stale.headers['cache-control'], 'no-cache');
      for (const url of [
        '/brand/org-1/logo',
        '/brand/org-99/style.css',
        '/brand/../logo',
        '/brand/org-0/logo',
        '/brand/x/style.css',
      ])
        assert.equal((await ctx.app.inject({ url })).statusCode, 404, url);
    });

    it('the pages oidc-provider renders and the not-found page wear it too', async () => {
      const error = await ctx.app.inject({
        url: '/oauth/authorization?client_id=nobody&response_type=code&scope=openid',
      });
      assert.match(error.body, /<span class="site-name">Campus &lt;Login&gt; &amp; Co<\/span>/);
      const missing = await ctx.app.inject({ url: '/no/such/page', headers: { accept: 'text/html' } });
      assert.equal(missing.statusCode, 404);
      assert.match(missing.body, /<span class="site-name">Campus/);
    });

    it("`org brand` sets an organization's brand over the deployment's, for its users' pages", async () => {
      const svg = join(dir, 'org.svg');
      writeFileSync(svg, SVG);
      const r = await run(
        'org',
        'brand',
        '1',
        '--name',
        'Example University',
        '--color',
        '#7a1f5c',
        '--color-dark',
        '#f0a8d8',
        '--logo-file',
        svg,
        '--footer',
        'Example University IT services',
        '--json',
      );
      assert.equal(r.code, 0, r.err);
      const out = JSON.parse(r.out) as { id: number; brand: Record<string, unknown> };
      assert.equal(out.id, 1);
      assert.equal(out.brand.name, 'Example University');
      assert.deepEqual(out.brand.logo, { type: 'image/svg+xml', bytes: Buffer.byteLength(SVG) });
      // What the organization set; the deployment's links stay on its pages (below).
      assert.equal(out.brand.supportUrl, undefined);

      const ada = await signedIn('ada@example.org');
      const page = (await ada.get('/account')).body;
      assert.match(page, /<span class="site-name">Example University<\/span>/);
      assert.match(page, /Example University IT services/);
      assert.match(page, /<a href="https:\/\/help\.example\.org\/\?a=1&amp;b=2">Help<\/a>/);
      const css = await ctx.app.inject({ url: linkOf(page, /href="(\/brand\/org-1\/style\.css[^"]*)"/)! });
      assert.match(css.body, /--accent:#7a1f5c/);
      assert.match(css.body, /prefers-color-scheme: dark\)\{:root\{--accent:#f0a8d8;--accent-fg:#000000/);
      const logo = await ctx.app.inject({ url: linkOf(page, /src="(\/brand\/org-1\/logo[^"]*)"/)! });
      assert.equal(logo.headers['content-type'], 'image/svg+xml');
      assert.equal(logo.body, SVG);

      // Another organization's user keeps the deployment's brand.
      const bob = await signedIn('bob@other.org');
      assert.match((await bob.get('/account')).body, /<span class="site-name">Campus &lt;Login&gt; &amp; Co<\/span>/);

      const [event] = await listAuditEvents(ctx.store.db, { action: 'org.brand', subject: '1' });
      assert.ok(event);
      assert.deepEqual(JSON.parse(event.details), {
        set: ['color', 'colorDark', 'footer', 'logo', 'name'],
        cleared: false,
        logo: { type: 'image/svg+xml', bytes: Buffer.byteLength(SVG) },
      });
    });

    it('`org brand` refuses bad values, naming the option, and changes nothing', async () => {
      const before = (await findOrganization(ctx.store.db, 1))!.branding;
      const events = (await listAuditEvents(ctx.store.db, { action: 'org.brand' })).length;
      const cases: [string[], RegExp][] = [
        [['--color', 'red'], /--color: the colour must be #rgb or #rrggbb/],
        [['--color', '#eeeeee'], /--color: the light-scheme colour #eeeeee has a contrast of/],
        [['--color-dark', '#000080'], /--color-dark: .* choose a lighter colour/],
        [['--name', 'ok', '--privacy-url', 'ftp://example.org/'], /--privacy-url: .*https/],
        [['--logo-file', textFile], /--logo-file: the logo must be a PNG, WebP or SVG image/],
        [['--logo-file', bigFile], /--logo-file: the logo must be at most 100 KiB/],
        [['--footer', 'a\u0007b'], /--footer: .*control/],
        [[], /nothing to set/],
      ];
      for (const [args, message] of cases) {
        const r = await run('org', 'brand', '1', ...args);
        assert.notEqual(r.code, 0, args.join(' '));
        assert.match(r.err, message);
        assert.doesNotMatch(r.err, /\bat .*\.ts:\d+/);
      }
      const unknown = await run('org', 'brand', '99', '--name', 'Nobody');
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.err, /organization 99 not found/);
      assert.equal((await findOrganization(ctx.store.db, 1))!.branding, before);
      assert.equal((await listAuditEvents(ctx.store.db, { action: 'org.brand' })).length, events);
    });

    it('`org brand --clear` goes back to the deployment brand; `org list` says which are branded', async () => {
      const listed = JSON.parse((await run('org', 'list', '--json')).out) as Record<string, unknown>[];
      assert.deepEqual(
        listed.map((o) => [o.id, o.branded, 'branding' in o]),
        [
          [1, true, false],
          [2, false, false],
        ],
      );
      const r = await run('org', 'brand', '1', '--clear');
      assert.equal(r.code, 0, r.err);
      assert.equal((await findOrganization(ctx.store.db, 1))!.branding, null);
      const ada = await signedIn('ada@example.org');
      const page = (await ada.get('/account')).body;
      assert.match(page, /<span class="site-name">Campus &lt;Login&gt; &amp; Co<\/span>/);
      assert.match(page, /\/brand\/site\/style\.css/);
      assert.equal((await ctx.app.inject({ url: '/brand/org-1/style.css' })).statusCode, 404);
    });

    it('the language switcher remembers the choice and returns to the page', async () => {
      const b = browser(ctx, { 'accept-language': 'en' });
      const page = (await b.get('/account')).body;
      assert.match(page, /<html lang="en">/);
      assert.match(page, /<nav class="languages" aria-label="Language">/);
      assert.match(
        page,
        /<a href="\/language\/en\?return=%2Faccount" lang="en" hreflang="en" aria-current="true">English<\/a>/,
      );
      const link = linkOf(page, /<a href="(\/language\/nb\?return=[^"]+)"/)!;

      const chosen = await b.get(link);
      assert.equal(chosen.statusCode, 303);
      assert.equal(chosen.headers.location, '/account');
      const set = String(chosen.headers['set-cookie']);
      assert.match(set, /^lang=nb;/);
      assert.match(set, /HttpOnly/);
      assert.match(set, /SameSite=Lax/);
      assert.match(set, /Secure/);

      const after = (await b.get('/account')).body;
      assert.match(after, /<html lang="nb">/, 'the choice wins over Accept-Language');
      assert.match(after, /<nav class="languages" aria-label="Språk">/);
      assert.match(after, /aria-current="true">Norsk bokmål</);
    });

    it('the switcher returns only to a path on this site', async () => {
      const cases: [string, string][] = [
        ['/language/nb?return=%2Faccount%3Fdone%3Dadded', '/account?done=added'],
        ['/language/nb?return=%2F%2Fevil.example%2F', '/account'],
        ['/language/nb?return=https%3A%2F%2Fevil.example%2F', '/account'],
        ['/language/nb?return=%2F%5Cevil.example', '/account'],
        ['/language/nb?return=%2Fa%0D%0ALocation%3A%20x', '/account'],
        ['/language/nb', '/account'],
      ];
      for (const [url, location] of cases) {
        const res = await ctx.app.inject({ url });
        assert.equal(res.statusCode, 303, url);
        assert.equal(res.headers.location, location, url);
      }
      const unknown = await ctx.app.inject({ url: '/language/de?return=%2Faccount', headers: { accept: 'text/html' } });
      assert.equal(unknown.statusCode, 404);
      assert.equal(unknown.headers['set-cookie'], undefined);
      // A forged cookie value is ignored.
      const forged = await ctx.app.inject({ url: '/account', headers: { cookie: 'lang=de', 'accept-language': 'nb' } });
      assert.match(forged.body, /<html lang="nb">/);
    });
  });
}
