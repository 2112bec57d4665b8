// The rendered API reference at /docs: Swagger UI (@fastify/swagger-ui) over the OpenAPI document.
// Its scripts, styles and images are files served from the package under /docs/static/; nothing
// is loaded from another origin.
import type { FastifyInstance } from 'fastify';
import swaggerUi from '@fastify/swagger-ui';
import type { Config } from '../config.ts';

export const DOCS_PATH = '/docs';

/**
 * The reference's Content-Security-Policy: scripts and styles only from files of this origin (no
 * inline script, no eval, no inline style element); images may be data: URIs (Swagger UI's icons
 * and logo). "Try it out" requests go to this origin and to PUBLIC_URL.
 */
export function apiReferencePolicy(publicUrl: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self' ${new URL(publicUrl).origin}`,
    "form-action 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export async function registerApiReference(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: DOCS_PATH,
    staticCSP: apiReferencePolicy(config.publicUrl),
    // no validator badge: it would send the document to a public validator
    validatorUrl: false,
    theme: { title: 'Identity provider API reference' },
    uiConfig: {
      // Without the standalone layout's top bar: it is a box for loading other documents, and its
      // logo is an SVG with an inline style element that the policy (rightly) refuses.
      layout: 'BaseLayout',
      deepLinking: true,
      displayOperationId: true,
      defaultModelsExpandDepth: 0,
    },
    uiHooks: {
      onRequest: (_request, reply, done) => {
        reply.header('x-frame-options', 'DENY').header('referrer-policy', 'no-referrer');
        done();
      },
    },
  });
}
