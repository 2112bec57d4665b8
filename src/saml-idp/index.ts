// The SAML 2.0 identity provider (docs/saml.md): its metadata, which is also its entityID, and the
// protocol endpoints named in it.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { idpMetadataDocument, METADATA_PATH, type MetadataDeps } from './idp-metadata-document.ts';

export { METADATA_PATH, SSO_PATH, SLO_PATH } from './idp-metadata-document.ts';

export type SamlIdpPluginDeps = MetadataDeps;

export function samlIdpPlugin(deps: SamlIdpPluginDeps) {
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
  };
}
