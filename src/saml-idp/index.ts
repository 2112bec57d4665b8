// The SAML 2.0 identity provider (docs/saml.md): its metadata, which is also its entityID, and the
// protocol endpoints named in it: single sign-on for the registered service providers, through the
// service's own sign-in pages and session.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import formbody from '@fastify/formbody';
import type { ProviderHolder } from '../oauth/plugin.ts';
import { findServiceProvider } from '../service-providers/index.ts';
import { idpMetadataDocument, METADATA_PATH, type MetadataDeps } from './idp-metadata-document.ts';
import { registerSsoRoutes } from './sso-routes.ts';
import { samlSessionLogout } from './slo.ts';
import type { SessionLogoutHook } from '../oauth/frontchannel-logout.ts';

export { METADATA_PATH, SSO_PATH, SLO_PATH } from './idp-metadata-document.ts';

/**
 * The OpenID Connect logout's hook (src/oauth/frontchannel-logout.ts): the SAML SPs of the ended
 * session are sent LogoutRequests before the browser continues (docs/saml.md, Single logout).
 */
export function samlLogoutHook(deps: Omit<SamlIdpPluginDeps, 'provider' | 'logoUrl'>): SessionLogoutHook {
  return samlSessionLogout({
    config: deps.config,
    store: deps.store,
    keys: deps.keys,
    now: deps.now ?? Date.now,
    findServiceProvider: (entityId) => findServiceProvider(deps.store, entityId),
  });
}

export interface SamlIdpPluginDeps extends MetadataDeps {
  provider: ProviderHolder;
}

export function samlIdpPlugin(deps: SamlIdpPluginDeps) {
  const now = deps.now ?? Date.now;
  return async function samlIdp(app: FastifyInstance) {
    const metadata = idpMetadataDocument(deps);
    app.get(METADATA_PATH, async function serveMetadata(_request: FastifyRequest, reply: FastifyReply) {
      const document = await metadata();
      return reply
        .type('application/samlmetadata+xml')
        .header('cache-control', 'public, max-age=3600')
        .header('x-content-type-options', 'nosniff')
        .send(document.xml);
    });
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
