// The service's OpenAPI 3.1 document, generated from the route schemas and served at /openapi.json.
// Registered on the root instance before the feature plugins, so it sees every route they add.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Config } from '../config.ts';

/** `undocumented`: mounts that are not API routes, such as the authorization server's catch-alls
 * (oidc-provider documents its own endpoints through discovery). */
export async function registerOpenApi(
  app: FastifyInstance,
  config: Config,
  undocumented: readonly string[] = [],
): Promise<void> {
  const hidden = new Set([...undocumented, '/openapi.json']);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Identity provider API',
        version: '2',
        description:
          'Passkey administration (/2/passkey), userinfo and user-existence endpoints. Errors are JSON {code, message}.',
      },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'JWT',
            description:
              `RFC 9068 access token from ${config.publicUrl}/oauth/token (client_credentials). ` +
              'A DPoP-bound token (cnf.jkt, RFC 9449) is sent as `Authorization: DPoP <token>` with a proof in the `DPoP` header',
          },
        },
      },
    },
    transform: ({ schema, url }) => {
      return { schema: hidden.has(url) ? { ...(schema ?? {}), hide: true } : schema, url };
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
