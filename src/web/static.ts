// Static assets: the pages' CSS and scripts, and @simplewebauthn/browser from node_modules.
// Read once at start-up; no directory is exposed.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { packageFile } from '../package-files.ts';

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

function asset(path: string, type: string): Asset {
  const body = readFileSync(path);
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

export function staticAssets(): Record<string, Asset> {
  const here = packageFile('web/static/');
  const browserBundle = createRequire(import.meta.url)
    .resolve('@simplewebauthn/browser')
    .replace(/script[\\/]index\.js$/, 'dist/bundle/index.umd.min.js');
  return {
    'style.css': asset(new URL('style.css', here).pathname, 'text/css; charset=utf-8'),
    'sign-in.js': asset(new URL('sign-in.js', here).pathname, 'text/javascript; charset=utf-8'),
    'account.js': asset(new URL('account.js', here).pathname, 'text/javascript; charset=utf-8'),
    'signals.js': asset(new URL('signals.js', here).pathname, 'text/javascript; charset=utf-8'),
    'offer.js': asset(new URL('offer.js', here).pathname, 'text/javascript; charset=utf-8'),
    'webauthn-browser.js': asset(browserBundle, 'text/javascript; charset=utf-8'),
  };
}

export function staticPlugin() {
  const assets = staticAssets();
  return async function staticFiles(app: FastifyInstance) {
    app.get<{ Params: { name: string } }>('/static/:name', async (request, reply) => {
      const a = Object.hasOwn(assets, request.params.name) ? assets[request.params.name] : undefined;
      if (!a) return reply.code(404).type('text/plain; charset=utf-8').send('Not Found');
      reply
        .header('etag', a.etag)
        .header('cache-control', 'public, max-age=300')
        .header('cross-origin-resource-policy', 'same-origin');
      if (request.headers['if-none-match'] === a.etag) return reply.code(304).send();
      return reply.type(a.type).send(a.body);
    });
  };
}

/**
 * WebAuthn related origin requests (Level 3): the origins on other domains that may use this
 * service's RP ID. Without any configured there is nothing to serve.
 */
export function relatedOriginsRoute(origins: string[]) {
  return async function relatedOrigins(app: FastifyInstance) {
    app.get('/.well-known/webauthn', async (_request, reply) => {
      if (origins.length === 0) return reply.code(404).type('text/plain; charset=utf-8').send('Not Found');
      return reply
        .header('cache-control', 'public, max-age=300')
        .header('access-control-allow-origin', '*')
        .type('application/json')
        .send({ origins });
    });
  };
}
