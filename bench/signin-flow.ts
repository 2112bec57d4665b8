// A complete sign-in driven over HTTP the way a browser and a relying party drive it, for the
// sign-in benchmark and its test: a software authenticator (a P-256 key, `none` attestation at
// registration, assertions signed per WebAuthn: over authenticatorData || SHA-256(clientDataJSON)),
// one cookie jar per virtual user, a first-party client (no consent page). The steps: the
// authorization request with PKCE, the sign-in page, the passkey options and assertion (or the
// password form), the code at the redirect URI, the token endpoint, userinfo.
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';
import type { Keyring } from '../src/crypto.ts';
import type { Store } from '../src/store/index.ts';
import { addOrganization, addUser } from '../src/directory/index.ts';
import { createClient } from '../src/clients/index.ts';
import { createRecoveryLink } from '../src/webauthn/recovery-links.ts';

export type SignInMode = 'passkey' | 'password';

/** The steps of one sign-in, in order; `options` is the passkey mode's only. */
export const STEPS = ['authorize', 'page', 'options', 'sign-in', 'code', 'token', 'userinfo'] as const;
export type Step = (typeof STEPS)[number];

interface Cookie {
  value: string;
  path: string;
}

/** A browser's cookies for one origin: path-scoped, replaced and removed as Set-Cookie says. */
export function cookieJar() {
  const cookies = new Map<string, Cookie>();
  return {
    header(path: string): string {
      return [...cookies]
        .filter(([, c]) => path === c.path || path.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
        .map(([name, c]) => `${name}=${c.value}`)
        .join('; ');
    },
    keep(response: Response): void {
      for (const line of response.headers.getSetCookie()) {
        const [pair = '', ...attributes] = line.split(';').map((s) => s.trim());
        const at = pair.indexOf('=');
        const name = pair.slice(0, at);
        const value = pair.slice(at + 1);
        const attr = (key: string) =>
          attributes.find((a) => a.toLowerCase().startsWith(`${key}=`))?.slice(key.length + 1);
        const expires = attr('expires');
        const maxAge = attr('max-age');
        const gone = (maxAge !== undefined && Number(maxAge) <= 0) || (expires && Date.parse(expires) <= Date.now());
        if (gone || value === '') cookies.delete(name);
        else cookies.set(name, { value, path: attr('path') ?? '/' });
      }
    },
    /** Forgets every cookie but those whose name matches keep (a new day: the session has ended). */
    retain(keep: RegExp): void {
      for (const name of [...cookies.keys()]) if (!keep.test(name)) cookies.delete(name);
    },
    names: () => [...cookies.keys()],
  };
}
export type CookieJar = ReturnType<typeof cookieJar>;

/** A P-256 passkey held by the software authenticator. */
export interface SoftwareCredential {
  id: Buffer;
  privateKey: KeyObject;
  cose: Buffer;
  counter: number;
}

export function newCredential(): SoftwareCredential {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = publicKey.export({ format: 'jwk' });
  const cose = new Map<number, number | Uint8Array>([
    [1, 2], // kty: EC2
    [3, -7], // alg: ES256
    [-1, 1], // crv: P-256
    [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
    [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
  ]);
  return { id: randomBytes(32), privateKey, cose: Buffer.from(isoCBOR.encode(cose as any)), counter: 0 };
}

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest();
const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const clientData = (type: string, challenge: string, origin: string) =>
  Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin: false }));

/** UP and UV: the user was present and verified (a platform authenticator with a PIN or biometrics). */
const UP_UV = 0x05;
const AT = 0x40;

/** What navigator.credentials.create() gives the page: a `none` attestation of a new credential. */
export function attestationResponse(credential: SoftwareCredential, challenge: string, origin: string) {
  const rpId = new URL(origin).hostname;
  const attested = Buffer.concat([
    Buffer.alloc(16), // AAGUID: none given
    Buffer.from([credential.id.length >> 8, credential.id.length & 0xff]),
    credential.id,
    credential.cose,
  ]);
  const authData = Buffer.concat([sha256(rpId), Buffer.from([UP_UV | AT]), u32(0), attested]);
  const attestationObject = isoCBOR.encode(
    new Map<string, unknown>([
      ['fmt', 'none'],
      ['attStmt', new Map()],
      ['authData', authData],
    ]) as any,
  );
  const id = credential.id.toString('base64url');
  return {
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    authenticatorAttachment: 'platform',
    response: {
      clientDataJSON: clientData('webauthn.create', challenge, origin).toString('base64url'),
      attestationObject: Buffer.from(attestationObject).toString('base64url'),
      transports: ['internal'],
    },
  };
}

