// Branding values (product name, colours, logo, links, footer): their validation, shared by the
// deployment's settings (BRAND_*) and the organizations' own branding (`org brand`).
import { readFileSync, statSync } from 'node:fs';
import ipaddr from 'ipaddr.js';

export interface Logo {
  type: 'image/png' | 'image/webp' | 'image/svg+xml';
  data: Buffer;
}

/** What an operator may set; every field optional, an organization's over the deployment's. */
export interface Brand {
  name?: string;
  /** accent colour (#rrggbb) on the light scheme */
  color?: string;
  /** accent colour (#rrggbb) on the dark scheme */
  colorDark?: string;
  logo?: Logo;
  supportUrl?: string;
  privacyUrl?: string;
  footer?: string;
}

export const BRAND_LIMITS = { name: 60, footer: 200, url: 500, logoBytes: 100 * 1024 };

/**
 * The background the accent colour must stand out from, per scheme: of the page and the card
 * (src/web/static/style.css), the one closer to the accent (light: the grey page, dark: the card).
 */
export const BACKGROUND = { light: '#f4f4f6', dark: '#1e1e23' };
/** WCAG 2.x AA for normal text: links and button labels are normal text. */
export const MINIMUM_CONTRAST = 4.5;

/** A value refused, with the reason phrased for whoever set it. */
export class BrandError extends Error {}

// Control, bidirectional-override and private-use characters have no place in a name or footer.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Co}\u2028\u2029]/u;

function text(value: string, max: number, what: string): string {
  const v = value.trim();
  if (!v) throw new BrandError(`${what} must not be empty`);
  if (v.length > max) throw new BrandError(`${what} must be at most ${max} characters, got ${v.length}`);
  if (UNPRINTABLE.test(v)) throw new BrandError(`${what} must not contain control or formatting characters`);
  return v;
}

export const brandName = (value: string) => text(value, BRAND_LIMITS.name, 'the name');
export const brandFooter = (value: string) => text(value, BRAND_LIMITS.footer, 'the footer text');

function channel(c: number): number {
  const s = c / 255;
  return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
}

function luminance(hex: string): number {
  const n = Number.parseInt(hex.slice(1), 16);
  return 0.2126 * channel((n >> 16) & 255) + 0.7152 * channel((n >> 8) & 255) + 0.0722 * channel(n & 255);
}

/** WCAG 2.x contrast ratio of two #rrggbb colours, 1 to 21. */
export function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** The label colour (white or black) that reads best on a button of this colour. */
export function textOn(background: string): '#ffffff' | '#000000' {
  return contrast(background, '#ffffff') >= contrast(background, '#000000') ? '#ffffff' : '#000000';
}

/**
 * An accent colour: #rgb or #rrggbb, normalized to lower-case #rrggbb. It is the colour of links
 * and buttons on the card, so it must reach the AA contrast against the card of its scheme.
 */
