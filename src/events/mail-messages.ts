// The e-mail messages, in English and Norwegian Bokmål, each as plain text and as HTML in the
// organization's look (name, accent colour, logo). The HTML loads nothing from elsewhere: the
// logo travels with the message as an inline part (cid:), the styles are inline, and every value
// interpolated is escaped (src/ui/html.ts). Only the message itself ever holds a link's secret.
import { textOn, type Brand } from '../brand.ts';
import { formatTime, type Locale } from '../ui/i18n.ts';
import { html, type Html } from '../ui/html.ts';
import type { ActorLabel, Notice } from '../store/mail.ts';

const en = {
  'link.button': 'Create your passkey',
  'link.fallback': 'If the button does not work, copy this address into your browser:',
  'link.expires': 'The link works once, until {time}.',
  'invitation.subject': 'Create your passkey for {org}',
  'invitation.intro':
    'You are invited to sign in to {org} with a passkey: the phone, computer or security key you already have, with no password to remember or type.',
  'invitation.ignore': 'If you did not expect this message, you can ignore it: nothing changes until the link is used.',
  'reminder.subject': 'Reminder: create your passkey for {org}',
  'reminder.intro':
    'A while ago you were invited to sign in to {org} with a passkey, and you have not created one yet. Here is a new link; the earlier one no longer works.',
  'recovery.subject': 'Register a new passkey for {org}',
  'recovery.intro':
    'Someone, probably you, asked for a link to register a new passkey for your account ({eppn}) because a passkey was lost.',
  'recovery.ignore':
    'If it was not you, ignore this message: your account is unchanged, and the link is useless to anyone without this mailbox.',
  'notice.subject.passkey_added': 'A passkey was added to your account',
  'notice.subject.passkey_removed': 'A passkey was removed from your account',
  'notice.subject.password_changed': 'Your password was changed',
  'notice.subject.password_removed': 'Your password was removed',
  'notice.subject.recovery_link_created': 'A recovery link was made for your account',
  'notice.subject.recovery_link_used': 'A recovery link was used on your account',
  'notice.subject.email_changed': 'The e-mail address of your account was changed',
  'notice.what.passkey_added': 'A passkey was added to your account {eppn}.',
  'notice.what.passkey_removed': 'A passkey was removed from your account {eppn}.',
  'notice.what.password_changed': 'The password of your account {eppn} was changed.',
  'notice.what.password_removed': 'The password of your account {eppn} was removed: it signs in with passkeys only.',
  'notice.what.recovery_link_created':
    'A one-time link that lets whoever holds it register a passkey for your account {eppn} was made.',
  'notice.what.recovery_link_used': 'A one-time recovery link was used to register a passkey for your account {eppn}.',
  'notice.what.email_changed':
    'The e-mail address of your account {eppn} was changed: its messages, recovery links among them, go to the new address.',
  'notice.when': 'When: {time}',
  'notice.by': 'By: {who}',
  'notice.advice':
    'If this was you, or you asked your helpdesk for it, there is nothing to do. If it was not, contact your helpdesk at once: someone may have access to your account.',
  'notice.help': 'Help: {url}',
  'by.you': 'you',
  'by.helpdesk': 'your organization’s helpdesk',
  'by.org-admin': 'an administrator of your organization',
  'by.operator': 'the service’s operators',
  'by.application': 'an application your organization uses',
  'by.directory': 'your organization’s user directory',
  'by.system': 'the service',
  'by.recovery_link': 'whoever used a recovery link',
  'footer.sent': 'This message was sent by {org} to {email}.',
};

type Key = keyof typeof en;