/** What navigator.credentials.get() gives the page: an assertion by a discoverable credential. */
export function assertionResponse(credential: SoftwareCredential, challenge: string, origin: string, sub: string) {
  credential.counter += 1;
  const cd = clientData('webauthn.get', challenge, origin);
  const rpId = new URL(origin).hostname;
  const authData = Buffer.concat([sha256(rpId), Buffer.from([UP_UV]), u32(credential.counter)]);
  const signature = sign('sha256', Buffer.concat([authData, sha256(cd)]), credential.privateKey);
  const id = credential.id.toString('base64url');
  return {
    id,
    rawId: id,
    type: 'public-key',
    clientExtensionResults: {},
    authenticatorAttachment: 'platform',
    response: {
      clientDataJSON: cd.toString('base64url'),
      authenticatorData: authData.toString('base64url'),
      signature: signature.toString('base64url'),
      userHandle: Buffer.from(sub).toString('base64url'),
    },
  };
}

/** The service as a browser reaches it: requests go to `url`; `publicUrl` is the origin it names itself by. */
export interface Target {
  url: string;
  publicUrl: string;
}

export interface RelyingParty {
  clientId: string;
  secret: string;
  redirectUri: string;
  scope: string;
}

export interface VirtualUser {
  eppn: string;
  password: string;
  /** the user's sub: the user handle of their passkey */
  sub: string;
  credential: SoftwareCredential;
  jar: CookieJar;
}

export class FlowError extends Error {
  override name = 'FlowError';
}

/** One HTTP exchange with the browser's cookies; redirects are the caller's to follow. */
export async function exchange(
  target: Target,
  jar: CookieJar,
  href: string,
  init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<Response> {
  const url = new URL(href.startsWith(target.publicUrl) ? href.slice(target.publicUrl.length) : href, target.url);
  const headers: Record<string, string> = { ...init.headers };
  const cookie = jar.header(url.pathname);
  if (cookie) headers.cookie = cookie;
  if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const response = await fetch(url, {
    method: init.method ?? (init.form ? 'POST' : 'GET'),
    headers,
    body: init.form ? new URLSearchParams(init.form).toString() : undefined,
    redirect: 'manual',
  });
  jar.keep(response);
  return response;
}

/**
 * GET with the user's cookies, following the service's own redirects until an answer, or until a
 * redirect goes where `stopAt` says (then that location is the answer's `location`).
 */
export async function follow(target: Target, jar: CookieJar, href: string, stopAt?: RegExp) {
  let next = href;
  for (let hop = 0; hop < 10; hop++) {
    const response = await exchange(target, jar, next);
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      await response.body?.cancel();
      if (stopAt?.test(location)) return { status: response.status, body: '', location };
      next = location;
      continue;
    }
    return { status: response.status, body: await response.text(), location: undefined };
  }
  throw new Error('too many redirects');
}

export function expectStatus(step: string, response: Response, status: number, body?: string): void {
  if (response.status !== status)
    throw new FlowError(`${step}: ${response.status} instead of ${status}${body ? `: ${body.slice(0, 300)}` : ''}`);
}

function location(step: string, response: Response): string {
  const to = response.headers.get('location');
  if (!to) throw new FlowError(`${step}: no Location`);
  return to;
}

const csrfOf = (page: string) => /name="_csrf" value="([^"]+)"/.exec(page)?.[1];

/**
 * Registers the user's passkey through a recovery link (the service's own registration pages):
 * open the page, ask for the creation options with the page's CSRF token, post the attestation.
 */