export function brandColor(value: string, scheme: 'light' | 'dark'): string {
  const v = value.trim().toLowerCase();
  if (!/^#([0-9a-f]{3}|[0-9a-f]{6})$/.test(v))
    throw new BrandError(`the colour must be #rgb or #rrggbb (hexadecimal), got '${value}'`);
  const hex = v.length === 4 ? `#${[...v.slice(1)].map((c) => c + c).join('')}` : v;
  const ratio = contrast(hex, BACKGROUND[scheme]);
  if (ratio < MINIMUM_CONTRAST)
    throw new BrandError(
      `the ${scheme}-scheme colour ${hex} has a contrast of ${ratio.toFixed(2)}:1 against the ${scheme} page (${BACKGROUND[scheme]}); links and buttons need at least ${MINIMUM_CONTRAST}:1, choose a ${scheme === 'light' ? 'darker' : 'lighter'} colour`,
    );
  return hex;
}

/** A link: https, mailto, or http to a loopback host (development). */
export function brandUrl(value: string, what: string): string {
  const v = value.trim();
  if (v.length > BRAND_LIMITS.url) throw new BrandError(`${what} must be at most ${BRAND_LIMITS.url} characters`);
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new BrandError(`${what} must be an absolute https or mailto URL, got '${value}'`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || (ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback');
  if (url.protocol === 'https:' || url.protocol === 'mailto:' || (url.protocol === 'http:' && loopback))
    return url.href;
  throw new BrandError(`${what} must be an https or mailto URL (http only on localhost), got '${value}'`);
}

/** The image type by its first bytes; an SVG by its root element. */
function imageType(data: Buffer): Logo['type'] | undefined {
  if (data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (data.subarray(0, 4).toString('latin1') === 'RIFF' && data.subarray(8, 12).toString('latin1') === 'WEBP')
    return 'image/webp';
  const head = data.subarray(0, 1024).toString('utf8').trimStart();
  if (/^(<\?xml\s[^>]*\?>\s*)?(<!--[\s\S]*?-->\s*)*(<!DOCTYPE svg[^>]*>\s*)?<svg[\s>]/i.test(head))
    return 'image/svg+xml';
  return undefined;
}

export function brandLogo(data: Buffer): Logo {
  if (data.length === 0) throw new BrandError('the logo file is empty');
  if (data.length > BRAND_LIMITS.logoBytes)
    throw new BrandError(
      `the logo must be at most ${BRAND_LIMITS.logoBytes / 1024} KiB, got ${Math.ceil(data.length / 1024)} KiB`,
    );
  const type = imageType(data);
  if (!type) throw new BrandError('the logo must be a PNG, WebP or SVG image');
  return { type, data };
}

/** Reads and checks a logo file; the error says what is wrong with the file. */
export function readLogoFile(path: string): Logo {
  let data: Buffer;
  try {
    if (!statSync(path).isFile()) throw new BrandError(`the logo '${path}' is not a file`);
    if (statSync(path).size > BRAND_LIMITS.logoBytes)
      throw new BrandError(`the logo must be at most ${BRAND_LIMITS.logoBytes / 1024} KiB`);
    data = readFileSync(path);
  } catch (err) {
    if (err instanceof BrandError) throw err;
    throw new BrandError(`cannot read the logo file '${path}' (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return brandLogo(data);
}

/** As stored in organizations.branding: the logo in base64. */
export interface StoredBrand extends Omit<Brand, 'logo'> {
  logo?: { type: Logo['type']; data: string };
}

export function storedBrand(brand: Brand): string {
  const { logo, ...rest } = brand;
  return JSON.stringify(logo ? { ...rest, logo: { type: logo.type, data: logo.data.toString('base64') } } : rest);
}

/** The stored JSON, read back; fields that no longer validate are left out rather than shown. */
export function parseStoredBrand(json: string | null): Brand {
  if (!json) return {};
  let raw: StoredBrand;
  try {
    raw = JSON.parse(json) as StoredBrand;
  } catch {
    return {};
  }
  const brand: Brand = {};
  const keep = <K extends keyof Brand>(key: K, check: () => Brand[K]) => {
    try {
      brand[key] = check();
    } catch {
      /* left out */
    }
  };
  if (typeof raw.name === 'string') keep('name', () => brandName(raw.name!));
  if (typeof raw.color === 'string') keep('color', () => brandColor(raw.color!, 'light'));
  if (typeof raw.colorDark === 'string') keep('colorDark', () => brandColor(raw.colorDark!, 'dark'));
  if (typeof raw.supportUrl === 'string') keep('supportUrl', () => brandUrl(raw.supportUrl!, 'support URL'));
  if (typeof raw.privacyUrl === 'string') keep('privacyUrl', () => brandUrl(raw.privacyUrl!, 'privacy URL'));
  if (typeof raw.footer === 'string') keep('footer', () => brandFooter(raw.footer!));
  if (raw.logo && typeof raw.logo.data === 'string')
    keep('logo', () => brandLogo(Buffer.from(raw.logo!.data, 'base64')));
  return brand;
}
