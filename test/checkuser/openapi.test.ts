import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { checkuserWorld, type CheckuserWorld } from './fixtures.ts';

for (const dialect of dialects()) {
  describe(`user-existence routes in the OpenAPI document (${dialect})`, () => {
    let w: CheckuserWorld;
    let paths: Record<string, Record<string, any>>;
    before(async () => {
      w = await checkuserWorld(dialect);
      paths = (await w.ctx.app.inject({ method: 'GET', url: '/openapi.json' })).json().paths;
    });
    after(() => w.ctx.close());

    it('documents the three endpoints with their scopes and answers', () => {
      const expected: [string, string[], boolean][] = [
        ['/check_single/{username}', ['gk_checkuser', 'gk_checkuser_systemlookup'], true],
        ['/userinfo/v1/exists/{userid_sec}', ['system-check-user-existence'], false],
        ['/userinfo/v1/exists-by-mail/{realm}/{mail}', ['system-check-user-existence'], false],
      ];
      for (const [path, scopes, deprecated] of expected) {
        const get = paths[path]?.get;
        assert.ok(get, path);
        assert.deepEqual(get.security, [{ bearer: scopes }]);
        assert.equal(Boolean(get.deprecated), deprecated, path);
        assert.deepEqual(Object.keys(get.responses).sort(), ['200', '400', '401', '403', '429']);
        assert.deepEqual(get.responses['200'].content['application/json'].schema.properties, { exists: { type: 'boolean', description: get.responses['200'].content['application/json'].schema.properties.exists.description } });
      }
    });

    it('leaves out the paths that only answer 400 and the 405 handlers', () => {
      for (const path of ['/check_single', '/userinfo/v1/exists', '/userinfo/v1/exists-by-mail', '/userinfo/v1/exists-by-mail/{realm}']) {
        assert.equal(paths[path], undefined, path);
      }
      assert.deepEqual(Object.keys(paths['/check_single/{username}']!), ['get']);
    });
  });
}