const nb: Record<Key, string> = {
  'link.button': 'Lag passnøkkelen din',
  'link.fallback': 'Virker ikke knappen, kopier denne adressen inn i nettleseren:',
  'link.expires': 'Lenken virker én gang, til {time}.',
  'invitation.subject': 'Lag passnøkkelen din for {org}',
  'invitation.intro':
    'Du er invitert til å logge inn på {org} med en passnøkkel: telefonen, datamaskinen eller sikkerhetsnøkkelen du allerede har, uten passord å huske eller skrive.',
  'invitation.ignore': 'Ventet du ikke denne meldingen, kan du se bort fra den: ingenting endres før lenken brukes.',
  'reminder.subject': 'Påminnelse: lag passnøkkelen din for {org}',
  'reminder.intro':
    'For en tid siden ble du invitert til å logge inn på {org} med en passnøkkel, og du har ikke laget en ennå. Her er en ny lenke; den forrige virker ikke lenger.',
  'recovery.subject': 'Registrer en ny passnøkkel for {org}',
  'recovery.intro':
    'Noen, sannsynligvis du, ba om en lenke for å registrere en ny passnøkkel for kontoen din ({eppn}) fordi en passnøkkel er borte.',
  'recovery.ignore':
    'Var det ikke deg, kan du se bort fra meldingen: kontoen din er uendret, og lenken er ubrukelig for andre enn den som har denne e-postkassen.',
  'notice.subject.passkey_added': 'En passnøkkel ble lagt til kontoen din',
  'notice.subject.passkey_removed': 'En passnøkkel ble fjernet fra kontoen din',
  'notice.subject.password_changed': 'Passordet ditt ble endret',
  'notice.subject.password_removed': 'Passordet ditt ble fjernet',
  'notice.subject.recovery_link_created': 'Det ble laget en gjenopprettingslenke for kontoen din',
  'notice.subject.recovery_link_used': 'En gjenopprettingslenke ble brukt på kontoen din',
  'notice.subject.email_changed': 'E-postadressen til kontoen din ble endret',
  'notice.what.passkey_added': 'En passnøkkel ble lagt til kontoen din {eppn}.',
  'notice.what.passkey_removed': 'En passnøkkel ble fjernet fra kontoen din {eppn}.',
  'notice.what.password_changed': 'Passordet til kontoen din {eppn} ble endret.',
  'notice.what.password_removed': 'Passordet til kontoen din {eppn} ble fjernet: den logger inn bare med passnøkler.',
  'notice.what.recovery_link_created':
    'Det ble laget en engangslenke som lar den som har den registrere en passnøkkel for kontoen din {eppn}.',
  'notice.what.recovery_link_used':
    'En engangslenke for gjenoppretting ble brukt til å registrere en passnøkkel for kontoen din {eppn}.',
  'notice.what.email_changed':
    'E-postadressen til kontoen din {eppn} ble endret: meldingene dens, også gjenopprettingslenker, går til den nye adressen.',
  'notice.when': 'Når: {time}',
  'notice.by': 'Av: {who}',
  'notice.advice':
    'Var det deg, eller ba du brukerstøtte om det, trenger du ikke gjøre noe. Var det ikke deg, kontakt brukerstøtte med en gang: noen kan ha tilgang til kontoen din.',
  'notice.help': 'Hjelp: {url}',
  'by.you': 'deg',
  'by.helpdesk': 'brukerstøtten i organisasjonen din',
  'by.org-admin': 'en administrator i organisasjonen din',
  'by.operator': 'driftsteamet for tjenesten',
  'by.application': 'en applikasjon organisasjonen din bruker',
  'by.directory': 'brukerkatalogen i organisasjonen din',
  'by.system': 'tjenesten',
  'by.recovery_link': 'den som brukte en gjenopprettingslenke',
  'footer.sent': 'Denne meldingen ble sendt av {org} til {email}.',
};

const CATALOG: Record<Locale, Record<Key, string>> = { en, nb };

function say(locale: Locale, key: Key, values: Record<string, string> = {}): string {
  return CATALOG[locale][key].replace(/\{(\w+)\}/g, (_, name: string) => values[name] ?? '');
}

export interface Message {
  subject: string;
  text: string;
  html: string;
  /** the logo, sent inline */
  attachments: { filename: string; content: Buffer; contentType: string; cid: string }[];
}

interface Common {
  locale: Locale;
  brand: Brand;
  /** the organization's name when its brand names none */
  orgName: string;
  eppn: string;
  email: string;
}

export type MessageInput = Common &
  (
    | { kind: 'invitation' | 'reminder' | 'recovery'; url: string; expiresAt: number }
    | { kind: 'notification'; notice: Notice; by: ActorLabel; at: number }
  );

const LOGO_CID = 'logo@idp';
const DEFAULT_ACCENT = '#1a56b0';

/** The accent for the button and links: the brand's (checked for contrast on light when set). */
const accentOf = (brand: Brand) => brand.color ?? DEFAULT_ACCENT;

const paragraph = (p: Html) => html`<p style="margin:0 0 12px">${p}</p>`;

