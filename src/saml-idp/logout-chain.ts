// Single logout's propagation state: which SAML SPs of the ended session still get a LogoutRequest,
// which LogoutResponse is awaited, whether any SP could not be signed out, and who asked (an SP,
// answered at the end with its LogoutResponse, or an OpenID Connect logout, which continues to its
// redirect). It rides in a cookie of its own, sealed (AES-256-GCM under a key derived from the
// service's secret, bound to this use), bounded in size and in time.
import { open, seal } from '../crypto.ts';
import type { Binding } from './requests.ts';

/** An SP to send a LogoutRequest to: the NameID and SessionIndex exactly as its assertion had them. */
export interface LogoutTarget {
  sp: string;
  nameId: string;
  format: string;
  sessionIndex: string;
}

export type LogoutInitiator =
  | { kind: 'saml'; sp: string; id: string; binding: Binding; relayState?: string }
  | { kind: 'oidc'; continueTo: string };

export interface LogoutChain {
  initiator: LogoutInitiator;
  /** SPs still to be sent a LogoutRequest, in order */
  queue: LogoutTarget[];
  /** the LogoutRequest whose LogoutResponse is awaited */
  waiting?: { sp: string; id: string };
  /** an SP could not be signed out (no logout endpoint, a non-success answer, left out by the bounds) */
  partial: boolean;
  /** when the chain began */
  at: number;
}

/** The cookie, sent only to the identity provider's SAML endpoints. */
export const CHAIN_COOKIE = 'saml_logout';
const COOKIE_PATH = '/saml2/idp';
/** A chain not finished in this time is over: its LogoutResponses are refused. */
export const CHAIN_TTL_MS = 10 * 60_000;
/** At most this many other SPs get a LogoutRequest; any beyond make the logout partial. */
export const MAX_CHAIN_SPS = 8;
/** Browsers keep cookies of up to 4096 bytes with the name and attributes. */
const MAX_SEALED = 3600;
const AAD = 'saml-logout-chain';

const sealChain = (key: Buffer, chain: LogoutChain) => seal(key, Buffer.from(JSON.stringify(chain)), AAD);

/**
 * The chain bounded: at most MAX_CHAIN_SPS SPs, and no more than the cookie can carry; those left
 * out make the logout partial.
 */
export function boundChain(key: Buffer, chain: LogoutChain): LogoutChain {
  let bounded: LogoutChain =
    chain.queue.length > MAX_CHAIN_SPS
      ? { ...chain, queue: chain.queue.slice(0, MAX_CHAIN_SPS), partial: true }
      : chain;
  while (sealChain(key, bounded).length > MAX_SEALED && bounded.queue.length > 0) {
    bounded = { ...bounded, queue: bounded.queue.slice(0, -1), partial: true };
  }
  return bounded;
}

function cookieAttributes(secure: boolean, maxAge: number): string {
  // Over https SameSite=None, so an SP's LogoutResponse posted from its own site (HTTP-POST) still
  // finds the chain; browsers take SameSite=None only on a Secure cookie, so plain http gets Lax.
  const site = secure ? 'SameSite=None; Secure' : 'SameSite=Lax';
  return `Path=${COOKIE_PATH}; HttpOnly; ${site}; Max-Age=${maxAge}`;
}

/** The Set-Cookie header value that keeps the chain. */
export function chainCookie(key: Buffer, chain: LogoutChain, secure: boolean): string {
  return `${CHAIN_COOKIE}=${sealChain(key, chain)}; ${cookieAttributes(secure, CHAIN_TTL_MS / 1000)}`;
}

/** The Set-Cookie header value that ends it. */
export const clearedChainCookie = (secure: boolean) => `${CHAIN_COOKIE}=; ${cookieAttributes(secure, 0)}`;

function cookieValue(header: string | undefined): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === CHAIN_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The chain of this browser, if it has one, intact and not expired. */
export function readChain(key: Buffer, cookieHeader: string | undefined, now: number): LogoutChain | undefined {
  const box = cookieValue(cookieHeader);
  if (!box || box.length > MAX_SEALED) return undefined;
  const plain = open(key, box, AAD);
  if (!plain) return undefined;
  try {
    const chain = JSON.parse(plain.toString('utf8')) as LogoutChain;
    if (typeof chain.at !== 'number' || now - chain.at > CHAIN_TTL_MS || !Array.isArray(chain.queue)) return undefined;
    return chain;
  } catch {
    return undefined;
  }
}
