import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import Fastify, { type FastifyInstance } from 'fastify';
import { lazySchemaCompilers } from '../../src/http/schema-compilers.ts';
import { startTestApp } from '../helpers.ts';

function appWith(schemas: ReturnType<typeof lazySchemaCompilers>, response: object): FastifyInstance {
  const app = Fastify({ logger: false, schemaController: { compilersFactory: schemas.compilersFactory } });
  app.post(
    '/echo',
    {
      schema: {
        body: { type: 'object', required: ['a'], properties: { a: { type: 'integer' } } },
        response: { 200: response },
      },
    },
    async (request) => ({ a: (request.body as { a: number }).a, secret: 'never serialized' }),
  );
  return app;
}

const ECHO = { type: 'object', properties: { a: { type: 'integer' } } };

describe('route schemas compiled on first use', () => {
  it('validate and serialize as Fastify compiles them, at the first request', async () => {
    const schemas = lazySchemaCompilers();
    const app = appWith(schemas, ECHO);
    await app.ready();
    // Fastify's Ajv options hold: strings coerced to the schema's type
    const ok = await app.inject({ method: 'POST', url: '/echo', payload: { a: '5' } });
    assert.equal(ok.statusCode, 200);
    // fast-json-stringify writes only what the response schema names
    assert.equal(ok.body, '{"a":5}');
    // a failed validation reports Ajv's errors through the function Fastify was given
    const bad = await app.inject({ method: 'POST', url: '/echo', payload: { b: 1 } });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().message, "body must have required property 'a'");
    const wrongType = await app.inject({ method: 'POST', url: '/echo', payload: { a: 'five' } });
    assert.equal(wrongType.statusCode, 400);
    assert.equal(wrongType.json().message, 'body/a must be integer');
    // both were compiled by those requests: nothing is left
    assert.equal(schemas.compileAll(), 0);
    await app.close();
  });

  it('nothing is compiled at start-up; compileAll compiles what no request has used, once', async () => {
    const schemas = lazySchemaCompilers();
    const app = appWith(schemas, ECHO);
    await app.ready();
    assert.equal(schemas.compileAll(), 2); // the body's validator and the 200 serializer
    assert.equal(schemas.compileAll(), 0);
    const ok = await app.inject({ method: 'POST', url: '/echo', payload: { a: 7 } });
    assert.equal(ok.body, '{"a":7}');
    await app.close();
  });

  it('a schema that cannot compile is not noticed at start-up but fails compileAll', async () => {
    const schemas = lazySchemaCompilers();
    const app = appWith(schemas, { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } });
    await app.ready();
    assert.throws(() => schemas.compileAll());
    await app.close();
  });

  it('a schema that cannot compile answers its first requests with a 500, and the process goes on', async () => {
    const schemas = lazySchemaCompilers();
    const broken = { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } };
    const app = Fastify({ logger: false, schemaController: { compilersFactory: schemas.compilersFactory } });
    // the service has preValidation hooks on every route (the request guard)
    app.addHook('preValidation', (_request, _reply, done) => done());
    app.post('/validated', { schema: { body: broken } }, async () => ({ a: 1 }));
    app.get('/serialized', { schema: { response: { 200: broken } } }, async () => ({ a: 1 }));
    await app.ready();
    for (let i = 0; i < 2; i++) {
      assert.equal((await app.inject({ method: 'POST', url: '/validated', payload: { a: 1 } })).statusCode, 500);
      assert.equal((await app.inject({ method: 'GET', url: '/serialized' })).statusCode, 500);
    }
    // and they are still there for compileAll to report
    assert.throws(() => schemas.compileAll());
    await app.close();
  });

  describe('the whole service', () => {
    let close: (() => Promise<void>) | undefined;
    after(() => close?.());

    it('every route schema of every feature compiles', async () => {
      const ctx = await startTestApp('sqlite');
      close = () => ctx.close();
      await ctx.app.ready();
      const compiled = ctx.compileSchemas();
      // validators and serializers of the API, console, SCIM, userinfo and sign-in routes
      assert.ok(compiled > 100, `only ${compiled} schemas compiled`);
      assert.equal(ctx.compileSchemas(), 0);
    });
  });
});
