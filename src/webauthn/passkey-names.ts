// Names of passkeys: the default a new passkey gets, and what a user may rename it to.
import { authenticatorName, type AaguidData } from './aaguid.ts';
import { MAX_LABEL } from './formats.ts';

const BROWSERS: [RegExp, string][] = [
  [/\bEdg(e|A|iOS)?\//, 'Edge'],
  [/\b(OPR|Opera)\//, 'Opera'],
  [/\bSamsungBrowser\//, 'Samsung Internet'],
  [/\b(Firefox|FxiOS)\//, 'Firefox'],
  [/\b(Chrome|CriOS|HeadlessChrome|Chromium)\//, 'Chrome'],
  [/\bVersion\/[\d.]+.*\bSafari\//, 'Safari'],
];

const PLATFORMS: [RegExp, string][] = [
  [/\biPhone\b/, 'iPhone'],
  [/\biPad\b/, 'iPad'],
  [/\bAndroid\b/, 'Android'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
];

const first = (table: [RegExp, string][], ua: string) => table.find(([pattern]) => pattern.test(ua))?.[1];

/** "Chrome on Linux", "Safari on iPhone", … from a User-Agent header; undefined when it names neither. */
export function browserName(userAgent: unknown): string | undefined {
  if (typeof userAgent !== 'string' || userAgent.length > 1000) return undefined;
  const browser = first(BROWSERS, userAgent);
  const platform = first(PLATFORMS, userAgent);
  if (browser && platform) return `${browser} on ${platform}`;
  return browser ?? platform;
}

/** A new passkey's name: its authenticator's model (from the AAGUID), else the browser and platform it was made in. */
export function defaultPasskeyLabel(aaguid: string, userAgent: unknown, data?: AaguidData): string {
  return authenticatorName(aaguid, data) ?? browserName(userAgent) ?? 'Passkey';
}

// Control characters, line and paragraph separators, private-use, unassigned and surrogate code
// points, and the bidirectional overrides that make a name display as something else.
const UNPRINTABLE = /[\p{Cc}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\u202A-\u202E\u2066-\u2069\uFEFF]/u;

/** A name a user typed, trimmed, or undefined when it is empty, longer than MAX_LABEL characters or unprintable. */
export function validLabel(input: unknown): string | undefined {
  if (typeof input !== 'string' || input.length > MAX_LABEL * 4) return undefined;
  const label = input.trim();
  if (!label || [...label].length > MAX_LABEL || UNPRINTABLE.test(label)) return undefined;
  return label;
}
