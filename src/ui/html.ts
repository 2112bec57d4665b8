// HTML templating with escaping by default: interpolated values are escaped unless they are
// Html produced by this module.
export interface Html {
  readonly __html: string;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

export function raw(value: string): Html {
  return { __html: value };
}

function isHtml(value: unknown): value is Html {
  return typeof value === 'object' && value !== null && typeof (value as Html).__html === 'string';
}

function render(value: unknown): string {
  if (value === undefined || value === null || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  if (isHtml(value)) return value.__html;
  // Anything else interpolated is a primitive (text, numbers); an object would be a mistake in a template.
  return escapeHtml(`${value as string | number | boolean}`);
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return raw(out);
}

export interface Csp {
  /** origins forms may be sent (or redirected) to besides this one */
  formTargets?: string[];
  /** origins the page may frame (front-channel logout iframes); none otherwise */
  frameTargets?: string[];
}

/** A strict policy: own scripts and styles only, no framing, forms to this origin and the
 * origins an authorization or logout response has to redirect to. */
export function contentSecurityPolicy(opts: Csp = {}): string {
  const origins = (list: string[] | undefined) => [
    ...new Set((list ?? []).filter((o) => /^https?:\/\/[^\s;,']+$/.test(o))),
  ];
  const targets = origins(opts.formTargets);
  const frames = origins(opts.frameTargets);
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    `form-action 'self'${targets.map((t) => ` ${t}`).join('')}`,
    ...(frames.length ? [`frame-src ${frames.join(' ')}`] : []),
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export function originOf(uri: unknown): string | undefined {
  if (typeof uri !== 'string') return undefined;
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Headers every HTML page carries. */
export function pageHeaders(csp: Csp = {}): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': contentSecurityPolicy(csp),
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  };
}
