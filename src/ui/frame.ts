// What every page is drawn with: its language, the brand, and where the language switcher returns.
import type { FastifyRequest } from 'fastify';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { chosenLocale, pickLocale, translator } from './i18n.ts';
import { siteBrandOf, type PageBrand } from './page-brand.ts';
import type { Frame } from './layout.ts';

const MAX_RETURN = 2000;

/** A path on this site, safe to redirect to: relative, not protocol-relative, printable, bounded. */
export function isLocalPath(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MAX_RETURN && /^\/(?![/\\])[\x21-\x7e]*$/.test(value);
}

/**
 * Where switching the language returns to: the page itself when it was a GET, otherwise the page
 * the form was on (a sign-in request's page, the device page) or the account page. Without
 * keepQuery the page's query is left out: pages oidc-provider renders carry the application's
 * parameters, which the page does not repeat.
 */
export function returnPath(method: string, url: string, keepQuery = true): string {
  const path = keepQuery ? url : url.split('?')[0]!;
  if ((method === 'GET' || method === 'HEAD') && isLocalPath(path)) return path;
  const interaction = /^\/interaction\/([\w-]{1,100})(?:\/|$)/.exec(url);
  if (interaction) return `/interaction/${interaction[1]}`;
  if (url.startsWith('/device')) return '/device';
  return '/account';
}

interface FrameInput {
  uiLocales?: unknown;
  acceptLanguage: unknown;
  cookie: unknown;
  brand: PageBrand;
  method: string;
  url: string;
  keepQuery: boolean;
}

export function buildFrame(input: FrameInput): Frame {
  const locale = pickLocale(input.uiLocales, input.acceptLanguage, chosenLocale(input.cookie));
  return {
    locale,
    t: translator(locale),
    brand: input.brand,
    here: returnPath(input.method, input.url, input.keepQuery),
  };
}

/** A page of ours, with the deployment's brand. */
export function frameFor(request: FastifyRequest, uiLocales?: unknown): Frame {
  return buildFrame({
    uiLocales,
    acceptLanguage: request.headers['accept-language'],
    cookie: request.headers.cookie,
    brand: siteBrandOf(request.raw),
    method: request.method,
    url: request.url,
    keepQuery: true,
  });
}

/** A page oidc-provider has us render. */
export function frameOfContext(ctx: KoaContextWithOIDC): Frame {
  return buildFrame({
    uiLocales: ctx.oidc?.params?.ui_locales,
    acceptLanguage: ctx.get('accept-language'),
    cookie: ctx.get('cookie'),
    brand: siteBrandOf(ctx.req),
    method: ctx.method,
    url: ctx.originalUrl,
    keepQuery: false,
  });
}

/** The same page drawn with an organization's brand (once the user is known). */
export const withBrand = (frame: Frame, brand: PageBrand): Frame => ({ ...frame, brand });
