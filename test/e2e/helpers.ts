// Browser and relying-party fixtures: a real listening server, headless Chromium with a WebAuthn
// virtual authenticator, and an openid-client relying party with its own callback server.
import { after } from 'node:test';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import * as oidc from 'openid-client';
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose';
import type { Dialect, Store } from '../../src/store/index.ts';
import type { App } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import type { Keyring } from '../../src/crypto.ts';
import { pickFreePort, seedClient, startTestApp } from '../helpers.ts';
import type { NewClient } from '../../src/clients/index.ts';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  // Chromium's renderer processes are most of the suite's CPU: each new site and each new context
  // starts one, and starting one costs the better part of a second on a small machine. Without
  // site isolation (a defence against the renderer being compromised, which is not what these tests
  // are about) and with a low limit, pages of a context share a process: about a quarter less CPU.
  // What the pages do (cookies, frames, CORS, storage per origin) is the same either way.
  '--disable-site-isolation-trials',
  '--renderer-process-limit=1',
];

/** A loopback port free now, outside the range outgoing connections draw from (test/helpers.ts). */
export const freePort = pickFreePort;

export interface E2EServer extends App {
  /** PUBLIC_URL: http://localhost:<port> */
  url: string;
  config: Config;
  store: Store;
  keys: Keyring;
  dialect: Dialect;
  close(): Promise<void>;
}

/**
 * The whole service listening on 127.0.0.1 with PUBLIC_URL http://localhost:<port>. The port is
 * chosen before the service is built (PUBLIC_URL names it), so a test running in parallel may take
 * it in between: a taken port is replaced by another, a few times.
 */
export async function startServer(
  dialect: Dialect,
  env: Record<string, string> = {},
  options: { now?: () => number } = {},
): Promise<E2EServer> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const url = `http://localhost:${port}`;
    try {
      return {
        ...(await startTestApp(dialect, { PUBLIC_URL: url, PORT: String(port), ...env }, { ...options, listen: port })),
        url,
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 5) throw err;
    }
  }
}

/**
 * The test file's Chromium, started by the first caller and closed after the file's last test:
 * starting one costs seconds of CPU, and most files start one per database. Each caller gets its
 * own view of it, whose close() closes the contexts (and pages) it opened, so what one suite leaves
 * behind never reaches the next; contexts share nothing (cookies, storage, cache) among themselves.
 */
let shared: Promise<Browser> | undefined;

after(async () => {
  const browser = await shared?.catch(() => undefined);
  shared = undefined;
  await browser?.close();
});

export async function launchBrowser(): Promise<Browser> {
  shared ??= chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const browser = await shared.catch((err: unknown) => {
    shared = undefined;
    throw err;
  });
  const opened = new Set<BrowserContext>();
  const newContext: Browser['newContext'] = async (options) => {
    const context = await browser.newContext(options);
    opened.add(context);
    context.once('close', () => opened.delete(context));
    return context;
  };
  const view: Partial<Browser> = {
    newContext,
    // like Browser.newPage: a context of its own, closed with the page
    newPage: async (options) => {
      const context = await newContext(options);
      const page = await context.newPage();
      page.once('close', () => void context.close().catch(() => {}));
      return page;
    },
    close: async () => {
      await Promise.all([...opened].map((context) => context.close().catch(() => {})));
    },
  };
  return new Proxy(browser, {
    get: (target, name) => {
      if (Object.hasOwn(view, name)) return view[name as keyof Browser];
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

export interface VirtualAuthenticator {
  cdp: CDPSession;
  authenticatorId: string;
  credentials(): Promise<
    {
      credentialId: string;
      rpId: string;
      privateKey: string;
      signCount: number;
      userHandle?: string;
      isResidentCredential: boolean;
    }[]
  >;
}

/** A platform authenticator with user verification and resident keys, answering at once. */
export async function addVirtualAuthenticator(
  page: Page,
  options: { /** a synced passkey provider: credentials are backup eligible and backed up */ synced?: boolean } = {},
): Promise<VirtualAuthenticator> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
      ...(options.synced ? { defaultBackupEligibility: true, defaultBackupState: true } : {}),
    },
  });
  return {
    cdp,
    authenticatorId,
    credentials: async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials as any,
  };
}

/** Copies the credentials into another authenticator (another browser context, another device).
 * A copy keeps its own sign counter: give signCount when the original has been used since. */
