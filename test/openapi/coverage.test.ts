// Every route the service serves is in the OpenAPI document, or is named below with the reason it
// is not; every operation of the document is one the service serves. A new route therefore cannot go
// undocumented without someone deciding so here.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { startTestApp, type TestContext } from '../helpers.ts';
import { ROUTES } from '../../src/oauth/provider.ts';
import { PROVIDER_PATHS } from '../../src/oauth/plugin.ts';

interface Route {
  method: string;
  url: string;
  hidden: boolean;
}

type Operation = Record<string, unknown> & {
  operationId?: string;
  summary?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { example?: unknown; examples?: unknown; schema?: { examples?: unknown } }[];
  requestBody?: { content: Record<string, { example?: unknown; examples?: unknown }> };
  responses: Record<string, { content?: Record<string, { example?: unknown; examples?: unknown }> }>;
};

/** Fastify announces every instance it creates; the hook sees every route the app adds. */
function recordRoutes(): { routes: Route[]; stop(): void } {
  const routes: Route[] = [];
  const onRoute = (route: RouteOptions) => {
    for (const method of [route.method].flat())
      routes.push({ method, url: route.url, hidden: Boolean((route.schema as { hide?: boolean })?.hide) });
  };
  const subscriber = (message: unknown) =>
    (message as { fastify: FastifyInstance }).fastify.addHook('onRoute', onRoute);
  diagnostics.subscribe('fastify.initialization', subscriber);
  return { routes, stop: () => diagnostics.unsubscribe('fastify.initialization', subscriber) };
}

const toOpenApiPath = (url: string) => url.replace(/:([A-Za-z_]+)/g, '{$1}');

/**
 * What oidc-provider serves behind the catch-all mounts (/oauth/*, /openid/*), from ROUTES: each
 * endpoint with the methods it answers. CORS preflights (OPTIONS) are left out everywhere.
 */
const PROVIDER_OPERATIONS: Record<keyof typeof ROUTES, string[]> = {
  authorization: ['GET'],
  token: ['POST'],
  jwks: ['GET'],
  userinfo: ['GET', 'POST'],
  end_session: ['GET'], // POST is off (oidc-provider's enableHttpPostMethods), as for authorization
  revocation: ['POST'],
  introspection: ['POST'],
  pushed_authorization_request: ['POST'],
  device_authorization: ['POST'],
  // The device flow's user-code page: a browser page of the sign-in feature (excluded below).
  code_verification: [],
};

/**
 * Routes deliberately left out of the document. Pages are for people, not programs: the sign-in
 * and account pages, the device-flow pages and the authorization server's browser-only steps, with
 * their static assets. Each entry is a path prefix (or an exact path) and why.
 */
const NOT_DOCUMENTED: [prefix: string, why: string][] = [
  ['/interaction/', 'sign-in pages of an authorization request'],
  ['/account', 'the account page'],
  ['/account/', 'the account page’s forms'],
  [ROUTES.code_verification, 'the device flow’s user-code page (verification_uri)'],
  [`${ROUTES.code_verification}/`, 'the device flow’s confirmation pages'],
  ['/static/', 'the pages’ CSS and scripts'],
  ['/brand/', 'the pages’ brand colours and logo'],
  ['/language/', 'the pages’ language switcher'],
  ['/recover/', 'a recovery link’s page and its forms'],
  ['/lost-passkey', '“Lost your passkey?”: the self-service recovery page and its form (docs/email.md)'],
  ['/console', 'the staff console’s first page (docs/console.md); its actions’ API twins are documented under /2/'],
  ['/console/', 'the staff console’s pages, forms, downloads and script'],
  // SAML's browser bindings: the browser carries the message there and back (docs/saml.md); the
  // endpoints are named in the metadata, which is documented
  ['/saml2/idp/sso', 'SAML single sign-on, HTTP-Redirect and HTTP-POST bindings'],
  ['/saml2/idp/slo', 'SAML single logout, HTTP-Redirect and HTTP-POST bindings'],
  ['/saml2/idp/slo/continue', 'the way on through a SAML single logout: after the signed-out page, or back from an SP'],
  ['/saml2/idp/continue', 'the return from the sign-in pages to a SAML sign-in'],
  ['/saml2/idp/unsolicited', 'IdP-initiated SAML sign-in, a link for people'],
  ['/saml2/idp/post.js', 'the script that submits the HTTP-POST binding’s form'],
  // an upstream sign-in's browser legs (docs/upstream.md); the SP metadata names the ACS and is documented
  ['/upstream/:id/callback', 'the return from an upstream OpenID Connect provider (its redirect URI)'],
  ['/upstream/:id/logo', 'an upstream provider’s logo on its sign-in button'],
  ['/saml2/sp/acs', 'the assertion consumer service: an upstream SAML IdP’s Response, HTTP-POST binding'],
  ['/saml2/sp/post.js', 'the script that submits the HTTP-POST binding’s form to an upstream IdP'],
  ['/.well-known/webauthn', 'WebAuthn related origins, read by browsers (docs/passkey-lifecycle.md)'],
  ['/docs/', 'the API reference’s own assets and its copies of this document (/docs/json, /docs/yaml)'],
  // 400-only variants of the user-existence paths with the identifier left out (checkuser/index.ts)
  ['/check_single', 'answers only 400: the identifier is missing'],
  ['/userinfo/v1/exists', 'answers only 400: the identifier is missing'],
  ['/userinfo/v1/exists-by-mail', 'answers only 400: the identifier is missing'],
  ['/userinfo/v1/exists-by-mail/:realm', 'answers only 400: the identifier is missing'],
];

