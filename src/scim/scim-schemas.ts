// The SCIM routes in the OpenAPI document. Input is checked by the routes' own steps (SCIM answers
// its own error bodies), so these schemas document and do not validate.
const tags = ['scim'];
// a provisioning token of the organization (scim token create) is accepted in the same header
const security = [{ oauth2: ['scim'] }];
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';

const scimError = {
  type: 'object',
  required: ['schemas', 'status', 'detail'],
  properties: {
    schemas: { type: 'array', items: { type: 'string', const: ERROR } },
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
  Object.fromEntries(
    Object.entries(meaning).map(([status, description]) => [
      status,
      { ...scimError, description, examples: [{ schemas: [ERROR], status, detail: description.split(';')[0] }] },
    ]),
  );

const COMMON = {
  401: 'Token missing or invalid',
  403: 'Token lacks scope scim; the client is not granted exactly one organization',
};

const USER_ID = '2819c223-7f76-453a-919d-413861904646';
const META = { created: '2026-11-26T09:00:00+00:00', lastModified: '2026-11-26T09:00:00+00:00' };
const EXAMPLES = {
  User: {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
    id: USER_ID,
    externalId: 'e-4711',
    userName: 'alice@example.org',
    name: { formatted: 'Alice Smith', givenName: 'Alice', familyName: 'Smith' },
    active: true,
    emails: [{ value: 'alice@example.org', type: 'work', primary: true }],
    meta: { resourceType: 'User', ...META, version: 'W/"1795683600000"' },
  },
  Group: {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'],
    id: 'e9e30dba-f08f-4109-8486-d5c6a331660a',
    displayName: 'Class 1A',
    members: [{ value: USER_ID, display: 'alice@example.org', type: 'User' }],
    meta: { resourceType: 'Group', ...META, version: 'W/"1795683600000"' },
  },
};
const PATCH_EXAMPLE = {
  schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
  Operations: [{ op: 'replace', path: 'active', value: false }],
};

const resource = (name: 'User' | 'Group', description: string) => ({
  type: 'object',
  additionalProperties: true,
  description,
  examples: [EXAMPLES[name]],
});
const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', examples: [USER_ID] } },
} as const;

const listQuery = {
  type: 'object',
  properties: {
    filter: {
      type: 'string',
      description: 'RFC 7644 3.4.2.2 filter',
      examples: ['userName eq "alice@example.org"'],
    },
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
const ifNoneMatch = {
  type: 'object',
  properties: {
    'if-none-match': { type: 'string', description: 'The version (ETag) the client holds: 304 while it is current' },
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
        200: {
          type: 'object',
          additionalProperties: true,
          description: 'A ListResponse',
          examples: [
            {
              schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
              totalResults: 1,
              startIndex: 1,
              itemsPerPage: 1,
              Resources: [EXAMPLES[name]],
            },
          ],
        },
        ...errors({ 400: 'invalidFilter, invalidValue', ...COMMON }),
      },
    },
    create: {
      operationId: op('create'),
      tags,
      security,
      summary: `Create a ${name}`,
      body: resource(name, `The new ${name}`),
      response: {
        201: resource(name, `The ${name} created`),
        ...errors({ 400: 'invalidValue, invalidSyntax', ...COMMON, 409: 'uniqueness', 413: 'Body too large' }),
      },
    },
  };
}

function itemRoutes(name: 'User' | 'Group') {
  const op = (verb: string) => `${verb}Scim${name}`;
  const changeErrors = (extra: Record<number, string>) =>
    errors({ ...extra, ...COMMON, 404: 'Not found', 412: 'If-Match does not match the version' });
  return {
    get: {
      operationId: op('get'),
      tags,
      security,
      summary: `Read a ${name}`,
      params: idParams,
      querystring: projectionQuery,
      headers: ifNoneMatch,
      response: {
        200: resource(name, `The ${name}`),
        304: { description: `Not modified: the ${name}'s version is the one If-None-Match names`, type: 'null' },
        ...errors({ ...COMMON, 404: 'Not found' }),
      },
    },
    replace: {
      operationId: op('replace'),
      tags,
      security,
      summary: `Replace a ${name}`,
      params: idParams,
      headers: ifMatch,
      body: resource(name, `The ${name} as it is to be`),
      response: { 200: resource(name, `The ${name}`), ...changeErrors({ 400: 'invalidValue, mutability' }) },
    },
    patch: {
      operationId: op('patch'),
      tags,
      security,
      summary: `Change a ${name} with PATCH operations (add, replace, remove)`,
      params: idParams,
      headers: ifMatch,
      body: { type: 'object', description: 'A PatchOp message', examples: [PATCH_EXAMPLE] },
      response: {
        200: resource(name, `The ${name}`),
        ...changeErrors({ 400: 'invalidPath, noTarget, invalidValue, mutability' }),
      },
    },
    remove: {
      operationId: op('delete'),
      tags,
      security,
      summary: `Delete a ${name}`,
      params: idParams,
      headers: ifMatch,
      response: { 204: { type: 'null', description: 'Deleted' }, ...changeErrors({}) },
    },
  };
}

const discovery = (operationId: string, summary: string, example: object) => ({
  operationId,
  tags,
  summary,
  security: [],
  response: {
    200: { type: 'object', additionalProperties: true, description: summary, examples: [example] },
    ...errors({ 404: 'Not found', 405: 'Method Not Allowed' }),
  },
});

const listExample = (resources: object[]) => ({
  schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
  totalResults: resources.length,
  Resources: resources,
});
const TYPE_EXAMPLE = { id: 'User', endpoint: '/Users', schema: 'urn:ietf:params:scim:schemas:core:2.0:User' };
const SCHEMA_EXAMPLE = { id: 'urn:ietf:params:scim:schemas:core:2.0:Group', name: 'Group', attributes: [] };

export const scimRouteSchemas = {
  users: { ...collectionRoutes('User', 'users'), ...itemRoutes('User') },
  groups: { ...collectionRoutes('Group', 'groups'), ...itemRoutes('Group') },
  serviceProviderConfig: discovery('scimServiceProviderConfig', 'The service provider configuration', {
    patch: { supported: true },
    filter: { supported: true, maxResults: 1000 },
    etag: { supported: true },
  }),
  resourceTypes: discovery('scimResourceTypes', 'The resource types (User, Group)', listExample([TYPE_EXAMPLE])),
  schemas: discovery('scimSchemas', 'The schemas, extensions included', listExample([SCHEMA_EXAMPLE])),
  oneResourceType: {
    ...discovery('scimResourceType', 'One resource type', TYPE_EXAMPLE),
    params: { ...idParams, properties: { id: { type: 'string', examples: ['User'] } } },
  },
  oneSchema: {
    ...discovery('scimSchema', 'One schema', SCHEMA_EXAMPLE),
    params: { ...idParams, properties: { id: { type: 'string', examples: [SCHEMA_EXAMPLE.id] } } },
  },
};
