// What a queued message is written from (the `data` of its outbox event, src/store/mail.ts), and
// the one way a recovery link is queued for a user by e-mail. The link's secret is sealed under a
// key derived from IDP_SECRET, bound to the user and the link, so the outbox never holds a usable
// link in clear; the delivery job opens it to write the message and nothing else ever shows it.
import type { Transaction } from 'kysely';
import type { DB } from '../store/schema.ts';
import type { User } from '../store/directory.ts';
import { insertMail, type MailKind } from '../store/mail.ts';
import { open, seal, type Keyring } from '../crypto.ts';

/** A message that carries a recovery link: an invitation, its reminder, or a self-service recovery. */
export interface LinkMailData {
  eppn: string;
  org_id: number;
  link_id: number;
  /** the link's secret, sealed (sealLink) */
  link: string;
  expires_at: number;
  /** en or nb when the sender chose; else the user's language */
  lang?: string;
}

/** A security notification. */
export interface NoticeMailData {
  eppn: string;
  org_id: number;
  notice: string;
  by: string;
  at: number;
  /** the address it goes to, when not the user's own at sending time (an address changed away from) */
  to?: string;
}

const aad = (eppn: string, linkId: number) => `mail-link:${eppn}:${linkId}`;

export function sealLink(keys: Keyring, eppn: string, linkId: number, token: string): string {
  return seal(keys.eventSecrets, Buffer.from(token), aad(eppn, linkId));
}

export function openLink(keys: Keyring, data: LinkMailData): string | undefined {
  return open(keys.eventSecrets, data.link, aad(data.eppn, data.link_id))?.toString('utf8');
}

/** Queues the message carrying a new link, in the link's transaction (createRecoveryLink's `within`). */
export async function queueLinkMail(
  trx: Transaction<DB>,
  keys: Keyring,
  m: {
    kind: Extract<MailKind, 'invitation' | 'reminder' | 'recovery'>;
    user: User;
    link: { id: number; token: string; expires_at: string };
    lang?: string;
    at: number;
  },
): Promise<number> {
  const data: LinkMailData = {
    eppn: m.user.eppn,
    org_id: m.user.org_id,
    link_id: m.link.id,
    link: sealLink(keys, m.user.eppn, m.link.id, m.link.token),
    expires_at: Date.parse(m.link.expires_at),
    ...(m.lang ? { lang: m.lang } : {}),
  };
  return insertMail(trx, { at: m.at, kind: m.kind, eppn: m.user.eppn, data });
}