/** The message's HTML: the brand's logo or name, the title, the first paragraph, the button, the rest. */
function frame(input: Common, title: string, paragraphs: Html[], button?: { label: string; url: string }): Html {
  const accent = accentOf(input.brand);
  const name = input.brand.name ?? input.orgName;
  const logo = input.brand.logo
    ? html`<img src="cid:${LOGO_CID}" alt="${name}" style="max-height:48px;max-width:200px;display:block;margin:0 0 16px">`
    : html`<p style="font-size:18px;font-weight:bold;margin:0 0 16px;color:${accent}">${name}</p>`;
  const action = button
    ? html`<p style="margin:24px 0"><a href="${button.url}" style="background:${accent};color:${textOn(accent)};padding:12px 20px;border-radius:6px;text-decoration:none;font-weight:bold;display:inline-block">${button.label}</a></p>`
    : '';
  const footer = [say(input.locale, 'footer.sent', { org: name, email: input.email }), input.brand.footer ?? ''].filter(
    Boolean,
  );
  return html`<!DOCTYPE html>
<html lang="${input.locale}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>
<body style="margin:0;padding:0;background:#f4f4f6;font-family:Arial,Helvetica,sans-serif;color:#1e1e23">
<div style="max-width:560px;margin:0 auto;padding:24px">
<div style="background:#ffffff;border-radius:8px;padding:24px">
${logo}<h1 style="font-size:20px;margin:0 0 16px">${title}</h1>
${paragraphs.slice(0, 1).map(paragraph)}${action}${paragraphs.slice(1).map(paragraph)}
</div>
${footer.map((f) => html`<p style="font-size:12px;color:#55555f;margin:12px 0 0">${f}</p>`)}
</div></body></html>
`;
}

function linkMessage(input: Common & { kind: 'invitation' | 'reminder' | 'recovery'; url: string; expiresAt: number }) {
  const { locale } = input;
  const org = input.brand.name ?? input.orgName;
  const values = { org, eppn: input.eppn, time: formatTime(input.expiresAt, locale)! };
  const subject = say(locale, `${input.kind}.subject`, values);
  const intro = say(locale, `${input.kind}.intro`, values);
  const ignore = say(locale, input.kind === 'recovery' ? 'recovery.ignore' : 'invitation.ignore', values);
  const expires = say(locale, 'link.expires', values);
  const button = say(locale, 'link.button');
  const fallback = say(locale, 'link.fallback');
  const text = [intro, '', `${button}:`, input.url, '', expires, '', ignore, ...footerText(input)].join('\n');
  const body = frame(
    input,
    subject,
    [
      html`${intro}`,
      html`${expires}`,
      html`${fallback}<br><a href="${input.url}" style="color:${accentOf(input.brand)};word-break:break-all">${input.url}</a>`,
      html`${ignore}`,
    ],
    { label: button, url: input.url },
  );
  return { subject, text, html: body };
}

function footerText(input: Common): string[] {
  const org = input.brand.name ?? input.orgName;
  return [
    '',
    '--',
    say(input.locale, 'footer.sent', { org, email: input.email }),
    ...(input.brand.footer ? [input.brand.footer] : []),
  ];
}

function notification(input: Common & { notice: Notice; by: ActorLabel; at: number }) {
  const { locale } = input;
  const subject = say(locale, `notice.subject.${input.notice}`);
  const what = say(locale, `notice.what.${input.notice}`, { eppn: input.eppn });
  const when = say(locale, 'notice.when', { time: formatTime(input.at, locale)! });
  const by = say(locale, 'notice.by', { who: say(locale, `by.${input.by}`) });
  const advice = say(locale, 'notice.advice');
  const help = input.brand.supportUrl ? say(locale, 'notice.help', { url: input.brand.supportUrl }) : undefined;
  const text = [what, '', when, by, '', advice, ...(help ? ['', help] : []), ...footerText(input)].join('\n');
  const paragraphs = [html`${what}`, html`${when}<br>${by}`, html`${advice}`];
  if (input.brand.supportUrl)
    paragraphs.push(
      html`<a href="${input.brand.supportUrl}" style="color:${accentOf(input.brand)}">${input.brand.supportUrl}</a>`,
    );
  return { subject, text, html: frame(input, subject, paragraphs) };
}

/** The message, ready for the mail server. */
export function buildMessage(input: MessageInput): Message {
  const built = input.kind === 'notification' ? notification(input) : linkMessage(input);
  const logo = input.brand.logo;
  return {
    subject: built.subject,
    text: built.text,
    html: built.html.__html,
    attachments: logo
      ? [
          {
            filename: `logo.${logo.type.split('/')[1]!.replace('+xml', '')}`,
            content: logo.data,
            contentType: logo.type,
            cid: LOGO_CID,
          },
        ]
      : [],
  };
}
