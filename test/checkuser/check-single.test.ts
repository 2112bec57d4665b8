import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, PUBLIC_URL } from '../helpers.ts';
import { checkuserWorld, get, type CheckuserWorld } from './fixtures.ts';

const single = (id: string) => `/check_single/${encodeURIComponent(id)}`;
const NOT_AUTHORIZED = { code: 403, message: 'Client not authorized for organization' };
const DEPRECATION = '@1767225600';
const LINK = `<${PUBLIC_URL}/userinfo/v1/exists>; rel="deprecation"`;

async function legacyCount(w: CheckuserWorld, clientId: string): Promise<number> {
  const text = (await w.ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('idp_legacy_requests_total{') &&
        l.includes('endpoint="check_single"') &&
        l.includes(`client_id="${clientId}"`),
    );
  return line ? Number(line.split(' ').pop()) : 0;
}

for (const dialect of dialects()) {
  describe(`GET /check_single/<username@domain> (${dialect})`, () => {
    let w: CheckuserWorld;
    before(async () => {
      w = await checkuserWorld(dialect);
    });
    after(() => w.ctx.close());

    // null: no Authorization header
    const answer = async (url: string, token: string | null = w.tokens.legacy) => {
      const res = await get(w.ctx, url, token ?? undefined);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    };

    it('answers exists: true for a user of a configured organization, the @ sent as %40', async () => {
      const r = await answer('/check_single/alice%40example.org');
      assert.deepEqual([r.status, r.body], [200, { exists: true }]);
    });

    it('accepts a literal @ too and compares case-insensitively', async () => {
      assert.deepEqual((await answer('/check_single/Alice@Example.ORG')).body, { exists: true });
    });

    it('answers exists: false for an absent user', async () => {
      const r = await answer(single('nobody@example.org'));
      assert.deepEqual([r.status, r.body], [200, { exists: false }]);
    });

    it('answers the same 403 for existing, absent and unknown-realm users outside the configured organizations', async () => {
      for (const id of ['carol@third.org', 'nobody@third.org', 'carol@unknown.example']) {
        const r = await answer(single(id));
        assert.deepEqual([r.status, r.body], [403, NOT_AUTHORIZED], id);
      }
    });

    it('signals deprecation with a link to the current endpoint, and no Sunset when none is configured', async () => {
      const r = await answer(single('alice@example.org'));
      assert.equal(r.headers.deprecation, DEPRECATION);
      assert.equal(r.headers.link, LINK);
      assert.equal(r.headers.sunset, undefined);
    });

    it('signals deprecation on error answers too', async () => {
      for (const [url, token] of [
        [single('alice'), w.tokens.legacy],
        [single('alice@example.org'), null],
      ] as const) {
        const r = await answer(url, token);
        assert.ok(r.status >= 400);
        assert.equal(r.headers.deprecation, DEPRECATION);
        assert.equal(r.headers.link, LINK);
      }
    });

    it('counts legacy calls per client', async () => {
      const before = await legacyCount(w, w.checker.clientId);
      await answer(single('alice@example.org'));
      await answer(single('nobody@example.org'));
      assert.equal(await legacyCount(w, w.checker.clientId), before + 2);
    });

    describe('bad input', () => {
      const cases: [string, string, string][] = [
        ['empty identifier', '/check_single/', 'Missing identifier: expected username@domain'],
        ['no identifier segment', '/check_single', 'Missing identifier: expected username@domain'],
        ['no @', single('alice'), "Identifier must have the form username@domain (no '@' found)"],
        ['empty local part', single('@example.org'), 'Identifier has an empty username part'],
        ['empty domain', single('alice@'), 'Identifier has an empty domain part'],
        ['only @', single('@'), 'Identifier has an empty username part'],
        ['two @', single('a@b@example.org'), 'Identifier has an invalid username part'],
        ['space', single('alice @example.org'), 'Identifier has an invalid username part'],
        ['bad domain', single('alice@-example.org'), 'Identifier has an invalid domain part'],
        ['namespaced id', single('idp:alice@example.org'), 'Identifier has an invalid username part'],
        [
          'over-long',
          single(`${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.${'e'.repeat(63)}.org`),
          'Identifier is too long (at most 320 characters)',
        ],
        ['over-long local part', single(`${'a'.repeat(65)}@example.org`), 'Identifier has an invalid username part'],
        ['carriage return', single('alice\r@example.org'), 'Identifier must not contain control characters'],
        ['tab', single('alice\t@example.org'), 'Identifier must not contain control characters'],
        ['C1 control', single('alice\u0085@example.org'), 'Identifier must not contain control characters'],
      ];
      for (const [name, url, message] of cases) {
        it(`400 for ${name}`, async () => {
          const r = await answer(url);
          assert.deepEqual([r.status, r.body], [400, { code: 400, message }]);
        });
      }
    });

    describe('authentication and scopes', () => {
      const url = single('alice@example.org');

      it('401 without a token', async () => {
        const r = await answer(url, null);
        assert.deepEqual([r.status, r.body], [401, { code: 401, message: 'Token missing or invalid' }]);
        assert.equal(r.headers['www-authenticate'], 'Bearer realm="https://idp.example.test"');
      });

      it('401 for an invalid token and for a token of another audience', async () => {
        for (const token of ['not-a-jwt', w.tokens.passkey]) {
          const r = await answer(url, token);
          assert.deepEqual([r.status, r.body], [401, { code: 401, message: 'Token missing or invalid' }]);
        }
      });

      it('403 for a token with gk_checkuser but without gk_checkuser_systemlookup', async () => {
        const r = await answer(url, w.tokens.gkOnly);
        assert.deepEqual([r.status, r.body], [403, { code: 403, message: 'Token must have all required scopes' }]);
      });

      it('403 for a token with only the current scope', async () => {
        const r = await answer(url, w.tokens.current);
        assert.deepEqual([r.status, r.body], [403, { code: 403, message: 'Token must have all required scopes' }]);
      });
    });

    it('405 with Allow for other methods', async () => {
      for (const method of ['POST', 'DELETE'] as const) {
        const res = await get(w.ctx, single('alice@example.org'), w.tokens.legacy, method);
        assert.equal(res.statusCode, 405);
        assert.equal(res.headers.allow, 'GET, HEAD');
        assert.ok(res.headers.deprecation, 'a refusal of the legacy path is marked deprecated too');
        assert.match(String(res.headers.link), /rel="deprecation"/);
      }
    });
  });

  describe(`GET /check_single with SUNSET_DATE (${dialect})`, () => {
    let w: CheckuserWorld;
    before(async () => {
      w = await checkuserWorld(dialect, { SUNSET_DATE: '2027-06-30' });
    });
    after(() => w.ctx.close());

    it('sends Sunset as an HTTP-date next to Deprecation', async () => {
      const res = await get(w.ctx, single('alice@example.org'), w.tokens.legacy);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers.sunset, 'Wed, 30 Jun 2027 00:00:00 GMT');
      assert.equal(res.headers.deprecation, DEPRECATION);
    });

    it('does not send Sunset on the current endpoints', async () => {
      const res = await get(
        w.ctx,
        `/userinfo/v1/exists/${encodeURIComponent('idp:alice@example.org')}`,
        w.tokens.current,
      );
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers.sunset, undefined);
    });
  });
}
