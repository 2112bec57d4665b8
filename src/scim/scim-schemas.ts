// The SCIM routes in the OpenAPI document. Input is checked by the routes' own steps (SCIM answers
// its own error bodies), so these schemas document and do not validate.
const tags = ['scim'];
// a provisioning token of the organization (scim token create) is accepted in the same header
const security = [{ oauth2: ['scim'] }];

const scimError = {
  type: 'object',
  required: ['schemas', 'status', 'detail'],
  properties: {
    schemas: { type: 'array', items: { type: 'string', const: 'urn:ietf:params:scim:api:messages:2.0:Error' } },
    status: { type: 'string', description: 'The HTTP status, as a string' },
    scimType: {
      type: 'string',
      enum: [
        'invalidFilter',
        'tooMany',
        'uniqueness',
        'mutability',
        'invalidSyntax',
        'invalidPath',
        'noTarget',
        'invalidValue',
        'invalidVers',
        'sensitive',
      ],
    },
    detail: { type: 'string' },
  },
} as const;

const errors = (meaning: Record<number, string>) =>
  Object.fromEntries(Object.entries(meaning).map(([status, description]) => [status, { ...scimError, description }]));

const COMMON = {
  401: 'Token missing or invalid',
  403: 'Token lacks scope scim; the client is not granted exactly one organization',
};

const resource = { type: 'object', additionalProperties: true } as const;
const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const;
const listResponse = {
  type: 'object',
  required: ['schemas', 'totalResults', 'startIndex', 'itemsPerPage', 'Resources'],
  properties: {
    schemas: { type: 'array', items: { type: 'string' } },
    totalResults: { type: 'integer' },
    startIndex: { type: 'integer' },
    itemsPerPage: { type: 'integer' },
    Resources: { type: 'array', items: resource },
  },
} as const;

const listQuery = {
  type: 'object',
  properties: {
    filter: { type: 'string', description: 'RFC 7644 3.4.2.2 filter, e.g. userName eq "alice@example.org"' },
    startIndex: { type: 'integer', minimum: 1, default: 1 },
    count: { type: 'integer', minimum: 0, maximum: 1000, default: 100 },
    attributes: { type: 'string', description: 'Comma-separated attribute paths to return' },
    excludedAttributes: { type: 'string', description: 'Comma-separated attribute paths to leave out' },
  },
} as const;

const projectionQuery = {
  type: 'object',
  properties: {
    attributes: listQuery.properties.attributes,
    excludedAttributes: listQuery.properties.excludedAttributes,
  },
} as const;
const ifMatch = {
  type: 'object',
  properties: { 'if-match': { type: 'string', description: 'The version (ETag) the change is based on' } },
} as const;

function collectionRoutes(name: 'User' | 'Group', plural: string) {
  const op = (verb: string) => `${verb}Scim${name}`;
  return {
    list: {
      operationId: op('list'),
      tags,
      security,
      summary: `List or search ${plural}`,
      querystring: listQuery,
      response: {
        200: { ...listResponse, description: 'A ListResponse' },
        ...errors({ 400: 'invalidFilter, invalidValue', ...COMMON }),
      },
    },
    create: {
      operationId: op('create'),
      tags,
      security,
      summary: `Create a ${name}`,
      body: resource,
      response: {
        201: { ...resource, description: `The ${name} created` },
        ...errors({ 400: 'invalidValue, invalidSyntax', ...COMMON, 409: 'uniqueness', 413: 'Body too large' }),
      },
    },
  };
}

function itemRoutes(name: 'User' | 'Group') {
  const op = (verb: string) => `${verb}Scim${name}`;
  return {
    get: {
      operationId: op('get'),
      tags,
      security,
      summary: `Read a ${name}`,
      params: idParams,
      querystring: projectionQuery,
      response: { 200: { ...resource, description: `The ${name}` }, ...errors({ ...COMMON, 404: 'Not found' }) },
    },
    replace: {
      operationId: op('replace'),
      tags,
      security,
      summary: `Replace a ${name}`,
      params: idParams,
      headers: ifMatch,
      body: resource,
      response: {
        200: { ...resource, description: `The ${name}` },
        ...errors({
          400: 'invalidValue, mutability',
          ...COMMON,
          404: 'Not found',
          409: 'uniqueness',
          412: 'If-Match does not match',
        }),
      },
    },
    patch: {
      operationId: op('patch'),
      tags,
      security,
      summary: `Change a ${name} with PATCH operations (add, replace, remove)`,
      params: idParams,
      headers: ifMatch,
      body: resource,
      response: {
        200: { ...resource, description: `The ${name}` },
        ...errors({
          400: 'invalidPath, noTarget, invalidValue, mutability',
          ...COMMON,
          404: 'Not found',
          412: 'If-Match does not match',
        }),
      },
    },
    remove: {
      operationId: op('delete'),
      tags,
      security,
      summary: `Delete a ${name}`,
      params: idParams,
      headers: ifMatch,
      response: {
        204: { type: 'null', description: 'Deleted' },
        ...errors({ ...COMMON, 404: 'Not found', 412: 'If-Match does not match' }),
      },
    },
  };
}

const discovery = (operationId: string, summary: string) => ({
  operationId,
  tags,
  summary,
  security: [],
  response: { 200: { ...resource, description: summary } },
});

export const scimRouteSchemas = {
  users: { ...collectionRoutes('User', 'users'), ...itemRoutes('User') },
  groups: { ...collectionRoutes('Group', 'groups'), ...itemRoutes('Group') },
  serviceProviderConfig: discovery('scimServiceProviderConfig', 'The service provider configuration'),
  resourceTypes: discovery('scimResourceTypes', 'The resource types (User, Group)'),
  schemas: discovery('scimSchemas', 'The schemas, extensions included'),
  oneResourceType: { ...discovery('scimResourceType', 'One resource type'), params: idParams },
  oneSchema: { ...discovery('scimSchema', 'One schema'), params: idParams },
};
