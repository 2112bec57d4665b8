// The discovery endpoints (RFC 7644 section 4): ServiceProviderConfig, ResourceTypes and Schemas.
// They describe the service, not an organization, so they answer without a token.
import { scimError } from './errors.ts';
import { GROUP_KIND, LIST, SCHEMAS, schemaById, USER_KIND, type ResourceKind } from './schemas.ts';
import { MAX_COUNT } from './query.ts';

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

export function serviceProviderConfig(base: string) {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
    documentationUri: `${base.replace(/\/scim\/v2$/, '')}/docs`,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: MAX_BODY_BYTES },
    filter: { supported: true, maxResults: MAX_COUNT },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: true },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'OAuth Bearer Token',
        description:
          'A provisioning token of the organization (scim token create), or a client_credentials access token with scope scim',
        specUri: 'https://www.rfc-editor.org/rfc/rfc6750',
        primary: true,
      },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}

function resourceType(kind: ResourceKind, base: string) {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:ResourceType'],
    id: kind.name,
    name: kind.name,
    endpoint: kind.endpoint,
    description: kind.name === 'User' ? 'User Account' : 'Group',
    schema: kind.core,
    schemaExtensions: kind.extensions.map((schema) => ({ schema, required: false })),
    meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/${kind.name}` },
  };
}

function schemaResource(id: string, base: string) {
  const s = schemaById(id)!;
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
    id: s.id,
    name: s.name,
    description: s.description,
    attributes: s.attributes,
    meta: { resourceType: 'Schema', location: `${base}/Schemas/${s.id}` },
  };
}

const listOf = (resources: unknown[]) => ({
  schemas: [LIST],
  totalResults: resources.length,
  startIndex: 1,
  itemsPerPage: resources.length,
  Resources: resources,
});

export const resourceTypes = (base: string) => listOf([USER_KIND, GROUP_KIND].map((k) => resourceType(k, base)));

export function oneResourceType(base: string, id: string) {
  const kind = [USER_KIND, GROUP_KIND].find((k) => k.name === id);
  if (!kind) throw scimError(404, undefined, `Resource type '${id.slice(0, 40)}' not found`);
  return resourceType(kind, base);
}

export const schemas = (base: string) => listOf(SCHEMAS.map((s) => schemaResource(s.id, base)));

export function oneSchema(base: string, id: string) {
  if (!schemaById(id)) throw scimError(404, undefined, `Schema '${id.slice(0, 120)}' not found`);
  return schemaResource(id, base);
}
