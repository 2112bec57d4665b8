// The service's OpenAPI 3.1 document, generated from the route schemas and served at /openapi.json.
// Registered on the root instance before the feature plugins, so it sees every route they add.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import type { Config } from '../config.ts';
import { PROVIDER_PATHS } from '../oauth/plugin.ts';

// oidc-provider documents its own endpoints (discovery); its catch-all mounts are not API routes.
const UNDOCUMENTED = [...PROVIDER_PATHS, '/openapi.json'];

export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Identity provider API',
        version: '2',
        description: 'Passkey administration (/2/passkey), userinfo and user-existence endpoints. Errors are JSON {code, message}.',
      },
      servers: [{ url: config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: `RFC 9068 access token from ${config.publicUrl}/oauth/token (client_credentials)` },
        },
      },
    },
    transform: ({ schema, url }) => {
      const hidden = UNDOCUMENTED.includes(url);
      return { schema: hidden ? { ...(schema ?? {}), hide: true } : schema, url };
    },
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
