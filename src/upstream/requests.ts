// Upstream sign-ins under way: started when the browser is sent to the provider, consumed once when
// it comes back (a state or AuthnRequest ID never works twice, nor for another provider, nor late).
import { randomBytes } from 'node:crypto';
import type { Store } from '../store/index.ts';
import * as repo from '../store/upstream.ts';
import type { UpstreamRequest } from './types.ts';

/** How long a browser may take at the upstream provider. */
export const UPSTREAM_REQUEST_TTL_MS = 10 * 60 * 1000;

const REQUEST_ID = /^u[A-Za-z0-9_-]{32}$/;

export interface StartUpstreamRequest {
  providerId: string;
  interactionUid: string;
  nonce?: string;
  codeVerifier?: string;
  ttlMs?: number;
  now?: number;
}

/**
 * Records a sign-in going upstream; its id (an OIDC `state`, a SAML AuthnRequest `ID`: a letter
 * and 32 base64url characters, an NCName) is unguessable.
 */
export async function startUpstreamRequest(store: Store, start: StartUpstreamRequest): Promise<UpstreamRequest> {
  const now = start.now ?? Date.now();
  const request: UpstreamRequest = {
    id: `u${randomBytes(24).toString('base64url')}`,
    providerId: start.providerId,
    interactionUid: start.interactionUid,
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
  });
  return request;
}

/**
 * The request with this id for this provider, once: undefined when it does not exist, belongs to
 * another provider, expired, or was consumed already.
 */
export async function consumeUpstreamRequest(
  store: Store,
  id: string,
  providerId: string,
  now = Date.now(),
): Promise<UpstreamRequest | undefined> {
  if (typeof id !== 'string' || !REQUEST_ID.test(id)) return undefined;
  const row = await repo.consumeUpstreamRequestRow(store.db, id, providerId, now);
  return row ? requestOf(row) : undefined;
}

export function requestOf(row: repo.UpstreamRequestRow): UpstreamRequest {
  return {
    id: row.id,
    providerId: row.provider_id,
    interactionUid: row.interaction_uid,
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    ...(row.nonce !== null ? { nonce: row.nonce } : {}),
    ...(row.code_verifier !== null ? { codeVerifier: row.code_verifier } : {}),
  };
}

export { REQUEST_ID };
