// A real second OpenID Connect provider for the upstream tests: a stock oidc-provider on a free
// loopback port, whose sign-in is the test's: the next browser that arrives is signed in as the
// account the test chose (and grants whatever was asked), so a test can walk the whole flow.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

export interface UpstreamAccount {
  sub: string;
  claims: Record<string, unknown>;
  /** what the upstream's ID token says of the sign-in */
  amr?: string[];
  acr?: string;
  /** when the user authenticated (seconds since the epoch; default now): the ID token's auth_time */
  authTime?: number;
}

export interface TestUpstream {
  issuer: string;
  /** who the next sign-in at the upstream is; undefined: the user refuses (access_denied) */
  next: UpstreamAccount | undefined;
  /** answer nothing at all (a hung upstream) */
  hang: boolean;
  /** sign ID tokens for another nonce than the one asked for */
  wrongNonce: boolean;
  /** ignore prompt=login and max_age: a session of the upstream's own answers, however old */
  ignoreReauthentication: boolean;
  /** publish keys whose modulus is not the signing key's (same kid): every signature fails */
  badKeys: boolean;
  close(): Promise<void>;
}

export async function startTestUpstream(
  port: number,
  client: { clientId: string; secret: string; redirectUri: string },
): Promise<TestUpstream> {
  const issuer = `http://127.0.0.1:${port}`;
  const state: TestUpstream = {
    issuer,
    next: undefined,
    hang: false,
    wrongNonce: false,
    ignoreReauthentication: false,
    badKeys: false,
    close: async () => {},
  };
  const accounts = new Map<string, UpstreamAccount>();
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: client.clientId,
        client_secret: client.secret,
        redirect_uris: [client.redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        // every ID token says when the user authenticated
        require_auth_time: true,
      },
    ],
    claims: {
      openid: ['sub', 'acr', 'amr'],
      email: ['email', 'email_verified'],
      profile: ['name', 'given_name', 'family_name'],
      eppn: ['eduperson_principal_name'],
    },
    scopes: ['openid', 'email', 'profile', 'eppn'],
    features: { devInteractions: { enabled: false } },
    pkce: { required: () => true },
    interactions: { url: (_ctx, interaction) => `/test-interaction/${interaction.uid}` },
    async findAccount(_ctx, sub) {
      const account = accounts.get(sub);
      if (!account) return undefined;
      return { accountId: sub, claims: () => ({ sub, ...account.claims }) };
    },
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client!.clientId,
        accountId: ctx.oidc.session!.accountId!,
      });
      grant.addOIDCScope('openid email profile eppn');
      grant.addOIDCClaims(['email', 'email_verified', 'name', 'given_name', 'family_name', 'eduperson_principal_name']);
      await grant.save();
      return grant;
    },
    cookies: { keys: ['test-upstream-cookie-key'] },
  });
  const callback = provider.callback();
  const server: Server = createServer((req, res) => {
    if (state.hang) return; // never answers
    if (state.wrongNonce && req.url?.startsWith('/auth?')) {
      const url = new URL(req.url, issuer);
      url.searchParams.set('nonce', 'not-the-nonce-asked-for');
      req.url = `${url.pathname}${url.search}`;
    }
    if (state.ignoreReauthentication && req.url?.startsWith('/auth?')) {
      const url = new URL(req.url, issuer);
      url.searchParams.delete('prompt');
      url.searchParams.delete('max_age');
      req.url = `${url.pathname}${url.search}`;
    }
    if (state.badKeys && req.url === '/jwks' && !req.headers['x-real-keys']) {
      void fetch(`${issuer}/jwks`, { headers: { 'x-real-keys': '1' } })
        .then((r) => r.json() as Promise<{ keys: Record<string, unknown>[] }>)
        .then(({ keys }) => {
          const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' });
          const tampered = keys.map((k) => (k.kty === 'RSA' ? { ...k, n: other.n } : k));
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ keys: tampered }));
        });
      return;
    }
    if (req.url?.startsWith('/test-interaction/')) {
      const next = state.next;
      const result = next
        ? (accounts.set(next.sub, next),
          {
            login: {
              accountId: next.sub,
              ...(next.amr ? { amr: next.amr } : {}),
              ...(next.acr ? { acr: next.acr } : {}),
              ...(next.authTime !== undefined ? { ts: next.authTime } : {}),
            },
          })
        : { error: 'access_denied', error_description: 'the user refused' };
      provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false }).catch((err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      });
      return;
    }
    callback(req, res);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  void (server.address() as AddressInfo);
  return state;
}

/** A browser over fetch: follows redirects across hosts, keeps each host's cookies. */
export function fetchBrowser() {
  const jars = new Map<string, Map<string, string>>();
  const jarOf = (url: URL) => {
    let jar = jars.get(url.host);
    if (!jar) jars.set(url.host, (jar = new Map()));
    return jar;
  };
  async function request(url: string, init: RequestInit = {}) {
    const u = new URL(url);
    const jar = jarOf(u);
    const res = await fetch(u, {
      ...init,
      redirect: 'manual',
      headers: {
        ...(init.headers as Record<string, string>),
        cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      signal: AbortSignal.timeout(30_000),
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at);
      const value = pair!.slice(at + 1);
      if (/expires=Thu, 01 Jan 1970/i.test(c) || value === '') jar.delete(name);
      else jar.set(name, value);
    }
    return res;
  }
  /** GETs url and follows redirects until stop(url) or a page; returns the last response and its URL. */
  async function walk(url: string, stop: (u: URL) => boolean = () => false) {
    let current = url;
    for (let i = 0; i < 30; i++) {
      if (stop(new URL(current))) return { url: current, status: 0, body: '', res: undefined };
      const res = await request(current);
      const location = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && location) {
        current = new URL(location, current).href;
        continue;
      }
      return { url: current, status: res.status, body: await res.text(), res };
    }
    throw new Error('too many redirects');
  }
  async function post(url: string, form: Record<string, string>) {
    return request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });
  }
  return { request, walk, post };
}