export async function registerPasskey(target: Target, user: VirtualUser, recoveryUrl: string): Promise<void> {
  const page = await exchange(target, user.jar, recoveryUrl);
  const body = await page.text();
  expectStatus('recovery page', page, 200, body);
  const csrf = csrfOf(body);
  if (!csrf) throw new FlowError('recovery page: no CSRF token');
  const options = await exchange(target, user.jar, `${recoveryUrl}/options`, {
    method: 'POST',
    headers: { 'x-csrf-token': csrf },
  });
  const created = (await options.json()) as { challenge: string; user: { id: string } };
  expectStatus('registration options', options, 200, JSON.stringify(created));
  const response = attestationResponse(user.credential, created.challenge, target.publicUrl);
  const done = await exchange(target, user.jar, recoveryUrl, {
    form: { _csrf: csrf, response: JSON.stringify(response) },
  });
  expectStatus('registration', done, 200, await done.text());
  user.sub = Buffer.from(created.user.id, 'base64url').toString('utf8');
}

export type StepTimes = Partial<Record<Step, number>>;

/** Runs fn as step `name`, adding its milliseconds to times. */
async function timed<T>(times: StepTimes, name: Step, fn: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await fn();
  } finally {
    times[name] = performance.now() - started;
  }
}

/** The sign-in page's part: the passkey options and assertion, or the password form. Returns where it sent the browser. */
export async function authenticate(
  target: Target,
  user: VirtualUser,
  { uid, csrf, mode, times }: { uid: string; csrf: string; mode: SignInMode; times: StepTimes },
): Promise<string> {
  if (mode === 'password') {
    return timed(times, 'sign-in', async () => {
      const res = await exchange(target, user.jar, `/interaction/${uid}/login`, {
        form: { _csrf: csrf, username: user.eppn, password: user.password },
      });
      expectStatus('password sign-in', res, 303, res.status === 303 ? undefined : await res.text());
      return location('password sign-in', res);
    });
  }
  const challenge = await timed(times, 'options', async () => {
    const res = await exchange(target, user.jar, `/interaction/${uid}/passkey/options`, {
      method: 'POST',
      headers: { 'x-csrf-token': csrf },
    });
    const options = (await res.json()) as { challenge: string };
    expectStatus('passkey options', res, 200, JSON.stringify(options));
    return options.challenge;
  });
  return timed(times, 'sign-in', async () => {
    const assertion = assertionResponse(user.credential, challenge, target.publicUrl, user.sub);
    const res = await exchange(target, user.jar, `/interaction/${uid}/passkey`, {
      form: { _csrf: csrf, response: JSON.stringify(assertion) },
    });
    expectStatus('passkey sign-in', res, 303, res.status === 303 ? undefined : await res.text());
    return location('passkey sign-in', res);
  });
}

/** The authorization request with PKCE, up to the sign-in page; the interaction's uid and the form's CSRF token. */
async function openSignIn(target: Target, user: VirtualUser, rp: RelyingParty, challenge: string, times: StepTimes) {
  const query = new URLSearchParams({
    client_id: rp.clientId,
    redirect_uri: rp.redirectUri,
    response_type: 'code',
    scope: rp.scope,
    state: randomBytes(12).toString('base64url'),
    nonce: randomBytes(12).toString('base64url'),
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  const pageUrl = await timed(times, 'authorize', async () => {
    const res = await exchange(target, user.jar, `/oauth/authorization?${query}`);
    expectStatus('authorization request', res, 303, res.status === 303 ? undefined : await res.text());
    return location('authorization request', res);
  });
  return { ...(await signInPage(target, user, pageUrl, times)), state: query.get('state')! };
}

/** The sign-in page an authorization request sent the browser to: the interaction's uid and the form's CSRF token. */
export async function signInPage(target: Target, user: VirtualUser, pageUrl: string, times: StepTimes) {
  const uid = /\/interaction\/([^/?]+)$/.exec(pageUrl)?.[1];
  if (!uid) throw new FlowError(`authorization request: sent to ${pageUrl}, not a sign-in page`);
  const csrf = await timed(times, 'page', async () => {
    const res = await exchange(target, user.jar, pageUrl);
    const body = await res.text();
    expectStatus('sign-in page', res, 200, body);
    return csrfOf(body);
  });
  if (!csrf) throw new FlowError('sign-in page: no CSRF token');
  return { uid, csrf };
}

/** Back at the authorization endpoint after the sign-in: the code at the redirect URI. */
async function codeAt(target: Target, user: VirtualUser, rp: RelyingParty, resume: string, state: string) {
  const res = await exchange(target, user.jar, resume);
  expectStatus('code', res, 303, res.status === 303 ? undefined : await res.text());
  const at = location('code', res);
  if (!at.startsWith(rp.redirectUri)) throw new FlowError(`code: sent to ${at}, not the redirect URI`);
  const params = new URL(at).searchParams;
  if (params.get('state') !== state) throw new FlowError('code: the state did not come back');
  const code = params.get('code');
  if (!code) throw new FlowError(`code: none at the redirect URI (${at})`);
  return code;
}

/** The relying party's back channel: the code for tokens, then userinfo with the access token. */
async function redeem(target: Target, rp: RelyingParty, code: string, verifier: string, times: StepTimes) {
  const accessToken = await timed(times, 'token', async () => {
    const res = await fetch(new URL('/oauth/token', target.url), {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(rp.clientId)}:${encodeURIComponent(rp.secret)}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        redirect_uri: rp.redirectUri,
        code_verifier: verifier,
      }).toString(),
    });
    const tokens = (await res.json()) as { access_token?: string; id_token?: string };
    expectStatus('token', res, 200, JSON.stringify(tokens));
    if (!tokens.access_token || !tokens.id_token) throw new FlowError('token: no access token or ID token');
    return tokens.access_token;
  });
  const claims = await timed(times, 'userinfo', () => userinfo(target, accessToken));
  return { claims, accessToken };
}

