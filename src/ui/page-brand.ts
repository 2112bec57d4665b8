// The pages' branding: the deployment's (BRAND_* settings) and, once the user is known, their
// organization's over it. Colours reach the pages as a small stylesheet and the logo as an image,
// both at versioned URLs, so the strict CSP (no inline styles) holds.
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseStoredBrand, textOn, type Brand } from '../brand.ts';
import type { Store } from '../store/index.ts';
import { findOrganization } from '../store/directory.ts';

/** What a page shows of a brand. */
export interface PageBrand {
  name?: string;
  /** URL of the colours' stylesheet, when colours are set */
  stylesheet?: string;
  /** URL of the logo, when one is set */
  logo?: string;
  supportUrl?: string;
  privacyUrl?: string;
  footer?: string;
}

interface Assets {
  page: PageBrand;
  css?: Buffer;
  logo?: { type: string; data: Buffer };
}

export interface Branding {
  /** the deployment's */
  site: PageBrand;
  /** an organization's over the deployment's; the deployment's for an unknown organization */
  forOrg(orgId: number | null | undefined): Promise<PageBrand>;
  routes: (app: FastifyInstance) => Promise<void>;
}

const version = (data: Buffer | string) => createHash('sha256').update(data).digest('base64url').slice(0, 16);

function stylesheet(brand: Brand): string | undefined {
  const rules: string[] = [];
  if (brand.color) rules.push(`:root{--accent:${brand.color};--accent-fg:${textOn(brand.color)}}`);
  if (brand.colorDark)
    rules.push(
      `@media (prefers-color-scheme: dark){:root{--accent:${brand.colorDark};--accent-fg:${textOn(brand.colorDark)}}}`,
    );
  return rules.length ? `${rules.join('\n')}\n` : undefined;
}

/** The assets of a brand whose files are served under /brand/<key>/. */
function assets(brand: Brand, key: string): Assets {
  const css = stylesheet(brand);
  const page: PageBrand = {
    name: brand.name,
    supportUrl: brand.supportUrl,
    privacyUrl: brand.privacyUrl,
    footer: brand.footer,
    ...(css ? { stylesheet: `/brand/${key}/style.css?v=${version(css)}` } : {}),
    ...(brand.logo ? { logo: `/brand/${key}/logo?v=${version(brand.logo.data)}` } : {}),
  };
  return { page, ...(css ? { css: Buffer.from(css) } : {}), ...(brand.logo ? { logo: brand.logo } : {}) };
}

const KEY = /^(site|org-([1-9]\d{0,9}))$/;

export function createBranding(deployment: Brand, store: Store): Branding {
  const site = assets(deployment, 'site');

  async function orgAssets(orgId: number): Promise<Assets | undefined> {
    const org = await findOrganization(store.db, orgId);
    if (!org?.branding) return undefined;
    return assets({ ...deployment, ...parseStoredBrand(org.branding) }, `org-${orgId}`);
  }

  async function byKey(key: string): Promise<Assets | undefined> {
    const m = KEY.exec(key);
    if (!m) return undefined;
    return m[2] === undefined ? site : orgAssets(Number(m[2]));
  }

  return {
    site: site.page,
    async forOrg(orgId) {
      if (typeof orgId !== 'number') return site.page;
      return (await orgAssets(orgId))?.page ?? site.page;
    },
    routes: async (app) => {
      const serve = (pick: (a: Assets) => { type: string; data: Buffer } | undefined) =>
        async function (
          request: FastifyRequest<{ Params: { key: string }; Querystring: { v?: string } }>,
          reply: FastifyReply,
        ) {
          const a = await byKey(request.params.key);
          const file = a && pick(a);
          if (!file) return reply.code(404).type('text/plain; charset=utf-8').send('Not Found');
          return sendAsset(request, reply, { ...file, version: version(file.data) });
        };
      app.get(
        '/brand/:key/style.css',
        serve((a) => a.css && { type: 'text/css; charset=utf-8', data: a.css }),
      );
      app.get(
        '/brand/:key/logo',
        serve((a) => a.logo),
      );
    },
  };
}

/**
 * Sends a file of the pages (a brand's stylesheet or logo, an upstream provider's logo) linked at a
 * URL whose `v` is `version`: kept a day when asked for at the current version (that URL never changes
 * meaning), revalidated otherwise, by its ETag. Never sniffed; an SVG opened on its own is a document
 * without script, requests or an origin of this service (sandbox).
 */
export function sendAsset(
  request: FastifyRequest<{ Querystring: { v?: string } }>,
  reply: FastifyReply,
  file: { type: string; data: Buffer; version: string },
) {
  const etag = `"${file.version}"`;
  const current = request.query.v === file.version;
  reply
    .header('etag', etag)
    .header('cache-control', current ? 'public, max-age=86400, immutable' : 'no-cache')
    .header('cross-origin-resource-policy', 'same-origin')
    .header('x-content-type-options', 'nosniff')
    // An SVG opened on its own is a document: no script, no requests, an opaque origin.
    .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; sandbox");
  if (request.headers['if-none-match'] === etag) return reply.code(304).send();
  return reply.type(file.type).send(file.data);
}

// The deployment's brand travels with the request, so that every page of the service (those
// oidc-provider renders included) is drawn with it: a property of the request under a symbol of
// this module (a WeakMap entry per request cost more, in time and in garbage collection).
const SITE_BRAND = Symbol('siteBrand');
type BrandedRequest = IncomingMessage & { [SITE_BRAND]?: PageBrand };

/** Every page is drawn with the deployment's brand, those oidc-provider renders too. */
export function wearSiteBrand(app: FastifyInstance, branding: Branding): void {
  app.addHook('onRequest', (request, _reply, done) => {
    (request.raw as BrandedRequest)[SITE_BRAND] = branding.site;
    done();
  });
}

export function siteBrandOf(raw: BrandedRequest | undefined): PageBrand {
  return raw?.[SITE_BRAND] ?? {};
}
