// A NUL byte in a path parameter or in a SCIM filter string: PostgreSQL refuses NUL in text, so a
// lookup built from one failed with a 500. The request guard refuses a NUL in any path parameter of
// any route before the route runs (each scope in its own error form), and the SCIM filter parser one
// in a filter string ("\u0000" decodes to NUL). Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken, type TestContext } from '../helpers.ts';
import { createScimToken } from '../../src/directory/provisioning.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';

const SCIM_ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

for (const dialect of dialects()) {
  describe(`NUL in paths and SCIM filters (${dialect})`, () => {
    let ctx: TestContext;
    let scim: string;
    let ssf: string;
    let admin: string;
    let streamId: string;
    let passkeyId: number;

    const send = (method: string, url: string, token: string, body?: unknown, type = 'application/json') =>
      ctx.app.inject({
        method: method as 'GET',
        url,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': type }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });

    function scimRefused(res: LightMyRequestResponse, scimType: string, detail: RegExp) {
      assert.equal(res.statusCode, 400, res.body);
      assert.match(String(res.headers['content-type']), /application\/scim\+json/);
      const body = res.json();
      assert.deepEqual(body.schemas, [SCIM_ERROR]);
      assert.equal(body.scimType, scimType);
      assert.match(body.detail, detail);
    }

    function refused(res: LightMyRequestResponse) {
      assert.equal(res.statusCode, 400, res.body);
      assert.deepEqual(res.json(), { code: 400, message: 'Request contains a NUL character' });
    }

    before(async () => {
      ctx = await startTestApp(dialect, { PUBLIC_URL: 'http://localhost:8080' });
      await seedOrg(ctx);
      const user = await seedUser(ctx, 1, 'ada@example.org');
      passkeyId = (await seedPasskeys(ctx.store, 1, [user.id], 1))[0]!;
      scim = (await createScimToken(ctx.store, 1, 'Entra ID')).token;
      const rx = await seedClient(ctx, { scopes: ['ssf.manage', 'passkey.delete'], orgs: [1] });
      ssf = await clientToken(ctx, rx.clientId, rx.secret, 'ssf.manage');
      admin = await clientToken(ctx, rx.clientId, rx.secret, 'passkey.delete');
      const created = await send('POST', '/ssf/streams', ssf, { delivery: { method: 'urn:ietf:rfc:8936' } });
      assert.equal(created.statusCode, 201, created.body);
      streamId = created.json().stream_id;
    });
    after(() => ctx?.close());

    it('SCIM Users and Groups by an id with a NUL: a SCIM 400 for every method', async () => {
      const patch = { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'displayName', value: 'x' }] };
      for (const resource of ['Users', 'Groups']) {
        const url = `/scim/v2/${resource}/a%00b`;
        scimRefused(await send('GET', url, scim), 'invalidValue', /NUL/);
        scimRefused(await send('DELETE', url, scim), 'invalidValue', /NUL/);
        scimRefused(await send('PATCH', url, scim, patch, 'application/scim+json'), 'invalidValue', /NUL/);
        scimRefused(await send('GET', `/scim/v2/${resource}/%00`, scim), 'invalidValue', /NUL/);
      }
    });

    it('a SCIM filter string with an escaped NUL: invalidFilter', async () => {
      for (const resource of ['Users', 'Groups']) {
        const attribute = resource === 'Users' ? 'userName' : 'displayName';
        const filter = encodeURIComponent(`${attribute} eq "ada\\u0000@example.org"`);
        scimRefused(await send('GET', `/scim/v2/${resource}?filter=${filter}`, scim), 'invalidFilter', /NUL/);
      }
      // the same filter without the NUL is answered
      const fine = await send(
        'GET',
        `/scim/v2/Users?filter=${encodeURIComponent('userName eq "ada@example.org"')}`,
        scim,
      );
      assert.equal(fine.statusCode, 200, fine.body);
      assert.equal(fine.json().totalResults, 1);
    });

    it('an SSF poll of a stream id with a NUL: 400', async () => {
      refused(await send('POST', `/ssf/poll/${streamId}%00`, ssf, {}));
      refused(await send('POST', '/ssf/poll/%00', ssf, {}));
      const fine = await send('POST', `/ssf/poll/${streamId}`, ssf, {});
      assert.equal(fine.statusCode, 200, fine.body);
    });

    it('passkey API paths with a NUL: 400, and the passkey is still there', async () => {
      refused(await send('DELETE', `/2/passkey/1/${passkeyId}%00`, admin));
      refused(await send('DELETE', `/2/passkey/1%00/${passkeyId}`, admin));
      const count = await ctx.store.db.selectFrom('passkeys').select('id').where('id', '=', passkeyId).execute();
      assert.equal(count.length, 1);
    });
  });
}
