// A browser's way through single sign-on as plain HTTP requests: the SSO endpoint's redirect to the
// sign-in, the password form, the consent page, and the continuation that posts the Response to the
// SP. Over inject() (one app) or over real HTTP (fetch, with a cookie jar, to whichever instance
// the test names for each request).
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { decodePostMessage } from '../../src/saml/xml/index.ts';
import { cookieBrowser } from '../helpers.ts';

export interface Page {
  statusCode: number;
  location: string | undefined;
  body: string;
}

export interface PageBrowser {
  get(path: string): Promise<Page>;
  post(path: string, form: Record<string, string>, headers?: Record<string, string>): Promise<Page>;
}

export function injectBrowser(app: FastifyInstance): PageBrowser {
  const b = cookieBrowser(app);
  const page = (res: Awaited<ReturnType<typeof b.get>>): Page => ({
    statusCode: res.statusCode,
    location: res.headers.location === undefined ? undefined : String(res.headers.location),
    body: res.body,
  });
  return {
    get: async (path) => page(await b.get(path)),
    post: async (path, form, headers) => page(await b.post(path, form, headers)),
  };
}

/** Real HTTP to the instance `target()` names at each request, with one cookie jar, as one browser. */
export function httpBrowser(target: () => string): PageBrowser {
  const jar = new Map<string, string>();
  const send = async (path: string, init: RequestInit): Promise<Page> => {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(`${target()}${path}`, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) },
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';').map((p) => p.trim());
      const at = pair.indexOf('=');
      const expired = attributes.some(
        (a) => /^max-age=0$/i.test(a) || (/^expires=/i.test(a) && Date.parse(a.slice(8)) < Date.now()),
      );
      if (expired) jar.delete(pair.slice(0, at));
      else jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return { statusCode: res.status, location: res.headers.get('location') ?? undefined, body: await res.text() };
  };
  return {
    get: (path) => send(path, { method: 'GET' }),
    post: (path, form, headers = {}) =>
      send(path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form).toString(),
      }),
  };
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
const pathOf = (location: string) => {
  const url = new URL(location, 'https://x.invalid');
  return `${url.pathname}${url.search}`;
};

/**
 * Follows the browser from `res` through redirects, the password form and the consent page (agreeing),
 * until a page that is neither: the Response form (or an error page). With `stopAt`, stops instead
 * at the redirect to a path starting with it, and returns that redirect.
 */
export async function signInAndAgree(
  b: PageBrowser,
  res: Page,
  credentials: { username: string; password: string },
  stopAt?: string,
): Promise<Page> {
  for (let step = 0; step < 20; step++) {
    if (res.statusCode === 302 || res.statusCode === 303) {
      const path = pathOf(res.location!);
      if (stopAt && path.startsWith(stopAt)) return res;
      res = await b.get(path);
      continue;
    }
    if (res.statusCode !== 200) return res;
    const login = /action="(\/interaction\/[^"/]+\/login)"/.exec(res.body);
    if (login) {
      res = await b.post(login[1]!, { _csrf: csrfOf(res.body), ...credentials });
      continue;
    }
    const consent = /action="(\/interaction\/[^"/]+\/consent)"/.exec(res.body);
    if (consent) {
      res = await b.post(consent[1]!, { _csrf: csrfOf(res.body), decision: 'allow' });
      continue;
    }
    return res;
  }
  throw new Error('the sign-in did not end within 20 steps');
}

/** The Response a page posts to the SP's ACS, parsed. */
export function postedResponse(page: Page, acs: string) {
  assert.equal(page.statusCode, 200, page.body.slice(0, 500));
  assert.ok(page.body.includes(`action="${acs}"`), 'posted to the SP’s ACS');
  const value = /name="SAMLResponse" value="([^"]+)"/.exec(page.body)?.[1];
  assert.ok(value, 'the page carries a SAMLResponse');
  return decodePostMessage(value);
}