export async function copyCredential(
  from: VirtualAuthenticator,
  to: VirtualAuthenticator,
  signCount?: number,
): Promise<void> {
  for (const credential of await from.credentials()) {
    await to.cdp.send('WebAuthn.addCredential', {
      authenticatorId: to.authenticatorId,
      credential: { ...credential, ...(signCount === undefined ? {} : { signCount }) },
    });
  }
}

/**
 * Chromium's virtual authenticator answers a conditional (autofill) request at once, where a
 * person would pick the passkey from the username field's suggestions. Pages of a context given
 * this script see no autofill support, so only the "Sign in with a passkey" button starts one.
 */
export async function withoutPasskeyAutofill(context: BrowserContext): Promise<void> {
  await context.addInitScript(() => {
    if (typeof PublicKeyCredential !== 'undefined')
      Object.defineProperty(PublicKeyCredential, 'isConditionalMediationAvailable', { value: async () => false });
  });
}

export interface RelyingParty {
  clientId: string;
  secret: string;
  redirectUri: string;
  postLogoutRedirectUri: string;
  config: oidc.Configuration;
  /** served by the callback server; registered when startRelyingParty was asked to */
  backchannelLogoutUri: string;
  frontchannelLogoutUri: string;
  /** back-channel logout tokens received, each verified as OIDC Back-Channel Logout 1.0 says */
  logouts: ReceivedLogout[];
  /** the URLs (path and query) the browser loaded of the front-channel logout URI */
  frontchannelLoads: URL[];
  /** answer the next n back-channel logout POSTs with a 500 (after verifying them) */
  failBackchannel(n: number): void;
  /** an authorization URL with PKCE, state and nonce, and what finishing it needs */
  begin(params?: Record<string, string>): Promise<Begun>;
  /** exchanges the code in callbackUrl; openid-client validates the ID token */
  finish(callbackUrl: string, begun: Begun): Promise<oidc.TokenEndpointResponse & oidc.TokenEndpointResponseHelpers>;
  close(): Promise<void>;
}

export type ReceivedLogout =
  | { ok: true; claims: JWTPayload & { sid?: string; events?: Record<string, unknown> }; answered: number }
  | { ok: false; error: string };

const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** What a relying party checks of a logout token (OIDC Back-Channel Logout 1.0, section 2.6). */
async function verifyLogoutToken(
  server: E2EServer,
  clientId: string,
  jwks: ReturnType<typeof createRemoteJWKSet>,
  token: string,
): Promise<JWTPayload & { sid?: string; events?: Record<string, unknown> }> {
  const { payload } = await jwtVerify<{ sid?: string; events?: Record<string, unknown> }>(token, jwks, {
    issuer: server.url,
    audience: clientId,
    typ: 'logout+jwt',
    maxTokenAge: '2 minutes',
    requiredClaims: ['iat', 'jti', 'events'],
  });
  if (typeof payload.events?.[BACKCHANNEL_EVENT] !== 'object') throw new Error('no back-channel logout event');
  if (!payload.sub && !payload.sid) throw new Error('neither sub nor sid');
  if ('nonce' in payload) throw new Error('a logout token must not have a nonce');
  return payload;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export interface Begun {
  url: string;
  codeVerifier: string;
  state: string;
  nonce: string;
}

/** An authorization request with PKCE (S256), state and nonce, asking for `openid` unless params say otherwise. */
export async function authorizationRequest(
  config: oidc.Configuration,
  redirectUri: string,
  params: Record<string, string> = {},
): Promise<Begun> {
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid',
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...params,
  });
  return { url: url.href, codeVerifier, state, nonce };
}

/** Registers a confidential authorization-code client and serves its redirect URIs (and, when
 * `logout` asks, its back- and front-channel logout URIs). */
