// The API reference at /docs, rendered in Chromium: it shows the passkey endpoints with their
// examples, loads nothing from another origin, and runs under its Content-Security-Policy without
// a single violation or failed request.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { launchBrowser, startServer, type E2EServer } from '../e2e/helpers.ts';

describe('the API reference page (/docs)', () => {
  let server: E2EServer;
  let browser: Browser;

  before(async () => {
    server = await startServer('sqlite');
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await server?.close();
  });

  it('is served with a strict Content-Security-Policy on the page and its assets', async () => {
    for (const path of ['/docs', '/docs/static/swagger-ui-bundle.js', '/docs/static/swagger-initializer.js']) {
      const res = await fetch(`${server.url}${path}`);
      assert.equal(res.status, 200, path);
      const csp = res.headers.get('content-security-policy') ?? '';
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.match(csp, /style-src 'self'(;|$)/, path);
      assert.match(csp, /default-src 'none'/, path);
      assert.doesNotMatch(csp, /unsafe-(eval|inline)/, path);
    }
    const page = await (await fetch(`${server.url}/docs`)).text();
    assert.doesNotMatch(page, /<script>|<script [^>]*>[^<\s]/, 'no inline script');
    assert.doesNotMatch(page, /https?:\/\//, 'no absolute URL to load anything from');
  });

  it('renders the passkey endpoints and their examples, with no CSP violation or failed request', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems: string[] = [];
    const foreign: string[] = [];
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (e) => {
        console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
    });
    page.on('request', (r) => {
      const url = r.url();
      if (!url.startsWith(`${server.url}/`) && !url.startsWith('data:')) foreign.push(url);
    });

    await page.goto(`${server.url}/docs`);
    const list = page.locator('.opblock-get[id*="listPasskeys"]').first();
    await list.waitFor({ timeout: 30_000 });
    const pathsShown = await page
      .locator('.opblock-summary-path')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-path')));
    for (const path of ['/2/passkey/{org_id}', '/2/passkey/{org_id}/{id}'])
      assert.ok(pathsShown.includes(path), `${path} in ${pathsShown.join(', ')}`);
    assert.ok(pathsShown.includes('/oauth/token'), 'the authorization server is documented too');

    // Opening the operation shows its parameters and the documented response example.
    await list.locator('.opblock-summary').click();
    await page.locator('.opblock-body .parameters').first().waitFor();
    const body = await list.innerText();
    for (const text of ['org_id', 'per_page', 'Work laptop', 'passkey.read'])
      assert.ok(body.includes(text), `${text} shown`);

    assert.deepEqual(foreign, [], 'nothing loaded from another origin');
    assert.deepEqual(problems, []);
    await context.close();
  });
});
