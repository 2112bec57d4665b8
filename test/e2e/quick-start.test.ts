// The README's quick start, followed as written: its admin commands run through a shell exactly as
// they appear (with `npm run idp --` standing for the admin CLI), the service runs as its own
// process, and a stock relying party (openid-client, asking for the standard `openid profile email`
// scopes) signs Ada in with her password in Chromium.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oidc from 'openid-client';
import type { Browser, Page } from 'playwright-core';
import { authorizationRequest, freePort, launchBrowser, submitPassword } from './helpers.ts';

const ROOT = join(import.meta.dirname, '..', '..');

/** The shell code blocks of a README section: from its heading to the next heading outside a code block. */
function codeBlocksUnder(heading: string): string[] {
  const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n');
  const at = lines.indexOf(heading);
  assert.ok(at >= 0, `README has a '${heading}' section`);
  const blocks: string[] = [];
  let block: string[] | undefined;
  for (const line of lines.slice(at + 1)) {
    if (block === undefined && /^#{1,6} /.test(line)) break;
    if (line.startsWith('```')) {
      if (block) blocks.push(block.join('\n'));
      block = block ? undefined : [];
    } else block?.push(line);
  }
  return blocks;
}

/** The admin commands of a block (continuation lines joined); curl and npm ci/start are done by the test itself. */
function adminCommands(block: string): string[] {
  return block
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => /^(npm run idp|printf .*\| *npm run idp)/.test(line));
}

describe('README quick start with a stock relying party', () => {
  const dir = mkdtempSync(join(tmpdir(), 'idp-quickstart-'));
  const env = { ...process.env, DATA_DIR: dir, LOG_LEVEL: 'warn' } as Record<string, string>;
  delete env.DATABASE_URL;
  delete env.IDP_SECRET;
  let url: string;
  let service: ChildProcess;
  let browser: Browser;
  let page: Page;

  /** Runs README lines through bash, `npm run idp --` being the admin CLI of this checkout. */
  function shell(lines: string[]): string {
    const script = [`npm() { shift 3; "${process.execPath}" src/main.ts "$@"; }`, 'set -e', ...lines].join('\n');
    const run = spawnSync('bash', ['-c', script], { cwd: ROOT, env, encoding: 'utf8' });
    assert.equal(run.status, 0, `README commands failed: ${run.stderr}`);
    return run.stdout;
  }

  const field = (output: string, name: string) =>
    output.match(new RegExp(`^${name}\\s+(\\S+)`, 'm'))?.[1] ?? assert.fail(`no ${name} in ${output}`);

  before(async () => {
    const port = await freePort();
    url = `http://localhost:${port}`;
    env.PORT = String(port);
    service = spawn(process.execPath, ['src/main.ts', 'serve'], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    service.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // Ready when /readyz answers; bounded, and a service that exits fails at once.
    for (let i = 0; ; i++) {
      if (service.exitCode !== null) assert.fail(`the service exited (${service.exitCode}): ${stderr}`);
      if (i === 200) assert.fail(`the service did not become ready: ${stderr}`);
      const ready = await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    browser = await launchBrowser();
    page = await browser.newPage();
  });

  after(async () => {
    await browser?.close();
    if (service && service.exitCode === null) {
      const exited = new Promise((resolve) => service.once('exit', resolve));
      service.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('the API client of the quick start gets a passkey API token', async () => {
    const [block] = codeBlocksUnder('## Quick start').filter((b) => b.includes('client add'));
    const out = shell(adminCommands(block!));
    const basic = Buffer.from(`${field(out, 'client_id')}:${field(out, 'client_secret')}`).toString('base64');
    const token = await fetch(`${url}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&scope=passkey.read',
    });
    assert.equal(token.status, 200);
    const { access_token } = (await token.json()) as { access_token: string };
    const list = await fetch(`${url}/2/passkey/1`, { headers: { authorization: `Bearer ${access_token}` } });
    assert.equal(list.status, 200);
    assert.deepEqual(await list.json(), []);
  });

  it('a relying party asking for openid profile email signs Ada in and gets her name and email', async () => {
    const [block] = codeBlocksUnder('### Signing people in to an application');
    // The organization was added above ("if not done above").
    const out = shell(adminCommands(block!).filter((line) => !line.includes('org add')));
    const redirectUri = block!.match(/--redirect-uri (\S+)/)![1]!;
    const config = await oidc.discovery(
      new URL(url),
      field(out, 'client_id'),
      undefined,
      oidc.ClientSecretBasic(field(out, 'client_secret')),
      {
        execute: [oidc.allowInsecureRequests],
      },
    );
    const begun = await authorizationRequest(config, redirectUri, { scope: 'openid profile email' });
    await page.goto(begun.url);
    const password = block!.match(/printf '%s\\n' '([^']+)'/)![1]!;
    await submitPassword(page, 'ada@example.org', password);
    // Not a first-party client: the consent page names what it will receive.
    // The portal's host does not exist here: the browser's request for the callback is what the
    // application would receive.
    const [callback] = await Promise.all([
      page.waitForRequest((r) => r.url().startsWith(redirectUri)),
      page.click('button[name=decision][value=allow]'),
    ]);
    const tokens = await oidc.authorizationCodeGrant(config, new URL(callback.url()), {
      pkceCodeVerifier: begun.codeVerifier,
      expectedState: begun.state,
      expectedNonce: begun.nonce,
    });
    assert.deepEqual(tokens.scope?.split(' ').sort(), ['email', 'openid', 'profile']);
    const sub = tokens.claims()!.sub;
    const info = await oidc.fetchUserInfo(config, tokens.access_token, sub);
    assert.equal(info.name, 'Ada Lovelace');
    assert.equal(info.email, 'ada@example.org');
  });
});
