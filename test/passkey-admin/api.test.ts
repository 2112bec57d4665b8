import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPair, SignJWT } from 'jose';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  PUBLIC_URL,
  type TestContext,
} from '../helpers.ts';
import { insertPasskeys, listOrganizationPasskeys } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { passkeyRow, signedToken, ZERO_AAGUID } from './fixtures.ts';

const FIELDS = ['aaguid', 'created_at', 'eppn', 'id', 'label', 'last_used_at', 'mfa_verified'];
const YUBIKEY = 'cb69481e-8ff7-4039-93ec-0a2729a154a8';

for (const dialect of dialects()) {
  describe(`passkey administration API (${dialect})`, () => {
    let ctx: TestContext;
    const tokens: Record<'full' | 'reader' | 'deleter' | 'ungranted' | 'noscope', string> = {} as any;
    let fullClientId: string;
    let alice: number[];
    let carol: number[];

    const call = (
      method: 'GET' | 'HEAD' | 'DELETE' | 'PUT' | 'POST' | 'PATCH' | 'OPTIONS',
      url: string,
      token: string | null = tokens.full,
      headers: Record<string, string> = {},
    ) =>
      ctx.app.inject({
        method,
        url,
        headers: { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...headers },
      });

    const expectError = async (res: Awaited<ReturnType<typeof call>>, status: number, message?: string | RegExp) => {
      assert.equal(res.statusCode, status, res.body);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = res.json();
      assert.deepEqual(Object.keys(body).sort(), ['code', 'message']);
      assert.equal(body.code, status);
      if (typeof message === 'string') assert.equal(body.message, message);
      else if (message) assert.match(body.message, message);
      return body;
    };

    const orgCount = async (orgId: number) => (await listOrganizationPasskeys(ctx.store.db, orgId, 0, 100000)).length;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other University');
      const a = await seedUser(ctx, 1, 'alice@example.org');
      await seedUser(ctx, 1, 'bob@example.org');
      const c = await seedUser(ctx, 2, 'carol@other.org');
      const d = await seedUser(ctx, 1, 'dave@example.org');
      alice = await insertPasskeys(ctx.store.db, [
        passkeyRow(a.id, 1, {
          label: 'YubiKey 5 NFC',
          aaguid: YUBIKEY,
          createdAt: Date.UTC(2024, 0, 15, 10, 30),
          lastUsedAt: Date.UTC(2024, 5, 1, 8, 0, 5),
          mfaVerified: true,
        }),
        passkeyRow(a.id, 1, {
          label: 'Laptop',
          createdAt: Date.UTC(2024, 1, 2, 3, 4, 5),
          lastUsedAt: null,
          mfaVerified: false,
        }),
      ]);
      await insertPasskeys(ctx.store.db, [
        passkeyRow(d.id, 1, { label: 'Phone' }),
        passkeyRow(d.id, 1, { label: 'Tablet' }),
      ]);
      carol = await insertPasskeys(ctx.store.db, [passkeyRow(c.id, 2, { label: 'Carol key' })]);
      const full = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [1] });
      fullClientId = full.clientId;
      const reader = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
      const deleter = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1] });
      const ungranted = await seedClient(ctx, { scopes: ['passkey.read', 'passkey.delete'], orgs: [2] });
      tokens.full = await clientToken(ctx, full.clientId, full.secret, 'passkey.read passkey.delete');
      tokens.reader = await clientToken(ctx, reader.clientId, reader.secret, 'passkey.read');
      tokens.deleter = await clientToken(ctx, deleter.clientId, deleter.secret, 'passkey.delete');
      tokens.ungranted = await clientToken(ctx, ungranted.clientId, ungranted.secret, 'passkey.read passkey.delete');
      tokens.noscope = await signedToken(ctx, { clientId: full.clientId, scope: '' });
    });
    after(() => ctx.close());

    describe('listing', () => {
      it("lists a user's passkeys with exactly the contract's fields and formats", async () => {
        const res = await call('GET', '/2/passkey/1?eppn=alice%40example.org');
        assert.equal(res.statusCode, 200);
        assert.match(String(res.headers['content-type']), /^application\/json/);
        assert.equal(res.headers.link, undefined);
        const body = res.json();
        assert.equal(body.length, 2);
        for (const p of body) assert.deepEqual(Object.keys(p).sort(), FIELDS);
        assert.deepEqual(body[0], {
          id: alice[0],
          eppn: 'alice@example.org',
          label: 'YubiKey 5 NFC',
          created_at: '2024-01-15T10:30:00+00:00',
          last_used_at: '2024-06-01T08:00:05+00:00',
          mfa_verified: true,
          aaguid: YUBIKEY,
        });
        assert.deepEqual(body[1], {
          id: alice[1],
          eppn: 'alice@example.org',
          label: 'Laptop',
          created_at: '2024-02-02T03:04:05+00:00',
          last_used_at: null,
          mfa_verified: false,
          aaguid: ZERO_AAGUID,
        });
        assert.equal(typeof body[0].id, 'number');
      });

      it('details=authenticator adds an authenticator object beside the contract fields; other values are refused', async () => {
        const res = await call('GET', '/2/passkey/1?eppn=alice%40example.org&details=authenticator');
        assert.equal(res.statusCode, 200);
        const body = res.json();
        for (const p of body) assert.deepEqual(Object.keys(p).sort(), [...FIELDS, 'authenticator'].sort());
        assert.equal(body[0].authenticator.name, 'YubiKey 5 Series');
        assert.equal(body[0].authenticator.user_verified, true);
        assert.equal(body[0].authenticator.metadata_status, null);
        assert.equal(body[1].authenticator.name, null, 'the all-zero AAGUID names no model');
        assert.deepEqual(Object.keys(body[1].authenticator).sort(), [
          'attested',
          'backed_up',
          'metadata_status',
          'name',
          'synced',
          'transports',
          'user_verified',
        ]);
        await expectError(
          await call('GET', '/2/passkey/1?details=all'),
          400,
          "Invalid 'details' query parameter -- must be authenticator",
        );
        await expectError(await call('GET', '/2/passkey/1?details=authenticator&details=authenticator'), 400);
        const paged = await call('GET', '/2/passkey/1?per_page=1&details=authenticator');
        assert.match(String(paged.headers.link), /details=authenticator/);
        assert.ok(paged.json()[0].authenticator);
      });

      it('lists every passkey of the organization in ascending id order, and none of another organization', async () => {
        const res = await call('GET', '/2/passkey/1');
        assert.equal(res.statusCode, 200);
        const body = res.json();
        assert.equal(body.length, 4);
        const ids = body.map((p: { id: number }) => p.id);
        assert.deepEqual(
          ids,
          [...ids].sort((x, y) => x - y),
        );
        assert.ok(!ids.includes(carol[0]));
        assert.deepEqual([...new Set(body.map((p: { eppn: string }) => p.eppn))].sort(), [
          'alice@example.org',
          'dave@example.org',
        ]);
      });

      it('compares eppn case-insensitively, with or without encoding the @', async () => {
        for (const q of ['eppn=ALICE@Example.ORG', 'eppn=alice@example.org', 'eppn=Alice%40example.org']) {
          const res = await call('GET', `/2/passkey/1?${q}`);
          assert.equal(res.statusCode, 200, q);
          assert.equal(res.json().length, 2, q);
        }
      });

      it('answers an empty list for a user without passkeys and for an unknown user of the realm', async () => {
        for (const eppn of ['bob@example.org', 'nobody@example.org']) {
          const res = await call('GET', `/2/passkey/1?eppn=${encodeURIComponent(eppn)}`);
          assert.equal(res.statusCode, 200);
          assert.deepEqual(res.json(), []);
          assert.equal(res.headers.link, undefined);
        }
      });

      it('answers HEAD like GET without a body, with the same checks', async () => {
        const res = await call('HEAD', '/2/passkey/1?eppn=alice%40example.org');
        assert.equal(res.statusCode, 200);
        assert.equal(res.body, '');
        assert.match(String(res.headers['content-type']), /^application\/json/);
        assert.equal((await call('HEAD', '/2/passkey/1', null)).statusCode, 401);
        assert.equal((await call('HEAD', '/2/passkey/1', tokens.deleter)).statusCode, 403);
        assert.equal((await call('HEAD', '/2/passkey/1?per_page=0')).statusCode, 400);
      });

      it('sends no-store', async () => {
        const res = await call('GET', '/2/passkey/1');
        assert.equal(res.headers['cache-control'], 'no-store');
      });
    });

    describe('401: token missing or invalid', () => {
      const paths: ['GET' | 'DELETE', string][] = [
        ['GET', '/2/passkey/1'],
        ['GET', '/2/passkey/1?eppn=alice%40example.org'],
        ['DELETE', '/2/passkey/1?eppn=alice%40example.org'],
        ['DELETE', '/2/passkey/1/1'],
      ];

      it('without an Authorization header', async () => {
        for (const [m, p] of paths) await expectError(await call(m, p, null), 401);
      });

      it('with the RFC 6750 challenge: realm, and invalid_token when a token was presented', async () => {
        assert.equal(
          (await call('GET', '/2/passkey/1', null)).headers['www-authenticate'],
          `Bearer realm="${PUBLIC_URL}"`,
        );
        assert.equal(
          (await call('GET', '/2/passkey/1', 'not-a-jwt')).headers['www-authenticate'],
          `Bearer realm="${PUBLIC_URL}", error="invalid_token"`,
        );
      });

      it('with another scheme or an empty bearer', async () => {
        for (const [m, p] of paths) {
          await expectError(await call(m, p, null, { authorization: 'Basic YTpi' }), 401);
          await expectError(await call(m, p, null, { authorization: 'Bearer ' }), 401);
          await expectError(await call(m, p, 'not-a-jwt'), 401);
        }
      });

      it('with a bad signature', async () => {
        const [h, p, s] = tokens.full.split('.') as [string, string, string];
        const flipped = `${s.slice(0, 10)}${s[10] === 'A' ? 'B' : 'A'}${s.slice(11)}`;
        await expectError(await call('GET', '/2/passkey/1', `${h}.${p}.${flipped}`), 401);
        const { privateKey } = await generateKeyPair('ES256');
        const foreign = await new SignJWT({ client_id: fullClientId, scope: 'passkey.read' })
          .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: ctx.keyManager.current().active.ES256 })
          .setIssuer(ctx.config.publicUrl)
          .setAudience(`${ctx.config.publicUrl}/2/passkey`)
          .setSubject(fullClientId)
          .setJti('x')
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(privateKey);
        for (const [m, path] of paths) await expectError(await call(m, path, foreign), 401);
      });

      it('when expired, from another issuer, for another audience, or not an access token', async () => {
        const now = Math.floor(Date.now() / 1000);
        const bad = {
          expired: await signedToken(ctx, { clientId: fullClientId, iat: now - 900, exp: now - 300 }),
          issuer: await signedToken(ctx, { clientId: fullClientId, iss: 'https://evil.example' }),
          audience: await signedToken(ctx, { clientId: fullClientId, aud: `${ctx.config.publicUrl}/userinfo` }),
          idToken: await signedToken(ctx, { clientId: fullClientId, typ: 'JWT' }),
        };
        // the control: the same construction with good claims is accepted
        assert.equal(
          (await call('GET', '/2/passkey/1', await signedToken(ctx, { clientId: fullClientId }))).statusCode,
          200,
        );
        for (const [what, token] of Object.entries(bad)) {
          for (const [m, p] of paths) {
            const res = await call(m, p, token);
            assert.equal(res.statusCode, 401, `${what} ${m} ${p}: ${res.body}`);
            await expectError(res, 401, 'Token missing or invalid');
          }
        }
      });
    });

    describe('403', () => {
      it('Token must have all required scopes', async () => {
        const msg = 'Token must have all required scopes';
        await expectError(await call('GET', '/2/passkey/1', tokens.deleter), 403, msg);
        await expectError(await call('GET', '/2/passkey/1?eppn=alice%40example.org', tokens.deleter), 403, msg);
        await expectError(await call('DELETE', '/2/passkey/1?eppn=alice%40example.org', tokens.reader), 403, msg);
        await expectError(await call('DELETE', `/2/passkey/1/${alice[0]}`, tokens.reader), 403, msg);
        await expectError(await call('GET', '/2/passkey/1', tokens.noscope), 403, msg);
        assert.equal(await orgCount(1), 4);
      });

      it('Client not authorized for organization', async () => {
        const msg = 'Client not authorized for organization';
        await expectError(await call('GET', '/2/passkey/1', tokens.ungranted), 403, msg);
        await expectError(await call('GET', '/2/passkey/1?eppn=alice%40example.org', tokens.ungranted), 403, msg);
        await expectError(await call('DELETE', '/2/passkey/1?eppn=alice%40example.org', tokens.ungranted), 403, msg);
        await expectError(await call('DELETE', `/2/passkey/1/${alice[0]}`, tokens.ungranted), 403, msg);
        await expectError(await call('DELETE', '/2/passkey/2/abc', tokens.full), 403, msg);
        assert.equal(await orgCount(1), 4);
        // granted for its own organization, the same client is fine
        assert.equal((await call('GET', '/2/passkey/2', tokens.ungranted)).statusCode, 200);
      });

      it("eppn realm '<realm>' does not match organization", async () => {
        await expectError(
          await call('GET', '/2/passkey/1?eppn=carol%40other.org'),
          403,
          "eppn realm 'other.org' does not match organization",
        );
        await expectError(
          await call('DELETE', '/2/passkey/1?eppn=carol%40other.org'),
          403,
          "eppn realm 'other.org' does not match organization",
        );
        await expectError(
          await call('GET', '/2/passkey/1?eppn=x%40sub.example.org'),
          403,
          "eppn realm 'sub.example.org' does not match organization",
        );
        await expectError(
          await call('GET', '/2/passkey/1?eppn=Alice%40EXAMPLE.COM'),
          403,
          "eppn realm 'example.com' does not match organization",
        );
        assert.equal(await orgCount(2), 1);
      });
    });

    describe('404', () => {
      it('for an unknown or non-numeric organization', async () => {
        for (const org of ['999', '0', 'abc', '-1', '1.5', '1e3', '99999999999999999999', '%20']) {
          await expectError(await call('GET', `/2/passkey/${org}`), 404, 'Organization does not exist');
          await expectError(
            await call('DELETE', `/2/passkey/${org}?eppn=alice%40example.org`),
            404,
            'Organization does not exist',
          );
          await expectError(await call('DELETE', `/2/passkey/${org}/${alice[0]}`), 404, 'Organization does not exist');
        }
        assert.equal(await orgCount(1), 4);
      });

      it('Passkey does not exist: unknown id, non-numeric id, and a passkey of another organization', async () => {
        for (const id of ['999999', '0', 'abc', '-1', String(carol[0])]) {
          await expectError(await call('DELETE', `/2/passkey/1/${id}`), 404, 'Passkey does not exist');
        }
        assert.equal(await orgCount(2), 1, "the other organization's passkey is untouched");
      });
    });

    describe('400', () => {
      it('for an eppn without @ or otherwise malformed', async () => {
        for (const method of ['GET', 'DELETE'] as const) {
          await expectError(
            await call(method, '/2/passkey/1?eppn=alice'),
            400,
            "Invalid 'eppn' query parameter -- must contain '@'",
          );
          await expectError(
            await call(method, '/2/passkey/1?eppn='),
            400,
            "Invalid 'eppn' query parameter -- must contain '@'",
          );
          await expectError(
            await call(method, '/2/passkey/1?eppn=%40example.org'),
            400,
            /^Invalid 'eppn' query parameter -- /,
          );
          await expectError(
            await call(method, '/2/passkey/1?eppn=a%20b%40example.org'),
            400,
            /^Invalid 'eppn' query parameter -- /,
          );
        }
        assert.equal(await orgCount(1), 4);
      });

      it('for DELETE /2/passkey/<org_id> without eppn, which deletes nothing', async () => {
        const before = await orgCount(1);
        await expectError(await call('DELETE', '/2/passkey/1'), 400, /^Missing 'eppn' query parameter/);
        await expectError(await call('DELETE', '/2/passkey/1?'), 400, /^Missing 'eppn' query parameter/);
        await expectError(await call('DELETE', '/2/passkey/1?per_page=10'), 400, "Unknown query parameter 'per_page'");
        assert.equal(await orgCount(1), before);
        assert.equal((await listAuditEvents(ctx.store.db, { orgId: 1, action: 'passkey.' })).length, 0);
      });

      it('for per_page outside 1-1000 or not an integer', async () => {
        for (const v of ['0', '1001', '-1', '1.5', 'abc', '', '10abc', '1e3', '0x10', ' 10', '99999999999']) {
          await expectError(
            await call('GET', `/2/passkey/1?per_page=${encodeURIComponent(v)}`),
            400,
            "Invalid 'per_page' query parameter -- must be an integer from 1 to 1000",
          );
        }
        for (const v of ['1', '1000', '0010'])
          assert.equal((await call('GET', `/2/passkey/1?per_page=${v}`)).statusCode, 200, v);
      });

      it('for a repeated query parameter', async () => {
        await expectError(
          await call('GET', '/2/passkey/1?per_page=1&per_page=2'),
          400,
          "Invalid 'per_page' query parameter -- given more than once",
        );
        await expectError(
          await call('GET', '/2/passkey/1?eppn=alice%40example.org&eppn=bob%40example.org'),
          400,
          "Invalid 'eppn' query parameter -- given more than once",
        );
        await expectError(
          await call('DELETE', '/2/passkey/1?eppn=alice%40example.org&eppn=bob%40example.org'),
          400,
          "Invalid 'eppn' query parameter -- given more than once",
        );
        assert.equal(await orgCount(1), 4);
      });

      it('for an unknown query parameter', async () => {
        await expectError(await call('GET', '/2/passkey/1?page=2'), 400, "Unknown query parameter 'page'");
        await expectError(
          await call('GET', '/2/passkey/1?EPPN=alice%40example.org'),
          400,
          "Unknown query parameter 'EPPN'",
        );
        await expectError(
          await call('DELETE', `/2/passkey/1/${alice[0]}?eppn=alice%40example.org`),
          400,
          "Unknown query parameter 'eppn'",
        );
        assert.equal(await orgCount(1), 4);
      });

      it('for a malformed offset', async () => {
        for (const v of [
          '',
          'abc',
          'x'.repeat(5000),
          '!!!!',
          'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        ]) {
          await expectError(
            await call('GET', `/2/passkey/1?offset=${encodeURIComponent(v)}`),
            400,
            /^Invalid 'offset' query parameter -- /,
          );
        }
      });
    });

    describe('405 with Allow', () => {
      it('on /2/passkey/<org_id>', async () => {
        for (const m of ['PUT', 'POST', 'PATCH', 'OPTIONS'] as const) {
          const res = await call(m, '/2/passkey/1');
          await expectError(res, 405);
          assert.equal(res.headers.allow, 'GET, DELETE, HEAD');
        }
      });

      it('on /2/passkey/<org_id>/<id>', async () => {
        for (const m of ['GET', 'HEAD', 'PUT', 'POST', 'PATCH'] as const) {
          const res = await call(m, `/2/passkey/1/${alice[0]}`);
          assert.equal(res.statusCode, 405);
          assert.equal(res.headers.allow, 'DELETE');
        }
        assert.equal(await orgCount(1), 4);
      });
    });

    describe('order of checks', () => {
      it('401 before everything else', async () => {
        await expectError(await call('GET', '/2/passkey/abc?per_page=0&bogus=1', null), 401);
        await expectError(await call('DELETE', '/2/passkey/999', 'garbage'), 401);
      });
      it('then the scope, then the query, then the organization, then the grant, then the realm, then the offset', async () => {
        await expectError(
          await call('GET', '/2/passkey/999?per_page=0', tokens.deleter),
          403,
          'Token must have all required scopes',
        );
        await expectError(await call('GET', '/2/passkey/999?per_page=0'), 400, /per_page/);
        await expectError(await call('DELETE', '/2/passkey/999'), 400, /^Missing 'eppn'/);
        await expectError(
          await call('GET', '/2/passkey/999?eppn=x%40other.org', tokens.ungranted),
          404,
          'Organization does not exist',
        );
        await expectError(
          await call('GET', '/2/passkey/1?eppn=x%40other.org', tokens.ungranted),
          403,
          'Client not authorized for organization',
        );
        await expectError(await call('GET', '/2/passkey/1?eppn=x%40other.org&offset=bad'), 403, /^eppn realm/);
        await expectError(await call('GET', '/2/passkey/1?eppn=x%40example.org&offset=bad'), 400, /^Invalid 'offset'/);
        await expectError(
          await call('DELETE', '/2/passkey/1/abc', tokens.ungranted),
          403,
          'Client not authorized for organization',
        );
      });
    });

    describe('deleting', () => {
      it('deletes a single passkey, writes its audit event, and 404s the second time', async () => {
        const id = alice[1]!;
        const res = await call('DELETE', `/2/passkey/1/${id}`, tokens.full, { 'x-request-id': 'req-delete-one' });
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual(res.json(), { deleted: true, id });
        assert.equal(res.headers['x-request-id'], 'req-delete-one');
        const list = (await call('GET', '/2/passkey/1?eppn=alice%40example.org')).json();
        assert.deepEqual(
          list.map((p: { id: number }) => p.id),
          [alice[0]],
        );
        const events = await listAuditEvents(ctx.store.db, { orgId: 1 });
        const e = events.find((x) => x.request_id === 'req-delete-one');
        assert.ok(e);
        assert.equal(e.kind, 'passkey.delete');
        assert.equal(e.client_id, fullClientId);
        assert.equal(e.org_id, 1);
        assert.equal(e.eppn, 'alice@example.org');
        assert.deepEqual(JSON.parse(e.passkey_ids), [id]);
        assert.ok(Math.abs(e.at - Date.now()) < 60_000);
        await expectError(
          await call('DELETE', `/2/passkey/1/${id}`, tokens.full, { 'x-request-id': 'req-delete-again' }),
          404,
          'Passkey does not exist',
        );
        assert.equal(
          (await listAuditEvents(ctx.store.db, { orgId: 1 })).filter((x) => x.request_id === 'req-delete-again').length,
          0,
        );
      });

      it("deletes all of a user's passkeys in one call, and writes one audit event with their ids", async () => {
        const res = await call('DELETE', '/2/passkey/1?eppn=Dave%40Example.org', tokens.deleter, {
          'x-request-id': 'req-delete-dave',
        });
        assert.equal(res.statusCode, 200, res.body);
        assert.deepEqual(res.json(), { deleted_count: 2, eppn: 'dave@example.org' });
        assert.deepEqual((await call('GET', '/2/passkey/1?eppn=dave%40example.org')).json(), []);
        const e = (await listAuditEvents(ctx.store.db, { orgId: 1 })).find((x) => x.request_id === 'req-delete-dave');
        assert.ok(e);
        assert.equal(e.kind, 'passkey.delete_user');
        assert.equal(e.eppn, 'dave@example.org');
        assert.equal(JSON.parse(e.passkey_ids).length, 2);
        // alice keeps hers; the other organization is untouched
        assert.equal((await call('GET', '/2/passkey/1?eppn=alice%40example.org')).json().length, 1);
        assert.equal(await orgCount(2), 1);
      });

      it('answers deleted_count 0 for a user without passkeys or unknown in the realm, and still records the request', async () => {
        for (const eppn of ['bob@example.org', 'nobody@example.org']) {
          const rid = `req-none-${eppn.split('@')[0]}`;
          const res = await call('DELETE', `/2/passkey/1?eppn=${encodeURIComponent(eppn)}`, tokens.full, {
            'x-request-id': rid,
          });
          assert.equal(res.statusCode, 200);
          assert.deepEqual(res.json(), { deleted_count: 0, eppn });
          const e = (await listAuditEvents(ctx.store.db, { orgId: 1 })).find((x) => x.request_id === rid);
          assert.deepEqual(JSON.parse(e!.passkey_ids), []);
        }
      });

      it('never answers with a 500 or a database message', async () => {
        for (const url of [
          '/2/passkey/1?eppn=%E0%A4%A',
          '/2/passkey/1?offset=%ZZ',
          "/2/passkey/1'%20or%201=1",
          '/2/passkey/1/1%27',
          '/2/passkey/1?eppn=' + 'a'.repeat(400) + '%40example.org',
        ]) {
          for (const m of ['GET', 'DELETE'] as const) {
            const res = await call(m, url);
            assert.ok(res.statusCode < 500, `${m} ${url}: ${res.statusCode} ${res.body}`);
            assert.doesNotMatch(res.body, /sql|syntax|constraint|stack/i);
          }
        }
      });
    });
  });
}
