import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, cli, basicAuth, type TestContext } from '../helpers.ts';

const REDIRECT = 'https://rp.example.org/cb';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

for (const dialect of dialects()) {
  describe(`client grant types follow what the operator asked for (${dialect})`, () => {
    let ctx: TestContext;
    const add = async (...args: string[]) => {
      const r = await cli(ctx.config.databaseUrl, ['client', 'add', '--json', ...args]);
      assert.equal(r.code, 0, r.err);
      return JSON.parse(r.out) as { client_id: string; client_secret: string; grant_types: string[] };
    };
    const clientCredentials = (c: { client_id: string; client_secret: string }, scope: string) =>
      ctx.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: {
          authorization: basicAuth(c.client_id, c.client_secret),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: new URLSearchParams({ grant_type: 'client_credentials', scope }).toString(),
      });

    before(async () => (ctx = await startTestApp(dialect)));
    after(async () => ctx.close());

    it('a client with only --redirect-uri signs users in and cannot use client_credentials', async () => {
      const rp = await add('--name', 'Portal', '--redirect-uri', REDIRECT);
      assert.deepEqual(rp.grant_types, ['authorization_code', 'refresh_token']);
      const res = await clientCredentials(rp, 'passkey.read');
      assert.equal(res.statusCode, 400, res.body);
      // oidc-provider answers invalid_request here; RFC 6749 section 5.2 names it unauthorized_client
      assert.ok(['unauthorized_client', 'invalid_request'].includes(res.json().error), res.body);
      assert.match(res.json().error_description, /grant type is not allowed for this client/);
    });

    it('--grant client_credentials (repeatable, comma-separated) adds the grant', async () => {
      const both = await add(
        '--name',
        'Portal with API',
        '--redirect-uri',
        REDIRECT,
        '--scopes',
        'passkey.read',
        '--grant',
        'authorization_code,refresh_token',
        '--grant',
        'client_credentials',
      );
      assert.deepEqual(both.grant_types, ['authorization_code', 'refresh_token', 'client_credentials']);
      const res = await clientCredentials(both, 'passkey.read');
      assert.equal(res.statusCode, 200, res.body);
      const api = await add('--name', 'API only', '--scopes', 'passkey.read', '--grant', 'client_credentials');
      assert.deepEqual(api.grant_types, ['client_credentials']);
      assert.equal((await clientCredentials(api, 'passkey.read')).statusCode, 200);
    });

    it('an API client without redirect URIs gets client_credentials by default', async () => {
      const api = await add('--name', 'Helpdesk', '--scopes', 'passkey.read passkey.delete');
      assert.deepEqual(api.grant_types, ['client_credentials']);
      assert.equal((await clientCredentials(api, 'passkey.read')).statusCode, 200);
    });

    const deviceAuthorization = (clientId: string, secret?: string) =>
      ctx.app.inject({
        method: 'POST',
        url: '/oauth/device_authorization',
        headers: {
          ...(secret ? { authorization: basicAuth(clientId, secret) } : {}),
          'content-type': 'application/x-www-form-urlencoded',
        },
        payload: new URLSearchParams({ scope: 'openid', ...(secret ? {} : { client_id: clientId }) }).toString(),
      });

    it('--public --grant device_code registers a device client: no secret, no redirect URI, the grant URN', async () => {
      const tv = await add('--name', 'TV', '--public', '--grant', 'device_code');
      assert.deepEqual(tv.grant_types, [DEVICE_GRANT]);
      assert.equal(tv.client_secret, undefined);
      const shown = await cli(ctx.config.databaseUrl, ['client', 'show', tv.client_id]);
      assert.match(shown.out, /type\s+public/);
      assert.match(shown.out, new RegExp(`grant_types\\s+${DEVICE_GRANT}`));
      const res = await deviceAuthorization(tv.client_id);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(res.json().user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
      assert.equal(res.json().verification_uri, `${ctx.config.publicUrl}/device`);
      assert.equal(res.json().interval, 5);
    });

    it('the grant URN is accepted too, with refresh_token; confidential device clients authenticate', async () => {
      const tv = await add('--name', 'TV', '--public', '--grant', DEVICE_GRANT, '--grant', 'refresh_token');
      assert.deepEqual(tv.grant_types, ['refresh_token', DEVICE_GRANT]);
      const kiosk = await add('--name', 'Kiosk', '--grant', 'device_code');
      assert.deepEqual(kiosk.grant_types, [DEVICE_GRANT]);
      assert.ok(kiosk.client_secret);
      assert.equal((await deviceAuthorization(kiosk.client_id, kiosk.client_secret)).statusCode, 200);
      const wrongSecret = await deviceAuthorization(kiosk.client_id, 'not-the-secret');
      assert.equal(wrongSecret.statusCode, 401, wrongSecret.body);
      assert.equal((await clientCredentials(kiosk, 'passkey.read')).statusCode, 400);
      // a sign-in client may have both
      const both = await add('--name', 'App', '--redirect-uri', REDIRECT, '--grant', 'authorization_code,device_code');
      assert.deepEqual(both.grant_types, ['authorization_code', DEVICE_GRANT]);
    });

    it('a client without the device grant is unauthorized_client at the device authorization endpoint', async () => {
      const rp = await add('--name', 'Portal', '--redirect-uri', REDIRECT);
      const res = await deviceAuthorization(rp.client_id, rp.client_secret);
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json().error, 'unauthorized_client');
      assert.equal(res.json().device_code, undefined);
    });

    const refusals: [string[], RegExp][] = [
      [['--name', 'X', '--public'], /public client needs at least one --redirect-uri \(or --grant device_code\)/],
      [['--name', 'X', '--grant', 'refresh_token'], /refresh_token grant needs the authorization_code or device_code/],
      [['--name', 'X', '--public', '--grant', 'device_code,client_credentials'], /public client cannot use/],
      [['--name', 'X', '--redirect-uri', REDIRECT, '--grant', 'device_code'], /used only by the authorization_code/],
      [
        ['--name', 'SPA', '--public', '--redirect-uri', REDIRECT, '--grant', 'client_credentials'],
        /public client cannot use client_credentials/,
      ],
      [['--name', 'X', '--grant', 'password'], /unknown grant type 'password'/],
      [['--name', 'X', '--grant', 'authorization_code'], /authorization_code grant needs at least one --redirect-uri/],
      [
        ['--name', 'X', '--redirect-uri', REDIRECT, '--grant', 'refresh_token'],
        /used only by the authorization_code grant/,
      ],
      [
        [
          '--name',
          'X',
          '--redirect-uri',
          REDIRECT,
          '--grant',
          'authorization_code refresh_token client_credentials',
          '--public',
        ],
        /public client cannot use client_credentials/,
      ],
    ];
    for (const [args, message] of refusals) {
      it(`refuses ${args.join(' ')}`, async () => {
        const r = await cli(ctx.config.databaseUrl, ['client', 'add', ...args]);
        assert.equal(r.code, 1);
        assert.equal(r.err.split('\n').length, 1);
        assert.match(r.err, message);
      });
    }
  });
}
