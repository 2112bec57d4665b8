// The SCIM 2.0 service provider (RFC 7643, RFC 7644) at <PUBLIC_URL>/scim/v2: an organization's
// directory (Entra ID, Okta, a school administration system) creates, changes, deactivates and
// removes its users and groups. One organization per credential (src/scim/access.ts); users are
// created and changed through the directory's functions and deactivated and removed through the
// account lifecycle, exactly as the admin CLI and the console do. docs/provisioning.md.
import type { FastifyInstance } from 'fastify';
import type { ScimDeps } from './access.ts';
import { scimErrorHandler, sendScimError, SCIM_JSON } from './errors.ts';
import {
  MAX_BODY_BYTES,
  oneResourceType,
  oneSchema,
  resourceTypes,
  schemas,
  serviceProviderConfig,
} from './discovery.ts';
import { userRoutes } from './users.ts';
import { groupRoutes } from './groups.ts';
import { parseScimBody, type IdRequest } from './steps.ts';
import { methodNotAllowed } from '../http/errors.ts';
import { scimRouteSchemas as docs } from './scim-schemas.ts';

export type { ScimDeps } from './access.ts';

const PREFIX = '/scim/v2';

function discovery(app: FastifyInstance, base: string) {
  const json =
    <T>(value: T) =>
    async (_request: unknown, reply: { type(t: string): unknown }) => {
      reply.type(SCIM_JSON);
      return value;
    };
  app.get('/ServiceProviderConfig', { schema: docs.serviceProviderConfig }, json(serviceProviderConfig(base)));
  app.get('/ResourceTypes', { schema: docs.resourceTypes }, json(resourceTypes(base)));
  app.get('/Schemas', { schema: docs.schemas }, json(schemas(base)));
  app.get<{ Params: { id: string } }>(
    '/ResourceTypes/:id',
    { schema: docs.oneResourceType },
    async (request, reply) => {
      reply.type(SCIM_JSON);
      return oneResourceType(base, request.params.id);
    },
  );
  app.get<{ Params: { id: string } }>('/Schemas/:id', { schema: docs.oneSchema }, async (request, reply) => {
    reply.type(SCIM_JSON);
    return oneSchema(base, request.params.id);
  });
  for (const path of ['/ServiceProviderConfig', '/ResourceTypes', '/Schemas', '/ResourceTypes/:id', '/Schemas/:id'])
    methodNotAllowed(app, path, ['GET']);
}

function resources(app: FastifyInstance, deps: ScimDeps, base: string) {
  const users = userRoutes(deps, base);
  const groups = groupRoutes(deps, base);
  const noValidation = { validatorCompiler: () => () => true };
  for (const [path, r, d] of [
    ['/Users', users, docs.users],
    ['/Groups', groups, docs.groups],
  ] as const) {
    app.get(path, { schema: d.list, ...noValidation }, r.list);
    app.post(path, { schema: d.create, ...noValidation }, r.create);
    app.get<{ Params: { id: string } }>(`${path}/:id`, { schema: d.get, ...noValidation }, (q, s) => r.get(q, s));
    app.put(`${path}/:id`, { schema: d.replace, ...noValidation }, (q, s) => r.replace(q as IdRequest, s));
    app.patch(`${path}/:id`, { schema: d.patch, ...noValidation }, (q, s) => r.patch(q as IdRequest, s));
    app.delete(`${path}/:id`, { schema: d.remove, ...noValidation }, (q, s) => r.remove(q as IdRequest, s));
    methodNotAllowed(app, path, ['GET', 'POST']);
    methodNotAllowed(app, `${path}/:id`, ['GET', 'PUT', 'PATCH', 'DELETE']);
  }
}

export function scimPlugin(deps: ScimDeps) {
  const base = `${deps.config.publicUrl}${PREFIX}`;
  async function scim(app: FastifyInstance) {
    app.setErrorHandler(scimErrorHandler);
    app.setNotFoundHandler((_request, reply) => sendScimError(reply, 404, 'Not Found'));
    app.removeAllContentTypeParsers();
    app.addContentTypeParser(
      ['application/scim+json', 'application/json'],
      { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES },
      parseScimBody,
    );
    discovery(app, base);
    resources(app, deps, base);
  }
  return async function scimFeature(app: FastifyInstance) {
    await app.register(scim, { prefix: PREFIX });
  };
}