/** GET /openid/userinfo with a user's access token: the claims, or a FlowError unless 200. */
export async function userinfo(target: Target, accessToken: string): Promise<{ sub?: string }> {
  const res = await fetch(new URL('/openid/userinfo', target.url), {
    headers: { authorization: `Bearer ${accessToken}` },
  });
  const claims = (await res.json()) as { sub?: string };
  expectStatus('userinfo', res, 200, JSON.stringify(claims));
  return claims;
}

/**
 * One complete sign-in of the user to the relying party. The browser keeps its long-lived cookie
 * (the CSRF browser id) between sign-ins and starts without a session, as on a new day. Returns the
 * milliseconds of each step, the userinfo answer and the access token; throws a FlowError naming the step that failed.
 */
export async function signIn(target: Target, rp: RelyingParty, user: VirtualUser, mode: SignInMode) {
  user.jar.retain(/idp_browser$/);
  const times: StepTimes = {};
  const verifier = randomBytes(32).toString('base64url');
  const { uid, csrf, state } = await openSignIn(target, user, rp, sha256(verifier).toString('base64url'), times);
  const resume = await authenticate(target, user, { uid, csrf, mode, times });
  const code = await timed(times, 'code', () => codeAt(target, user, rp, resume, state));
  const { claims, accessToken } = await redeem(target, rp, code, verifier, times);
  if (claims.sub !== user.sub) throw new FlowError(`userinfo: sub ${claims.sub}, not the user's ${user.sub}`);
  return { times, claims, accessToken };
}

export const REDIRECT_URI = 'https://rp.example.test/callback';

/**
 * What the sign-ins need in the directory, written through the directory's own functions: an
 * organization, `count` users with passwords, a first-party client releasing names and e-mail,
 * and a recovery link per user (through which registerPasskey gives each user a passkey).
 */
export async function seedSignIns(store: Store, keys: Keyring, publicUrl: string, count: number) {
  await addOrganization(store, { id: 1, realm: 'signin.example.org', name: 'Sign-in benchmark' });
  const { client, secret } = await createClient(store, keys, {
    name: 'Own portal',
    redirectUris: [REDIRECT_URI],
    groups: ['userinfo-name', 'email'],
    firstParty: true,
  });
  const rp: RelyingParty = {
    clientId: client.clientId,
    secret: secret!,
    redirectUri: REDIRECT_URI,
    scope: 'openid userinfo-name email',
  };
  const users: { user: VirtualUser; recoveryUrl: string }[] = [];
  for (let i = 0; i < count; i++) {
    const eppn = `user${i}@signin.example.org`;
    const password = `correct horse battery ${i}`;
    const added = await addUser(store, { orgId: 1, eppn, name: `User ${i}`, email: `user${i}@example.org`, password });
    const link = await createRecoveryLink(store, publicUrl, { eppn });
    const user = { eppn, password, sub: added.sub, credential: newCredential(), jar: cookieJar() };
    users.push({ user, recoveryUrl: link.url });
  }
  return { rp, users };
}
