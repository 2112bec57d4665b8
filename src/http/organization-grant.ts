// The steps every organization-scoped API shares (the passkey API, the recovery link API): the
// organization named in the path together with the calling client's grant, then the checks in the
// documented order — the client still active, granted this organization, the eppn of its realm.
import type { FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import { findOrganizationWithGrant } from '../store/clients.ts';
import { badRequest, forbidden, notFound } from '../errors.ts';
import { tokenNoLongerValid, type AccessToken, type TokenVerifier } from './bearer.ts';

export interface GrantedOrganization {
  id: number;
  realm: string;
  /** whether the calling client may administer it */
  granted: boolean;
  /** false when an operator disabled the calling client after the token was issued */
  clientActive: boolean;
}

/** A path id: digits only, positive; anything else names no organization (or passkey, or link). */
export function positiveId(raw: string): number | undefined {
  if (!/^[0-9]{1,15}$/.test(raw)) return undefined;
  const n = Number(raw);
  return n > 0 ? n : undefined;
}

export function requireOrganization(org: GrantedOrganization | undefined): GrantedOrganization {
  if (!org) throw notFound('Organization does not exist');
  return org;
}

/** Loads the organization together with the caller's grant (one query), checked in the next steps. */
export async function loadOrganization(
  store: Store,
  token: AccessToken,
  rawOrgId: string,
): Promise<GrantedOrganization> {
  const id = positiveId(rawOrgId);
  return requireOrganization(
    id === undefined ? undefined : await findOrganizationWithGrant(store.db, id, token.clientId, 'admin'),
  );
}

export function checkClientGrant(org: GrantedOrganization): void {
  if (!org.granted) throw forbidden('Client not authorized for organization');
}

/** A disabled client's tokens stop working at once, though they still verify. */
export function checkClientActive(request: FastifyRequest, verifier: TokenVerifier, org: GrantedOrganization): void {
  if (!org.clientActive) throw tokenNoLongerValid(request, verifier, 'The client of this token is disabled');
}

export function checkRealm(eppn: string | null, org: GrantedOrganization): void {
  if (eppn === null) return;
  const realm = eppn.slice(eppn.lastIndexOf('@') + 1);
  if (realm !== org.realm) throw forbidden(`eppn realm '${realm}' does not match organization`);
}

/** The raw query string, split by hand: unknown and repeated parameters are errors, not guesses. */
export function parseQuery<Name extends string>(
  request: FastifyRequest,
  allowed: readonly Name[],
): Partial<Record<Name, string>> {
  const at = request.url.indexOf('?');
  const query: Partial<Record<Name, string>> = {};
  if (at < 0) return query;
  for (const [name, value] of new URLSearchParams(request.url.slice(at + 1))) {
    if (!(allowed as readonly string[]).includes(name))
      throw badRequest(`Unknown query parameter '${name.slice(0, 40)}'`);
    if (query[name as Name] !== undefined)
      throw badRequest(`Invalid '${name}' query parameter -- given more than once`);
    query[name as Name] = value;
  }
  return query;
}
