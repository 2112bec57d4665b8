// Bearer authentication of the legacy userinfo and photo endpoints: the opaque user access
// tokens oidc-provider issues in the authorization code flow, checked as strictly as
// /openid/userinfo checks them. Failures are RFC 6750 challenges.
import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { AppError } from '../errors.ts';
import { parseBearer } from '../http/bearer.ts';
import { findClient, type ClientRow } from '../store/clients.ts';
import { findUserBySub, type User } from '../store/directory.ts';
import { words } from '../vocabulary.ts';
import { accountDisabled } from '../directory/account-state.ts';

export interface UserToken {
  clientId: string;
  client: ClientRow;
  user: User;
  /** scopes granted to this token (filtered through its grant) */
  scopes: string[];
}

export interface TokenDeps {
  config: Config;
  store: Store;
  provider: ProviderHolder;
}

function quote(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

function challenge(config: Config, fields: Record<string, string> = {}): string {
  return `Bearer ${Object.entries({ realm: config.publicUrl, ...fields })
    .map(([k, v]) => `${k}=${quote(v)}`)
    .join(', ')}`;
}

/** 401 without an error code: the request carried no bearer token at all (RFC 6750 3.1). */
export function missingToken(config: Config): AppError {
  return new AppError(401, 'Bearer access token required', { 'www-authenticate': challenge(config) });
}

export function invalidToken(config: Config, description = 'The access token is invalid or has expired'): AppError {
  return new AppError(401, description, {
    'www-authenticate': challenge(config, { error: 'invalid_token', error_description: description }),
  });
}

export function invalidRequest(config: Config, description: string): AppError {
  return new AppError(400, description, {
    'www-authenticate': challenge(config, { error: 'invalid_request', error_description: description }),
  });
}

export function insufficientScope(config: Config, description: string, scope?: string): AppError {
  return new AppError(403, description, {
    'www-authenticate': challenge(config, {
      error: 'insufficient_scope',
      error_description: description,
      ...(scope ? { scope } : {}),
    }),
  });
}

/** The bearer token of the Authorization header; only the header is accepted (no query or body). */
export function readBearer(config: Config, request: FastifyRequest): string {
  const parsed = parseBearer(request.headers.authorization);
  if (parsed.kind === 'absent') throw missingToken(config);
  if (parsed.kind === 'malformed') throw invalidRequest(config, 'Malformed Authorization header');
  return parsed.token;
}

/** Resolves a user access token: live, bearer (not sender-constrained), for no other audience,
 * with its client, grant and user all still existing and consistent. */
export async function resolveUserToken(deps: TokenDeps, request: FastifyRequest): Promise<UserToken> {
  const { config, store } = deps;
  const value = readBearer(config, request);
  const provider = deps.provider.current();

  const token = await provider.AccessToken.find(value);
  if (!token || token.isExpired) throw invalidToken(config);
  if (token.isSenderConstrained()) throw invalidToken(config, 'Sender-constrained access tokens are not accepted here');
  if (token.aud !== undefined) throw invalidToken(config, 'The access token is for another resource');
  const { clientId, accountId, grantId } = token;
  if (!clientId || !accountId || !grantId) throw invalidToken(config);

  const [client, grant, user] = await Promise.all([
    findClient(store.db, clientId),
    provider.Grant.find(grantId),
    findUserBySub(store.db, accountId),
  ]);
  // A disabled user's (or organization's) or client's tokens stop working at once (disabling a user also deletes theirs).
  if (!client || !user || client.disabled_at !== null || accountDisabled(user)) throw invalidToken(config);
  if (!grant || grant.isExpired || grant.clientId !== clientId || grant.accountId !== accountId)
    throw invalidToken(config);

  const scopes = words(grant.getOIDCScopeFiltered(new Set(words(token.scope))));
  return { clientId, client, user, scopes };
}
