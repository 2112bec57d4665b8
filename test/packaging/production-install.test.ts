// The README's production install, done for real: `npm run build` output (built here from the
// current sources into a temporary directory) copied elsewhere, `npm ci --omit=dev` there, and the
// compiled service started with `npm start`. Without any development dependency it serves discovery,
// client_credentials tokens for a client made with the compiled admin CLI, and a password sign-in
// whose access token gets the user's claims from userinfo.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as oidc from 'openid-client';
import type { Browser } from 'playwright-core';
import { authorizationRequest, freePort, launchBrowser } from '../e2e/helpers.ts';
import { commandLines, operatorEnv, ROOT, run, startAndWait, type Running } from './helpers.ts';

const INSTALL_TIMEOUT = 15 * 60_000;

describe('production install: the built directory, npm ci --omit=dev, npm start', { timeout: INSTALL_TIMEOUT }, () => {
  const tmp = mkdtempSync(join(tmpdir(), 'idp-production-'));
  const built = join(tmp, 'built');
  const app = join(tmp, 'srv', 'passkey-idp');
  const dataDir = join(tmp, 'data');
  let url: string;
  let env: Record<string, string>;
  let service: Running | undefined;
  let browser: Browser | undefined;

  /** The compiled admin CLI of the installed copy, through its own `npm run idp`. */
  const idp = (args: string[], input?: string): Record<string, string> =>
    JSON.parse(run('npm', ['run', '--silent', 'idp', '--', ...args, '--json'], app, env, input)) as Record<
      string,
      string
    >;

  before(async () => {
    run(process.execPath, [join(ROOT, 'scripts', 'build.ts'), '--out', built], ROOT);
    mkdirSync(join(tmp, 'srv'));
    cpSync(built, app, { recursive: true });
    mkdirSync(dataDir);
    run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund'], app);
    const port = await freePort();
    url = `http://localhost:${port}`;
    env = operatorEnv({ PORT: String(port), PUBLIC_URL: url, DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
    service = await startAndWait('npm', ['start'], app, env, url);
  });

  after(async () => {
    await browser?.close();
    await service?.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('is installed without development dependencies and carries no TypeScript', () => {
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8'));
    assert.equal(pkg.scripts.prepare, undefined);
    assert.equal(pkg.scripts.build, undefined);
    assert.ok(existsSync(join(app, 'node_modules', 'oidc-provider')));
    // The lock marks what only development needs ("dev": true); a package that a production
    // dependency also needs (yaml, through @fastify/swagger) is rightly installed.
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.keys(pkg.devDependencies ?? {}).filter((d) => lock.packages[`node_modules/${d}`]?.dev);
    assert.ok(devOnly.length > 5, 'the lock names development-only packages');
    for (const dev of devOnly)
      assert.ok(!existsSync(join(app, 'node_modules', dev)), `development dependency ${dev} was installed`);
    assert.ok(existsSync(join(app, 'src', 'main.js')) && existsSync(join(app, 'src', 'main.js.map')));
    assert.ok(!existsSync(join(app, 'src', 'main.ts')));
    // The runtime is the pinned one from the `node` package, whatever Node the machine has.
    assert.match(run(join(app, 'node_modules', '.bin', 'node'), ['--version'], app), /^v24\./);
  });

  it('is bundled, with source maps of the TypeScript for the project’s code only', () => {
    const files = readdirSync(join(app, 'src')).filter((f) => f.endsWith('.js'));
    // a few dozen at most (OpenTelemetry's resource detection alone brings a lazily loaded chunk per
    // platform), not a file for each of the hundreds of modules
    assert.ok(files.length < 40, `a few bundled files, not a file per module: ${files.length}`);
    assert.ok(!files.includes('libraries.js'), 'the build-time entry point of the libraries is not shipped');
    const maps = files.filter((f) => existsSync(join(app, 'src', `${f}.map`)));
    const sources = maps.flatMap(
      (f) => (JSON.parse(readFileSync(join(app, 'src', `${f}.map`), 'utf8')) as { sources: string[] }).sources,
    );
    assert.ok(sources.includes('../../src/app.ts') && sources.includes('../../src/main.ts'), sources.join(' '));
    assert.ok(!sources.some((s) => s.includes('node_modules')), 'no library code in the maps');
    // Where the bundle defines buildApp, the map names src/app.ts and the line that declares it.
    const declared = readFileSync(join(ROOT, 'src', 'app.ts'), 'utf8')
      .split('\n')
      .findIndex((l) => l.startsWith('export async function buildApp('));
    const bundled = maps
      .map((f) => ({
        f,
        line: readFileSync(join(app, 'src', f), 'utf8')
          .split('\n')
          .indexOf('async function buildApp(deps) {'),
      }))
      .find((x) => x.line >= 0);
    assert.ok(bundled, 'buildApp is in a bundled file with a map');
    const map = new SourceMap(JSON.parse(readFileSync(join(app, 'src', `${bundled.f}.map`), 'utf8')));
    const entry = map.findEntry(bundled.line, 0) as { originalSource?: string; originalLine?: number };
    assert.match(entry.originalSource ?? '', /\/src\/app\.ts$/);
    assert.equal(entry.originalLine, declared);
  });

  it('loads the WebAuthn server library, the certificate library and sharp on first use only: none is in what start-up loads', () => {
    const dir = join(app, 'src');
    const read = (file: string) => readFileSync(join(dir, file), 'utf8');
    const staticImports = (file: string) =>
      [...read(file).matchAll(/^(?:import|export)\s(?:[^;]*?\sfrom\s)?"\.\/([\w-]+\.js)";$/gm)].map((m) => m[1]!);
    // main.js switches on the compile cache, then imports the command line, which starts the service
    const commandLine = /import\("\.\/(command-line-[\w-]+\.js)"\)/.exec(read('main.js'))?.[1];
    assert.ok(commandLine, 'main.js imports the command line');
    const loaded = new Set<string>();
    const visit = (file: string) => {
      if (loaded.has(file)) return;
      loaded.add(file);
      for (const next of staticImports(file)) visit(next);
    };
    visit('main.js');
    visit(commandLine);
    assert.ok(loaded.size >= 3, [...loaded].join(' '));
    const library = '// node_modules/@simplewebauthn/server/';
    const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
    assert.ok(
      files.some((f) => !loaded.has(f) && read(f).includes(library)),
      'the library is bundled, in a chunk of its own',
    );
    for (const file of loaded) {
      assert.ok(!read(file).includes(library), `${file} holds the WebAuthn server library`);
      assert.ok(!read(file).includes('// node_modules/@peculiar/x509/'), `${file} holds the certificate library`);
      assert.doesNotMatch(read(file), /^import[^;]*?"sharp";$/m, `${file} imports sharp`);
    }
  });

  it('npm start runs the compiled service with source maps and the heap flags', () => {
    const lines = commandLines(service!.child.pid!);
    const node = lines.find((argv) => argv.includes('serve'));
    assert.ok(node, `no serving process among ${JSON.stringify(lines)}`);
    assert.deepEqual(node.slice(1), [
      '--enable-source-maps',
      '--max-heap-size=256',
      '--max-semi-space-size=8',
      '--min-semi-space-size=8',
      '--no-allocation-site-pretenuring',
      '--heap-growing-percent=100',
      'src/main.js',
      'serve',
    ]);
  });

  it('serves the discovery document with PUBLIC_URL as the issuer', async () => {
    const res = await fetch(`${url}/.well-known/openid-configuration`);
    assert.equal(res.status, 200);
    const discovery = (await res.json()) as Record<string, unknown>;
    assert.equal(discovery.issuer, url);
    assert.equal(discovery.token_endpoint, `${url}/oauth/token`);
  });

  it('serves the SAML metadata, its keys certified by the bundled certificate library on first use', async () => {
    const res = await fetch(`${url}/saml2/idp/metadata`);
    assert.equal(res.status, 200);
    const xml = await res.text();
    const certificates = [...xml.matchAll(/<ds:X509Certificate>([A-Za-z0-9+/=\s]+)<\/ds:X509Certificate>/g)];
    assert.ok(certificates.length >= 2, 'signing and encryption certificates');
    for (const [, base64] of certificates) {
      const certificate = new X509Certificate(Buffer.from(base64!.replace(/\s+/g, ''), 'base64'));
      assert.ok(certificate.verify(certificate.publicKey), 'self-signed with its own key');
    }
  });

  it('serves the files shipped beside the code: page assets, the console script, the API docs, the version', async () => {
    for (const [path, type] of [
      ['/static/style.css', 'text/css'],
      ['/static/sign-in.js', 'text/javascript'],
      ['/static/webauthn-browser.js', 'text/javascript'],
      ['/console/static/console.js', 'text/javascript'],
      ['/docs/static/swagger-ui.css', 'text/css'],
    ] as const) {
      const res = await fetch(`${url}${path}`);
      assert.equal(res.status, 200, path);
      assert.ok(res.headers.get('content-type')?.startsWith(type), `${path}: ${res.headers.get('content-type')}`);
      assert.ok((await res.arrayBuffer()).byteLength > 100, path);
    }
    const version = (JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { version: string }).version;
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.ok(metrics.includes(`idp_info{version="${version}"} 1`), 'the version from the installed package.json');
  });

  it('issues a client_credentials token to a client made with the compiled admin CLI', async () => {
    idp(['org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example University']);
    const client = idp(['client', 'add', '--name', 'Helpdesk', '--scopes', 'passkey.read', '--orgs', '1']);
    const basic = Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64');
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

  it('signs a user in with a password and answers userinfo for her access token', async () => {
    // The organization was added above.
    idp(
      [
        'user',
        'add',
        '--org',
        '1',
        '--eppn',
        'ada@example.org',
        '--name',
        'Ada Lovelace',
        '--email',
        'ada@example.org',
        '--password-stdin',
      ],
      'correct horse battery staple',
    );
    const redirectUri = 'https://portal.example.org/oidc/callback';
    const client = idp([
      'client',
      'add',
      '--name',
      'Course portal',
      '--redirect-uri',
      redirectUri,
      '--groups',
      'userinfo-name email',
      '--first-party',
    ]);
    assert.equal((await fetch(`${url}/openid/userinfo`)).status, 401);
    const config = await oidc.discovery(
      new URL(url),
      client.client_id!,
      undefined,
      oidc.ClientSecretBasic(client.client_secret!),
      { execute: [oidc.allowInsecureRequests] },
    );
    const begun = await authorizationRequest(config, redirectUri, { scope: 'openid profile email' });
    browser = await launchBrowser();
    const page = await browser.newPage();
    await page.goto(begun.url);
    // A first-party client: no consent page. The portal's host does not exist here: the browser's
    // request for the callback is what the portal would receive.
    await page.fill('#username', 'ada@example.org');
    await page.fill('#password', 'correct horse battery staple');
    const callbackSeen = page.waitForRequest((r) => r.url().startsWith(redirectUri));
    await Promise.all([page.waitForEvent('load'), page.click('#password-form button[type=submit]')]);
    // Ada has no passkey: one is offered first (docs/passkey-lifecycle.md). Not now.
    if (await page.locator('#offer-later').count()) await page.click('#offer-later');
    const callback = await callbackSeen;
    const tokens = await oidc.authorizationCodeGrant(config, new URL(callback.url()), {
      pkceCodeVerifier: begun.codeVerifier,
      expectedState: begun.state,
      expectedNonce: begun.nonce,
    });
    const info = await oidc.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub);
    assert.equal(info.name, 'Ada Lovelace');
    assert.equal(info.email, 'ada@example.org');
  });

  it('README documents exactly this install', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Production install'));
    assert.ok(readme.includes('## Production install'), 'README has a Production install section');
    for (const step of ['npm ci', 'cp -r dist', 'npm ci --omit=dev', 'npm start', 'npm run idp --'])
      assert.ok(section.includes(step), `the Production install section shows ${step}`);
  });
});
