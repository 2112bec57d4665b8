// A real SMTP server for the tests (the npm smtp-server package) on a loopback port: it accepts
// mail with the credentials it was given and keeps every message, parsed (mailparser).
import { SMTPServer } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';
import assert from 'node:assert/strict';
import { p256Credential, pickFreePort } from '../helpers.ts';
import { attestation } from '../authenticator.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';

export const SMTP_USER = 'idp';
export const SMTP_PASSWORD = 'p@ss word/with:signs';

export interface Received {
  to: string;
  subject: string;
  text: string;
  html: string;
  lang: string | undefined;
  parsed: ParsedMail;
}

export interface TestSmtp {
  port: number;
  /** SMTP_URL for the service, credentials percent-encoded */
  url: string;
  messages: Received[];
  /** the messages to one address */
  to(address: string): Received[];
  /** waits until there are n messages (all addresses), at most ms */
  waitFor(n: number, ms?: number): Promise<Received[]>;
  stop(): Promise<void>;
  /** starts again on the same port (after stop) */
  start(): Promise<void>;
}

export async function startSmtp(): Promise<TestSmtp> {
  const port = await pickFreePort();
  const messages: Received[] = [];
  let server: SMTPServer | undefined;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = new SMTPServer({
        disabledCommands: ['STARTTLS'],
        closeTimeout: 200,
        allowInsecureAuth: true,
        logger: false,
        onAuth(auth, _session, callback) {
          if (auth.username === SMTP_USER && auth.password === SMTP_PASSWORD) return callback(null, { user: 1 });
          return callback(new Error('Invalid username or password'));
        },
        onData(stream, session, callback) {
          simpleParser(stream).then(
            (parsed) => {
              const html = typeof parsed.html === 'string' ? parsed.html : '';
              messages.push({
                to: session.envelope.rcptTo.map((r) => r.address).join(','),
                subject: parsed.subject ?? '',
                text: parsed.text ?? '',
                html,
                lang: /<html lang="([^"]+)"/.exec(html)?.[1],
                parsed,
              });
              callback();
            },
            (err: Error) => callback(err),
          );
        },
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  await listen();
  return {
    port,
    url: `smtp://${encodeURIComponent(SMTP_USER)}:${encodeURIComponent(SMTP_PASSWORD)}@127.0.0.1:${port}`,
    messages,
    to: (address) => messages.filter((m) => m.to === address),
    async waitFor(n, ms = 15_000) {
      const until = Date.now() + ms;
      while (messages.length < n) {
        if (Date.now() > until) throw new Error(`expected ${n} messages, got ${messages.length}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return messages;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        const s = server;
        server = undefined;
        if (!s) return resolve();
        s.close(() => resolve());
      }),
    start: listen,
  };
}

/** The recovery link in a message's text. */
export function linkIn(text: string): string {
  const m = /https?:\/\/[^\s/]+\/recover\/[A-Za-z0-9_-]{43}/.exec(text);
  if (!m) throw new Error(`no link in:\n${text}`);
  return m[0];
}

/** A small browser over real HTTP: keeps cookies, posts forms. */
export function httpBrowser(base: string) {
  const jar = new Map<string, string>();
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const at = pair!.indexOf('=');
      jar.set(pair!.slice(0, at), pair!.slice(at + 1));
    }
    return res;
  };
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const request = async (path: string, init: RequestInit = {}) => {
    const res = keep(
      await fetch(`${base}${path}`, {
        redirect: 'manual',
        ...init,
        headers: { cookie: cookie(), ...(init.headers as Record<string, string>) },
      }),
    );
    return { status: res.status, headers: res.headers, body: await res.text() };
  };
  return {
    get: (path: string, headers: Record<string, string> = {}) => request(path, { headers }),
    postForm: (path: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
      request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form).toString(),
      }),
    postJson: (path: string, json: unknown, headers: Record<string, string> = {}) =>
      request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(json),
      }),
  };
}

export const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

/** Registers a passkey through a recovery link's page, over real HTTP; the final answer. */
export async function registerThroughLink(base: string, link: string) {
  const path = new URL(link).pathname;
  const b = httpBrowser(base);
  const page = await b.get(path);
  if (page.status !== 200) return page;
  const csrf = csrfOf(page.body);
  const options = await b.postJson(`${path}/options`, {}, { 'x-csrf-token': csrf });
  assert.equal(options.status, 200, options.body);
  const { challenge } = JSON.parse(options.body) as { challenge: string };
  const response = attestation(p256Credential(), challenge, ZERO_AAGUID);
  return b.postForm(path, { _csrf: csrf, response: JSON.stringify(response) });
}
