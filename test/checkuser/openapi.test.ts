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
        assert.deepEqual(get.security, [{ oauth2: scopes }]);
        assert.equal(Boolean(get.deprecated), deprecated, path);
        assert.deepEqual(Object.keys(get.responses).sort(), ['200', '400', '401', '403', '429']);
        const body = get.responses['200'].content['application/json'].schema;
        assert.deepEqual(body.required, ['exists']);
        assert.deepEqual(Object.keys(body.properties), ['exists']);
        assert.equal(body.properties.exists.type, 'boolean');
        // The interface's caveat travels with the field: existence does not prove an active account.
        assert.match(
          body.properties.exists.description,
          /^true if the user exists\b.*does not prove an active account/,
        );
      }
    });

    it('leaves out the paths that only answer 400 and the 405 handlers', () => {
      for (const path of [
        '/check_single',
        '/userinfo/v1/exists',
        '/userinfo/v1/exists-by-mail',
        '/userinfo/v1/exists-by-mail/{realm}',
      ]) {
        assert.equal(paths[path], undefined, path);
      }
      assert.deepEqual(Object.keys(paths['/check_single/{username}']!), ['get']);
    });
  });
}
