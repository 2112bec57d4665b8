// Who calls the SCIM service, and for which organization: a provisioning token of the organization
// (`scim token create`), or a client_credentials token with scope scim from a client granted
// exactly one organization. Either names one organization; every change is audited with the
// credential as a provisioning actor.
import type { FastifyRequest } from 'fastify';
import type { Store } from '../store/index.ts';
import type { Config } from '../config.ts';
import type { Actor } from '../audit/index.ts';
import { findOrganization } from '../store/directory.ts';
import { grantedOrganizations } from '../store/provisioning.ts';
import { authenticate, parseBearer, requireScopes, tokenNoLongerValid, type TokenVerifier } from '../http/bearer.ts';
import { isProvisioningToken, resolveScimToken } from '../directory/provisioning.ts';
import { ScimError } from './errors.ts';
import { forbidden } from '../errors.ts';

export interface ScimDeps {
  config: Config;
  store: Store;
  verifier: TokenVerifier;
  now: () => number;
}

export interface Caller {
  orgId: number;
  realm: string;
  actor: Actor;
}

export const SCOPE = 'scim';

function unauthorized(verifier: TokenVerifier, withToken: boolean): ScimError {
  const error = withToken ? ', error="invalid_token"' : '';
  return new ScimError(401, undefined, 'Token missing or invalid', {
    'www-authenticate': `Bearer realm="${verifier.issuer}"${error}`,
  });
}

async function provisioningCaller(deps: ScimDeps, request: FastifyRequest, token: string): Promise<Caller> {
  const row = await resolveScimToken(deps.store, token, deps.now());
  if (!row) throw unauthorized(deps.verifier, true);
  const org = await findOrganization(deps.store.db, row.org_id);
  if (!org) throw unauthorized(deps.verifier, true);
  const actor: Actor = { type: 'provisioning', id: `scim-token:${row.id}`, requestId: request.id, ip: request.ip };
  return { orgId: org.id, realm: org.realm, actor };
}

async function clientCaller(deps: ScimDeps, request: FastifyRequest): Promise<Caller> {
  const token = await authenticate(request, deps.verifier, `${deps.config.publicUrl}/scim/v2`);
  requireScopes(token, [SCOPE]);
  const orgs = await grantedOrganizations(deps.store.db, token.clientId);
  if (orgs.some((o) => o.disabled_at !== null))
    throw tokenNoLongerValid(request, deps.verifier, 'The client of this token is disabled');
  if (orgs.length !== 1) throw forbidden('Client must be granted exactly one organization to provision it over SCIM');
  const actor: Actor = { type: 'provisioning', id: token.clientId, requestId: request.id, ip: request.ip };
  return { orgId: orgs[0]!.id, realm: orgs[0]!.realm, actor };
}

export function scimAccess(deps: ScimDeps) {
  return async function callerOf(request: FastifyRequest): Promise<Caller> {
    const header = parseBearer(request.headers.authorization);
    if (header.kind === 'token' && isProvisioningToken(header.token))
      return provisioningCaller(deps, request, header.token);
    if (header.kind === 'malformed') throw unauthorized(deps.verifier, true);
    return clientCaller(deps, request);
  };
}
