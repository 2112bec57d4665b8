// The SAML 2.0 identity provider (docs/saml.md): single sign-on for the registered service
// providers, through the service's own sign-in pages and session.
import type { FastifyInstance } from 'fastify';
import formbody from '@fastify/formbody';
import type { Config } from '../config.ts';
import type { Keyring } from '../crypto.ts';
import type { Store } from '../store/index.ts';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { findServiceProvider } from '../service-providers/index.ts';
import { registerSsoRoutes } from './sso-routes.ts';

export interface SamlIdpDeps {
  config: Config;
  store: Store;
  keys: Keyring;
  provider: ProviderHolder;
  now?: () => number;
}

export function samlIdpPlugin(deps: SamlIdpDeps) {
  const now = deps.now ?? Date.now;
  return async function samlIdp(app: FastifyInstance) {
    // an HTTP-POST binding message is at most 256 KiB of base64 (the XML layer's cap), and a RelayState
    await app.register(formbody, { bodyLimit: 300 * 1024 });
    registerSsoRoutes(app, {
      config: deps.config,
      store: deps.store,
      keys: deps.keys,
      provider: deps.provider,
      now,
      findServiceProvider: (entityId) => findServiceProvider(deps.store, entityId),
    });
  };
}
