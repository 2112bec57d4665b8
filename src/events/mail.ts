// Sending the outbox's e-mail (deliveries to `mail:<kind>`, src/store/mail.ts) through SMTP_URL.
// The message is written at sending time, from the user as they are then (address, language) and
// their organization's look; a message whose user, address or link is gone is given up, never
// sent somewhere stale. Connections are pooled and every wait is bounded, so a slow mail server
// holds only its own deliveries, which the delivery job retries with backoff.
import { randomUUID } from 'node:crypto';
import { createTransport, type Transporter } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import type { Brand } from '../brand.ts';
import { parseStoredBrand } from '../brand.ts';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import { errorText } from '../errors.ts';
import type { Store } from '../store/index.ts';
import { isLocale, type Locale } from '../ui/i18n.ts';
import { openLink, type LinkMailData, type NoticeMailData } from '../webauthn/mail-links.ts';
import { RECOVERY_PATH } from '../webauthn/recovery-links.ts';
import { buildMessage } from './mail-messages.ts';
import {
  ACTORS,
  findMailContexts,
  mailContextKey,
  NOTICES,
  type ActorLabel,
  type MailContext,
  type MailContextKey,
  type Notice,
} from '../store/mail.ts';

/** Connect, greeting and idle limits: a mail server that stops answering fails the attempt. */
const CONNECTION_TIMEOUT_MS = 10_000;
const SOCKET_TIMEOUT_MS = 30_000;

export interface Mailer {
  send(message: { to: string; subject: string; text: string; html: string; attachments: object[] }): Promise<void>;
  close(): void;
}

/** The pooled SMTP transport of SMTP_URL; undefined when no mail server is configured. */
export function createMailer(config: Pick<Config, 'smtpUrl' | 'smtpFrom'>): Mailer | undefined {
  if (!config.smtpUrl || !config.smtpFrom) return undefined;
  const transport: Transporter = createTransport({
    url: config.smtpUrl,
    pool: true,
    maxConnections: 3,
    maxMessages: 100,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    greetingTimeout: CONNECTION_TIMEOUT_MS,
    socketTimeout: SOCKET_TIMEOUT_MS,
    // nodemailer's own logger would print addresses and the SMTP conversation
    logger: false,
    debug: false,
  });
  const from = config.smtpFrom;
  // The Message-ID's domain is the sender's, as nodemailer would choose it; made here, the id costs
  // one random UUID instead of nodemailer's five random draws and a parse of the addresses.
  const domain = /@([^\s@<>]+)>?\s*$/.exec(from)?.[1] ?? 'localhost';
  return {
    async send(message) {
      const node = new MailComposer({
        from,
        messageId: `<${randomUUID()}@${domain}>`,
        ...message,
        // the stored address alone, never parsed for a display name and another address it may hide
        to: { name: '', address: message.to },
        disableFileAccess: true,
        disableUrlAccess: true,
      }).compile();
      // Written whole before it is sent: streamed, the message would reach the socket a line (a
      // write) at a time, which costs more than writing it.
      const envelope = node.getEnvelope();
      await transport.sendMail({ envelope, raw: await node.build() });
    },
    close: () => transport.close(),
  };
}

export interface MailDeps {
  store: Store;
  keys: Keyring;
  publicUrl: string;
  /** the deployment's brand (BRAND_*), under each organization's own */
  brand: Brand;
  /** undefined: SMTP_URL is not set; queued messages wait (and are given up in the end) */
  mailer: Mailer | undefined;
}

export type MailOutcome = { ok: true } | { ok: false; error: string } | { gone: string };

function localeOf(...candidates: (string | null | undefined)[]): Locale {
  return candidates.find(isLocale) ?? 'en';
}

type MailData = LinkMailData & NoticeMailData;

/** Whose context a queued message of this kind is written from. */
function contextKey(kind: string, d: MailData): MailContextKey {
  return { eppn: d.eppn, linkId: withLink(kind) && Number.isSafeInteger(d.link_id) ? d.link_id : undefined };
}

const withLink = (kind: string) => kind === 'invitation' || kind === 'reminder' || kind === 'recovery';

/** What a batch of queued messages is written from, read together (src/store/mail.ts). */
export type MailContexts = Map<string, MailContext>;

export async function mailContexts(deps: MailDeps, messages: { kind: string; data: string }[]): Promise<MailContexts> {
  const keys = messages.flatMap(({ kind, data }) => {
    try {
      const d = JSON.parse(data) as MailData;
      return typeof d.eppn === 'string' ? [contextKey(kind, d)] : [];
    } catch {
      return []; // sendMail gives it up
    }
  });
  return findMailContexts(deps.store.db, keys);
}

/** Writes and sends one queued message, from its batch's contexts when they were read together. */
export async function sendMail(deps: MailDeps, kind: string, data: string, batch?: MailContexts): Promise<MailOutcome> {
  if (!deps.mailer) return { ok: false, error: 'mail is not configured (SMTP_URL is not set)' };
  const d = JSON.parse(data) as MailData;
  if (typeof d.eppn !== 'string') return { gone: 'a message without its user' };
  const key = contextKey(kind, d);
  const contexts = batch ?? (await findMailContexts(deps.store.db, [key]));
  const context = contexts.get(mailContextKey(key));
  if (!context) return { gone: 'the user no longer exists' };
  const { user, org, link } = context;
  // a notice of an address changed goes to the old address, which the service wrote itself
  const to = kind === 'notification' && typeof d.to === 'string' && d.to ? d.to : user.email;
  if (!to) return { gone: 'the user has no e-mail address' };
  const common = {
    locale: localeOf(d.lang, user.language),
    brand: { ...deps.brand, ...parseStoredBrand(org.branding) },
    orgName: org.name,
    eppn: user.eppn,
    email: to,
  };
  let message;
  if (kind === 'notification') {
    if (!NOTICES.includes(d.notice as Notice)) return { gone: `unknown notice '${d.notice}'` };
    const by = ACTORS.includes(d.by as ActorLabel) ? (d.by as ActorLabel) : 'system';
    message = buildMessage({ ...common, kind, notice: d.notice as Notice, by, at: d.at });
  } else if (withLink(kind)) {
    if (user.disabled_at !== null) return { gone: 'the user is disabled' };
    if (!link || link.user_id !== user.id || link.used_at !== null || link.revoked_at !== null)
      return { gone: 'the link was used or revoked' };
    if (link.expires_at <= Date.now()) return { gone: 'the link expired before it could be sent' };
    const token = openLink(deps.keys, d);
    if (!token) return { gone: 'the link cannot be opened with this IDP_SECRET' };
    const url = `${deps.publicUrl}${RECOVERY_PATH}${token}`;
    message = buildMessage({ ...common, kind, url, expiresAt: Number(link.expires_at) });
  } else {
    return { gone: `unknown message kind '${kind}'` };
  }
  try {
    await deps.mailer.send({ to, ...message });
    return { ok: true };
  } catch (err) {
    return { ok: false, error: errorText(err) };
  }
}