/** oidc-provider's browser-only continuations of flows documented by their first step. */
const PROVIDER_NOT_DOCUMENTED = [
  `${ROUTES.authorization}/{uid}`, // resume after the sign-in pages
  `${ROUTES.end_session}/confirm`, // the sign-out confirmation form posts here
  `${ROUTES.end_session}/success`, // the signed-out page
];

const excluded = (url: string) =>
  NOT_DOCUMENTED.some(([prefix]) => (prefix.endsWith('/') ? url.startsWith(prefix) : url === prefix));

describe('the OpenAPI document covers every route', () => {
  let ctx: TestContext;
  let routes: Route[];
  let paths: Record<string, Record<string, Operation>>;
  let doc: Record<string, any>;

  before(async () => {
    const recorder = recordRoutes();
    try {
      ctx = await startTestApp('sqlite');
    } finally {
      recorder.stop();
    }
    routes = recorder.routes;
    doc = (await ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    paths = doc.paths;
  });
  after(() => ctx.close());

  const documented = (method: string, path: string) => Boolean(paths[path]?.[method.toLowerCase()]);

  it('documents every route that is not excluded, and only what is served', async () => {
    const missing: string[] = [];
    for (const { method, url, hidden } of routes) {
      // the authorization server's mounts (its endpoints are checked below), HEAD (answered like GET), CORS preflights
      if (PROVIDER_PATHS.includes(url) || method === 'HEAD' || method === 'OPTIONS') continue;
      if (documented(method, toOpenApiPath(url)) || excluded(url)) continue;
      // a hidden route at a documented path is its 405 answer for the other methods
      if (hidden && paths[toOpenApiPath(url)]) {
        const res = await ctx.app.inject({ method: method as 'GET', url: url.replace(/:[A-Za-z_]+/g, 'x') });
        if (res.statusCode === 405) continue;
      }
      missing.push(`${method} ${url}`);
    }
    for (const [name, methods] of Object.entries(PROVIDER_OPERATIONS)) {
      for (const method of methods) {
        const path = ROUTES[name as keyof typeof ROUTES];
        if (!documented(method, path)) missing.push(`${method} ${path} (oidc-provider)`);
      }
    }
    for (const path of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server', '/docs']) {
      if (!documented('GET', path)) missing.push(`GET ${path}`);
    }
    assert.deepEqual(missing, []);
  });

  it('has no operation the service does not serve', () => {
    const served = new Set(routes.map((r) => `${r.method} ${toOpenApiPath(r.url)}`));
    for (const [name, methods] of Object.entries(PROVIDER_OPERATIONS))
      for (const m of methods) served.add(`${m} ${ROUTES[name as keyof typeof ROUTES]}`);
    served.add('GET /docs'); // registered as /docs/, answered at /docs too
    const extra = Object.entries(paths).flatMap(([path, item]) =>
      Object.keys(item)
        .map((m) => `${m.toUpperCase()} ${path}`)
        .filter((op) => !served.has(op)),
    );
    assert.deepEqual(extra, []);
    for (const path of PROVIDER_NOT_DOCUMENTED) assert.equal(paths[path], undefined, path);
  });

  it('documents only methods the authorization server answers', async () => {
    for (const [name, methods] of Object.entries(PROVIDER_OPERATIONS)) {
      const path = ROUTES[name as keyof typeof ROUTES];
      if (methods.length === 0) continue; // a page, checked with the other routes
      for (const method of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH']) {
        const res = await ctx.app.inject({
          method: method as 'GET',
          url: path,
          ...(method === 'GET'
            ? {}
            : { headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: '' }),
        });
        const answered = res.statusCode !== 404 && res.statusCode !== 405;
        assert.equal(answered, methods.includes(method), `${method} ${path}: ${res.statusCode}`);
        assert.equal(documented(method, path), methods.includes(method), `${method} ${path} documented`);
      }
    }
  });

  it('gives every operation an operationId, a summary, tags, security and examples', () => {
    const ids = new Set<string>();
    const tags = new Set((doc.tags as { name: string }[]).map((t) => t.name));
    for (const [path, item] of Object.entries(paths)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        assert.ok(op.operationId && !ids.has(op.operationId), `${where}: unique operationId`);
        ids.add(op.operationId);
        assert.ok(op.summary, `${where}: summary`);
        assert.ok(op.tags?.length && op.tags.every((t) => tags.has(t)), `${where}: declared tags`);
        assert.ok(Array.isArray(op.security), `${where}: security declared (an empty list when public)`);
        const responseExamples = Object.values(op.responses).flatMap((r) =>
          Object.values(r.content ?? {}).filter((m) => m.example !== undefined || m.examples !== undefined),
        );
        assert.ok(responseExamples.length > 0, `${where}: a response example`);
        const requestExamples = [
          ...(op.parameters ?? []).filter((p) => p.example !== undefined || p.examples !== undefined),
          ...Object.values(op.requestBody?.content ?? {}).filter((m) => m.example !== undefined),
        ];
        const takesInput = Boolean(op.parameters?.length || op.requestBody);
        assert.ok(!takesInput || requestExamples.length > 0, `${where}: a request example`);
      }
    }
  });

  it('declares the schemes and the scopes each protected operation needs', () => {
    const schemes = doc.components.securitySchemes;
    assert.equal(schemes.oauth2.flows.clientCredentials.tokenUrl, `${ctx.config.publicUrl}/oauth/token`);
    assert.deepEqual(Object.keys(schemes.oauth2.flows.clientCredentials.scopes).sort(), [
      'audit.read',
      'gk_checkuser',
      'gk_checkuser_systemlookup',
      'passkey.delete',
      'passkey.read',
      'recovery.manage',
      'report.read',
      'scim',
      'ssf.manage',
      'system-all-users',
      'system-check-user-existence',
    ]);
    assert.deepEqual(schemes.clientBasic, { ...schemes.clientBasic, type: 'http', scheme: 'basic' });
    assert.deepEqual(paths['/2/passkey/{org_id}']!.get!.security, [{ oauth2: ['passkey.read'] }]);
    assert.deepEqual(paths['/2/passkey/{org_id}/{id}']!.delete!.security, [{ oauth2: ['passkey.delete'] }]);
    assert.deepEqual(paths['/oauth/token']!.post!.security, [{ clientBasic: [] }, {}]);
    assert.deepEqual(paths['/openid/userinfo']!.get!.security, [{ bearer: [] }]);
    assert.deepEqual(paths['/userinfo/v1/lookup/{id}']!.get!.security, [{ oauth2: ['system-all-users'] }]);
    assert.deepEqual(paths['/groups/me/groups']!.get!.security, [{ bearer: [] }]);
    assert.deepEqual(paths['/ssf/streams']!.post!.security, [{ oauth2: ['ssf.manage'] }]);
    for (const path of [
      '/healthz',
      '/readyz',
      '/openid/jwks',
      '/.well-known/openid-configuration',
      '/.well-known/ssf-configuration',
      '/docs',
    ])
      assert.deepEqual(paths[path]!.get!.security, [], path);
    const token = paths['/oauth/token']!.post!;
    assert.ok(token.requestBody!.content['application/x-www-form-urlencoded'], 'form body');
    for (const status of ['400', '401']) {
      const body = token.responses[status]!.content!['application/json']!;
      assert.deepEqual(body.example && Object.keys(body.example as object), ['error', 'error_description']);
    }
  });
});
