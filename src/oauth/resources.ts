// Resource servers that accept JWT access tokens from the client_credentials grant.
// A token names one resource (its audience); the scopes a resource accepts decide which.
import type { Config } from '../config.ts';

export interface ResourceServer {
  /** the resource indicator, also the token audience */
  id: string;
  scopes: string[];
}

export function resourceServers(config: Config): ResourceServer[] {
  return [
    { id: `${config.publicUrl}/2/passkey`, scopes: ['passkey.read', 'passkey.delete'] },
    { id: `${config.publicUrl}/userinfo/v1/exists`, scopes: ['system-check-user-existence', 'gk_checkuser', 'gk_checkuser_systemlookup'] },
  ];
}

/** The resource whose scopes include the first requested scope. */
export function resourceForScopes(config: Config, scope: string | undefined): ResourceServer | undefined {
  const first = (scope ?? '').split(' ').find(Boolean);
  return resourceServers(config).find((r) => first !== undefined && r.scopes.includes(first));
}
