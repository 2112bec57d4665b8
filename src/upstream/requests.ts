// Upstream sign-ins under way: started when the browser is sent to the provider, consumed once when
// it comes back (a state or AuthnRequest ID never works twice, nor for another provider, nor late).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from '../store/index.ts';
import * as repo from '../store/upstream.ts';
import type { UpstreamLinkPurpose, UpstreamRequest } from './types.ts';

/** How long a browser may take at the upstream provider. */
export const UPSTREAM_REQUEST_TTL_MS = 10 * 60 * 1000;

const REQUEST_ID = /^u[A-Za-z0-9_-]{32}$/;

/**
 * What the request is for: a sign-in of an interaction, or a link the signed-in user asked for on
 * the account page (bound to the account and the session, never signing anyone in).
 */
export type UpstreamPurpose = { kind: 'sign-in'; interactionUid: string } | ({ kind: 'link' } & UpstreamLinkPurpose);

export interface StartUpstreamRequest {
  providerId: string;
  purpose: UpstreamPurpose;
  nonce?: string;
  codeVerifier?: string;
  /** the random value of the cookie binding the sign-in to the browser that starts it */
  browserBinding: string;
  ttlMs?: number;
  now?: number;
}

/**
 * Records a sign-in going upstream; its id (an OIDC `state`, a SAML AuthnRequest `ID`: a letter
 * and 32 base64url characters, an NCName) is unguessable.
 */
export async function startUpstreamRequest(store: Store, start: StartUpstreamRequest): Promise<UpstreamRequest> {
  const now = start.now ?? Date.now();
  const { purpose } = start;
  const request: UpstreamRequest = {
    id: `u${randomBytes(24).toString('base64url')}`,
    providerId: start.providerId,
    interactionUid: purpose.kind === 'sign-in' ? purpose.interactionUid : '',
    ...(purpose.kind === 'link' ? { link: { userId: purpose.userId, sessionUid: purpose.sessionUid } } : {}),
    createdAt: now,
    expiresAt: now + (start.ttlMs ?? UPSTREAM_REQUEST_TTL_MS),
    ...(start.nonce !== undefined ? { nonce: start.nonce } : {}),
    ...(start.codeVerifier !== undefined ? { codeVerifier: start.codeVerifier } : {}),
  };
  await repo.insertUpstreamRequest(store.db, {
    id: request.id,
    provider_id: request.providerId,
    interaction_uid: request.interactionUid,
    nonce: request.nonce ?? null,
    code_verifier: request.codeVerifier ?? null,
    created_at: request.createdAt,
    expires_at: request.expiresAt,
    browser_hash: bindingHash(start.browserBinding),
    purpose: purpose.kind,
    user_id: request.link?.userId ?? null,
    session_uid: request.link?.sessionUid ?? null,
  });
  return request;
}

/** A new browser-binding value: 32 random bytes, base64url (the cookie's value). */
export function newBrowserBinding(): string {
  return randomBytes(32).toString('base64url');
}

const bindingHash = (value: string) => createHash('sha256').update(value).digest('base64url');

/**
 * Whether the browser delivering an answer is the one that started the sign-in: the SHA-256 of its
 * binding cookie equals the one recorded (compared in constant time). A request without one never matches.
 */
export function sameBrowser(row: Pick<repo.UpstreamRequestRow, 'browser_hash'>, binding: string | undefined): boolean {
  if (row.browser_hash === null || typeof binding !== 'string' || binding.length === 0 || binding.length > 100)
    return false;
  const expected = Buffer.from(row.browser_hash);
  const given = Buffer.from(bindingHash(binding));
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** The request with this id, not consumed: only to see whom an answer is for, before anything is trusted. */
export async function peekUpstreamRequest(store: Store, id: unknown): Promise<repo.UpstreamRequestRow | undefined> {
  if (typeof id !== 'string' || !REQUEST_ID.test(id)) return undefined;
  return repo.findUpstreamRequestRow(store.db, id);
}

/**
 * The request with this id for this provider, once, for the browser that started it: undefined
 * when it does not exist, belongs to another provider, expired, was consumed already, or the
 * browser's binding cookie does not match (then it is left as it was).
 */
export async function consumeUpstreamRequest(
  store: Store,
  id: string,
  providerId: string,
  binding: string | undefined,
  now = Date.now(),
): Promise<UpstreamRequest | undefined> {
  const found = await peekUpstreamRequest(store, id);
  if (!found || !sameBrowser(found, binding)) return undefined;
  const row = await repo.consumeUpstreamRequestRow(store.db, id, providerId, now);
  return row ? requestOf(row) : undefined;
}

export function requestOf(row: repo.UpstreamRequestRow): UpstreamRequest {
  return {
    id: row.id,
    providerId: row.provider_id,
    interactionUid: row.interaction_uid,
    ...(row.purpose === 'link' && row.user_id !== null && row.session_uid !== null
      ? { link: { userId: Number(row.user_id), sessionUid: row.session_uid } }
      : {}),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    ...(row.nonce !== null ? { nonce: row.nonce } : {}),
    ...(row.code_verifier !== null ? { codeVerifier: row.code_verifier } : {}),
  };
}

export { REQUEST_ID };
