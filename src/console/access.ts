// Who may call the staff API: authenticate -> requireScopes -> loadOrganization ->
// checkClientActive -> checkClientGrant, the passkey API's order (src/http/organization-grant.ts).
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { authenticate, requireScopes, type AccessToken, type TokenVerifier } from '../http/bearer.ts';
import {
  checkClientActive,
  checkClientGrant,
  loadOrganization,
  type GrantedOrganization,
} from '../http/organization-grant.ts';
import type { Actor } from '../audit/index.ts';
import type { Keyring } from '../crypto.ts';
import type { Csrf } from '../ui/csrf.ts';
import type { Branding } from '../ui/page-brand.ts';
import { eppnProblem, normalizeEppn } from '../directory/index.ts';
import { badRequest } from '../errors.ts';

export interface StaffApiDeps {
  config: Config;
  store: Store;
  verifier: TokenVerifier;
  now: () => number;
  /** the authorization server, whose sessions of an offboarded user end */
  provider: ProviderHolder;
}

/** What the console's pages need besides: the keys of their session cookie, the brand, CSRF tokens. */
export interface ConsoleDeps extends StaffApiDeps {
  keys: Keyring;
  branding: Branding;
  csrf: Csrf;
}

export type OrgRequest = FastifyRequest<{ Params: { org_id: string } }>;

export function organizationAccess(deps: StaffApiDeps) {
  const audience = `${deps.config.publicUrl}/2/passkey`;
  return async function organizationOf(
    request: OrgRequest,
    scope: string,
  ): Promise<{ token: AccessToken; org: GrantedOrganization }> {
    const token = await authenticate(request, deps.verifier, audience);
    requireScopes(token, [scope]);
    const org = await loadOrganization(deps.store, token, request.params.org_id);
    checkClientActive(request, deps.verifier, org);
    checkClientGrant(org);
    return { token, org };
  };
}

export const actorOf = (token: AccessToken, request: FastifyRequest): Actor => ({
  type: 'client',
  id: token.clientId,
  requestId: request.id,
  ip: request.ip,
});

export function checkEppn(raw: unknown, where: string): string {
  if (typeof raw !== 'string') throw badRequest(`Invalid '${where}' -- eppn is required`);
  const eppn = normalizeEppn(raw);
  const problem = eppnProblem(eppn);
  if (problem) throw badRequest(`Invalid '${where}' -- ${problem}`);
  return eppn;
}

export { parseQuery } from '../http/organization-grant.ts';