export async function startRelyingParty(
  server: E2EServer,
  client: Partial<NewClient> = {},
  logout: { backchannel?: boolean; frontchannel?: boolean } = {},
): Promise<RelyingParty> {
  const logouts: ReceivedLogout[] = [];
  const frontchannelLoads: URL[] = [];
  let failing = 0;
  let clientId = '';
  const jwks = createRemoteJWKSet(new URL(`${server.url}/openid/jwks`));
  async function backchannel(req: IncomingMessage): Promise<number> {
    try {
      const token = new URLSearchParams(await readBody(req)).get('logout_token') ?? '';
      const claims = await verifyLogoutToken(server, clientId, jwks, token);
      const answered = failing > 0 ? (failing--, 500) : 200;
      logouts.push({ ok: true, claims, answered });
      return answered;
    } catch (err) {
      logouts.push({ ok: false, error: err instanceof Error ? err.message : String(err) });
      return 400;
    }
  }
  const callback: Server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/backchannel-logout') {
      void backchannel(req).then((status) => {
        res.writeHead(status, { 'cache-control': 'no-store' });
        res.end();
      });
      return;
    }
    if (req.url?.startsWith('/frontchannel-logout')) {
      frontchannelLoads.push(new URL(req.url, 'http://rp.invalid'));
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end('<!doctype html><title>Signed out</title>');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      `<!doctype html><title>Relying party</title><p id="rp">${req.url?.startsWith('/callback') ? 'callback' : 'signed out'}</p>`,
    );
  });
  await new Promise<void>((resolve) => callback.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(callback.address() as AddressInfo).port}`;
  const redirectUri = `${base}/callback`;
  const postLogoutRedirectUri = `${base}/signed-out`;
  const backchannelLogoutUri = `${base}/backchannel-logout`;
  const frontchannelLogoutUri = `${base}/frontchannel-logout`;
  const seeded = await seedClient(server, {
    name: 'Example Relying Party',
    redirectUris: [redirectUri],
    postLogoutRedirectUris: [postLogoutRedirectUri],
    ...(logout.backchannel ? { backchannelLogoutUri } : {}),
    ...(logout.frontchannel ? { frontchannelLogoutUri } : {}),
    ...client,
  });
  clientId = seeded.clientId;
  const secret = seeded.secret;
  const config = await oidc.discovery(new URL(server.url), clientId, undefined, oidc.ClientSecretBasic(secret), {
    execute: [oidc.allowInsecureRequests],
  });
  return {
    clientId,
    secret,
    redirectUri,
    postLogoutRedirectUri,
    config,
    backchannelLogoutUri,
    frontchannelLogoutUri,
    logouts,
    frontchannelLoads,
    failBackchannel: (n) => void (failing = n),
    begin: (params = {}) => authorizationRequest(config, redirectUri, params),
    finish(callbackUrl, begun) {
      return oidc.authorizationCodeGrant(config, new URL(callbackUrl), {
        pkceCodeVerifier: begun.codeVerifier,
        expectedState: begun.state,
        expectedNonce: begun.nonce,
        idTokenExpected: true,
      });
    },
    close: () => new Promise<void>((resolve) => callback.close(() => resolve())),
  };
}

/**
 * Fills and submits the password form of the sign-in page the browser is on. A user without a
 * passkey is then offered one (docs/passkey-lifecycle.md): "Not now", unless the test keeps the offer.
 */
export async function submitPassword(
  page: Page,
  username: string,
  password: string,
  { keepOffer = false }: { keepOffer?: boolean } = {},
): Promise<void> {
  await page.fill('#username', username);
  await page.fill('#password', password);
  // The next document's load event: waitForLoadState would settle at once on the current page.
  await Promise.all([page.waitForEvent('load'), page.click('#password-form button[type=submit]')]);
  if (!keepOffer && (await page.locator('#offer-later').count()))
    await Promise.all([page.waitForEvent('load'), page.click('#offer-later')]);
}

/**
 * The relying party's authorization request, a password sign-in (and consent, when asked) in the
 * browser, and the code exchange: resolves with the validated token response.
 */
export async function passwordSignInThroughRelyingParty(
  page: Page,
  rp: RelyingParty,
  username: string,
  password: string,
  params: Record<string, string> = {},
) {
  const begun = await rp.begin(params);
  await page.goto(begun.url);
  await submitPassword(page, username, password);
  // After the password: the consent page (when asked) or the application, told apart by what the
  // page shows, not by the load event submitPassword waited for. For a user with passkeys, in a
  // browser with the WebAuthn Signal API, that load is the short signals page's, which then goes on
  // by script: read at once, the page was not the consent page yet (a 30 s timeout, under load).
  const allow = page.locator('button[name=decision][value=allow]');
  const atApplication = (u: URL) => u.href.startsWith(rp.redirectUri);
  const reached = await Promise.race([
    allow.waitFor().then(
      () => 'consent' as const,
      () => undefined,
    ),
    page.waitForURL(atApplication, { waitUntil: 'commit' }).then(
      () => 'application' as const,
      () => undefined,
    ),
  ]);
  if (!reached) throw new Error(`after the password: neither the consent page nor the application (${page.url()})`);
  if (reached === 'consent')
    await Promise.all([page.waitForURL(atApplication, { waitUntil: 'commit' }), allow.click()]);
  return rp.finish(page.url(), begun);
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical violations on the page as it is now. */
export async function seriousViolations(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run()).violations;
  });
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ ...v, nodes: v.nodes.map((n) => ({ target: n.target })) }));
}
