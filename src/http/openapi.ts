// The service's OpenAPI 3.1 document, generated from the route schemas and served at /openapi.json,
// with the endpoints of the authorization server merged in from documentation-only path entries,
// and its rendered reference at /docs (api-docs.ts).
// Registered on the root instance before the feature plugins, so it sees every route they add.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { OpenAPIV3_1 } from 'openapi-types';
import type { Config } from '../config.ts';
import { DOCS_PATH, registerApiReference } from './api-docs.ts';
import { ROUTE_SCHEMAS, SCHEMAS, securitySchemes, TAGS } from './openapi-components.ts';

type PathItem = Record<string, unknown>;
type OpenApiComponents = NonNullable<OpenAPIV3_1.Document['components']>;

export interface OpenApiOptions {
  /** mounts that are not API routes themselves, such as the authorization server's catch-alls */
  hidden?: readonly string[];
  /** documentation-only path items (by OpenAPI path) for endpoints served behind those mounts */
  paths?: Record<string, PathItem>;
}

/**
 * Hosts that name no deployment: loopback, and the names reserved for documentation and testing
 * (RFC 2606, RFC 6761). A document served from one of them (a laptop's `npm start`, a test) gives
 * its server as `/`, the origin it is served from, rather than a URL nobody else can reach.
 */
const PLACEHOLDER_HOST =
  /^(localhost|.+\.localhost|127(\.\d+){3}|\[::1\]|(.+\.)?example\.(com|net|org)|example|.+\.(example|test|invalid))$/;

/** The document's server: PUBLIC_URL, or `/` when PUBLIC_URL is a placeholder (see PLACEHOLDER_HOST). */
export function documentServer(publicUrl: string): string {
  return PLACEHOLDER_HOST.test(new URL(publicUrl).hostname) ? '/' : publicUrl;
}

/** Adds the documentation-only operations to the generated paths; a route's own operation wins. */
function mergePaths(generated: Record<string, PathItem>, extra: Record<string, PathItem>) {
  const merged: Record<string, PathItem> = { ...generated };
  for (const [path, item] of Object.entries(extra)) {
    const own = merged[path] ?? {};
    merged[path] = { ...own, ...Object.fromEntries(Object.entries(item).filter(([method]) => !(method in own))) };
  }
  return Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)));
}

export async function registerOpenApi(app: FastifyInstance, config: Config, options: OpenApiOptions = {}) {
  const hidden = new Set(options.hidden ?? []);
  const extra = options.paths ?? {};
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Identity provider API',
        version: '2',
        description:
          'Passkey administration (/2/passkey), userinfo, user-existence and photo endpoints, the OAuth 2.0 / ' +
          'OpenID Connect authorization server, health probes and metrics. Errors of the service’s own APIs are JSON ' +
          '{code, message}; the authorization server answers OAuth errors {error, error_description}.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      servers: [{ url: documentServer(config.publicUrl) }],
      tags: TAGS,
      // plain JSON built in openapi-components.ts; the OpenAPI typings want their own object types
      components: { securitySchemes: securitySchemes(config.publicUrl), schemas: SCHEMAS } as OpenApiComponents,
    },
    transform: ({ schema, url: routeUrl }) => {
      // the reference's page is registered as /docs/ (and answers /docs without hooks seeing it)
      const url = routeUrl === `${DOCS_PATH}/` ? DOCS_PATH : routeUrl;
      if (hidden.has(url)) return { schema: { ...(schema ?? {}), hide: true }, url };
      const documented = Object.hasOwn(ROUTE_SCHEMAS, url) ? ROUTE_SCHEMAS[url] : undefined;
      return { schema: documented ?? schema, url };
    },
    transformObject: (documents) => {
      if (!('openapiObject' in documents)) return documents.swaggerObject;
      const { openapiObject } = documents;
      return { ...openapiObject, paths: mergePaths(openapiObject.paths as Record<string, PathItem>, extra) };
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  await registerApiReference(app, config);
}
