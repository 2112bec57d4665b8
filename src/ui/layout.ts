// The frame every server-rendered page shares: the document, the brand's header and footer, the
// language switcher, and the small parts forms and messages are built from. Every interpolation
// is escaped.
import { html, type Html } from './html.ts';
import { LOCALES, type Locale, type Translate } from './i18n.ts';
import type { PageBrand } from './page-brand.ts';

export interface Frame {
  locale: Locale;
  t: Translate;
  brand: PageBrand;
  /** the path the language switcher returns to */
  here: string;
}

function siteHeader(frame: Frame): Html {
  const { brand, t } = frame;
  if (!brand.name && !brand.logo) return html``;
  // Beside the name the logo is decoration; alone it names the site.
  const logo = brand.logo
    ? html`<img class="site-logo" src="${brand.logo}" alt="${brand.name ? '' : t('brand.logo')}">`
    : html``;
  return html`<header class="site">${logo}${brand.name ? html`<span class="site-name">${brand.name}</span>` : html``}</header>`;
}

function languageSwitcher(frame: Frame): Html {
  const back = encodeURIComponent(frame.here);
  const items = LOCALES.map(({ locale, name }) =>
    locale === frame.locale
      ? html`<li><a href="/language/${locale}?return=${back}" lang="${locale}" hreflang="${locale}" aria-current="true">${name}</a></li>`
      : html`<li><a href="/language/${locale}?return=${back}" lang="${locale}" hreflang="${locale}">${name}</a></li>`,
  );
  return html`<nav class="languages" aria-label="${frame.t('language.label')}"><ul>${items}</ul></nav>`;
}

function siteFooter(frame: Frame): Html {
  const { brand, t } = frame;
  const links = [
    brand.supportUrl ? html`<li><a href="${brand.supportUrl}">${t('brand.support')}</a></li>` : html``,
    brand.privacyUrl ? html`<li><a href="${brand.privacyUrl}">${t('brand.privacy')}</a></li>` : html``,
  ];
  return html`<footer class="site">
${brand.footer ? html`<p class="site-footer-text">${brand.footer}</p>` : html``}
${brand.supportUrl || brand.privacyUrl ? html`<nav class="site-links" aria-label="${t('brand.links')}"><ul>${links}</ul></nav>` : html``}
${languageSwitcher(frame)}
</footer>`;
}

export interface LayoutOptions {
  /** a wide page (tables) instead of the sign-in card */
  wide?: boolean;
  /** above the card: the console's navigation */
  header?: Html;
}

export function layout(
  frame: Frame,
  title: string,
  body: Html,
  scripts: string[] = [],
  options: LayoutOptions = {},
): string {
  const { brand } = frame;
  return `<!doctype html>${
    html`<html lang="${frame.locale}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${brand.name ? `${title} – ${brand.name}` : title}</title>
<link rel="stylesheet" href="/static/style.css">
${brand.stylesheet ? html`<link rel="stylesheet" href="${brand.stylesheet}">` : html``}
${scripts.map((s) => html`<script src="${s}" defer></script>`)}
</head>
<body>
${siteHeader(frame)}
${options.header ?? html``}
<main class="${options.wide ? 'card wide' : 'card'}">
${body}
</main>
${siteFooter(frame)}
</body>
</html>
`.__html
  }`;
}

export const hidden = (name: string, value: string) => html`<input type="hidden" name="${name}" value="${value}">`;

export interface CsrfField {
  field: string;
  token: string;
}

export function alert(message: string | undefined): Html {
  return message ? html`<p class="alert" role="alert">${message}</p>` : html``;
}

export function notice(message: string | undefined): Html {
  return message ? html`<p class="notice" role="status">${message}</p>` : html``;
}

export interface MessageView {
  title: string;
  /** what happened */
  message: string;
  /** what to do about it */
  advice?: string;
  /** the request id, for the helpdesk to find the request in the logs */
  reference?: string;
  link?: { href: string; text: string };
}

export function messagePage(frame: Frame, v: MessageView): string {
  const body = html`
<h1>${v.title}</h1>
<p class="message">${v.message}</p>
${v.advice ? html`<p class="advice">${v.advice}</p>` : html``}
${v.link ? html`<p><a href="${v.link.href}">${v.link.text}</a></p>` : html``}
${v.reference ? html`<p class="hint reference">${frame.t('error.reference', { id: v.reference })}</p>` : html``}`;
  return layout(frame, v.title, body);
}
