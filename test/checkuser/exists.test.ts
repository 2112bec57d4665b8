import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { checkuserWorld, get, NINS, type CheckuserWorld } from './fixtures.ts';

const exists = (id: string) => `/userinfo/v1/exists/${encodeURIComponent(id)}`;
const NOT_AUTHORIZED = { code: 403, message: 'Client not authorized for organization' };

for (const dialect of dialects()) {
  describe(`GET /userinfo/v1/exists/<userid_sec> (${dialect})`, () => {
    let w: CheckuserWorld;
    before(async () => {
      w = await checkuserWorld(dialect);
    });
    after(() => w.ctx.close());

    const answer = async (url: string, token = w.tokens.current) => {
      const res = await get(w.ctx, url, token);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    };

    describe('idp namespace (eppn)', () => {
      it('answers exists: true for a user of a configured organization', async () => {
        assert.deepEqual(await answer(exists('idp:alice@example.org')).then((r) => [r.status, r.body]), [
          200,
          { exists: true },
        ]);
        assert.deepEqual((await answer(exists('idp:bob@other.org'))).body, { exists: true });
      });

      it('accepts : and @ unencoded', async () => {
        assert.deepEqual((await answer('/userinfo/v1/exists/idp:alice@example.org')).body, { exists: true });
      });

      it('compares the eppn and the namespace case-insensitively', async () => {
        assert.deepEqual((await answer(exists('IDP:Alice@EXAMPLE.org'))).body, { exists: true });
      });

      it('answers exists: false for an absent user of a configured organization', async () => {
        const r = await answer(exists('idp:nobody@example.org'));
        assert.equal(r.status, 200);
        assert.deepEqual(r.body, { exists: false });
      });

      it('does not carry deprecation headers', async () => {
        const r = await answer(exists('idp:alice@example.org'));
        assert.equal(r.headers.deprecation, undefined);
        assert.equal(r.headers.link, undefined);
      });

      it('answers the same 403 for an existing and an absent user of an organization the client is not configured for', async () => {
        const present = await answer(exists('idp:carol@third.org'));
        const absent = await answer(exists('idp:nobody@third.org'));
        assert.deepEqual([present.status, present.body], [403, NOT_AUTHORIZED]);
        assert.deepEqual([absent.status, absent.body], [present.status, present.body]);
      });

      it('answers the same 403 for a realm no organization has', async () => {
        const r = await answer(exists('idp:alice@unknown.example'));
        assert.deepEqual([r.status, r.body], [403, NOT_AUTHORIZED]);
      });

      it('answers 403 to a client configured for no organization, whoever is asked for', async () => {
        for (const id of ['idp:alice@example.org', 'idp:nobody@example.org']) {
          const r = await answer(exists(id), w.tokens.unconfigured);
          assert.deepEqual([r.status, r.body], [403, NOT_AUTHORIZED]);
        }
      });
    });

    describe('nin namespace (no realm: searched in the configured organizations)', () => {
      it('finds a user of a configured organization', async () => {
        assert.deepEqual((await answer(exists(`nin:${NINS.alice}`))).body, { exists: true });
        assert.deepEqual((await answer(exists(`nin:${NINS.bob}`))).body, { exists: true });
      });

      it('answers exists: false for an unknown number', async () => {
        assert.deepEqual((await answer(exists('nin:99999999999'))).body, { exists: false });
      });

      it('answers exists: false, not true, for a user of an organization the client is not configured for', async () => {
        const r = await answer(exists(`nin:${NINS.carol}`));
        assert.deepEqual([r.status, r.body], [200, { exists: false }]);
      });

      it('answers 403 when the client is configured for no organization', async () => {
        const r = await answer(exists(`nin:${NINS.alice}`), w.tokens.unconfigured);
        assert.deepEqual([r.status, r.body], [403, NOT_AUTHORIZED]);
      });
    });

    describe('secondary namespaces (user_ids)', () => {
      it('finds an id of a user of a configured organization', async () => {
        assert.deepEqual((await answer(exists('edugain:alice@edu.example'))).body, { exists: true });
      });

      it('finds social ids under the namespace the userid_sec claim uses', async () => {
        assert.deepEqual((await answer(exists('facebook:10001234'))).body, { exists: true });
        assert.deepEqual((await answer(exists('google:10001234'))).body, { exists: false });
      });

      it('answers exists: false for an unknown id and for one in another organization', async () => {
        assert.deepEqual((await answer(exists('edugain:nobody@edu.example'))).body, { exists: false });
        assert.deepEqual((await answer(exists('edugain:carol@edu.example'))).body, { exists: false });
      });

      it('does not match an id under another namespace', async () => {
        assert.deepEqual((await answer(exists('eidas:alice@edu.example'))).body, { exists: false });
      });
    });

    describe('bad input', () => {
      const cases: [string, string, string][] = [
        ['empty identifier', '/userinfo/v1/exists/', 'Missing identifier: expected <namespace>:<identifier>'],
        ['no identifier segment', '/userinfo/v1/exists', 'Missing identifier: expected <namespace>:<identifier>'],
        [
          'no namespace',
          exists('alice@example.org'),
          "Identifier must have the form <namespace>:<identifier> (no ':' found)",
        ],
        [
          'unknown namespace',
          exists('foo:bar'),
          "Unknown namespace 'foo' (known: idp, nin, edugain, eidas, apple, facebook, github, google, linkedin, microsoft, twitter, windowslive)",
        ],
        [
          'photo handle namespace',
          exists('p:0f1e2d3c'),
          "Unknown namespace 'p' (known: idp, nin, edugain, eidas, apple, facebook, github, google, linkedin, microsoft, twitter, windowslive)",
        ],
        [
          'empty namespace',
          exists(':alice@example.org'),
          'Unknown namespace (known: idp, nin, edugain, eidas, apple, facebook, github, google, linkedin, microsoft, twitter, windowslive)',
        ],
        [
          'malformed namespace',
          exists('i d p:alice@example.org'),
          'Unknown namespace (known: idp, nin, edugain, eidas, apple, facebook, github, google, linkedin, microsoft, twitter, windowslive)',
        ],
        ['empty value', exists('idp:'), "Identifier has an empty value after 'idp:'"],
        [
          'eppn without @',
          exists('idp:alice.example.org'),
          "Identifier must have the form username@domain (no '@' found)",
        ],
        ['eppn with empty local part', exists('idp:@example.org'), 'Identifier has an empty username part'],
        ['eppn with empty domain', exists('idp:alice@'), 'Identifier has an empty domain part'],
        ['eppn with a space', exists('idp:al ice@example.org'), 'Identifier has an invalid username part'],
        ['eppn with a bad domain', exists('idp:alice@exa_mple.org'), 'Identifier has an invalid domain part'],
        ['eppn with a single-label domain', exists('idp:alice@localhost'), 'Identifier has an invalid domain part'],
        [
          'over-long eppn',
          exists(`idp:${'a'.repeat(330)}@example.org`),
          'Identifier is too long (at most 320 characters)',
        ],
        [
          'over-long identifier',
          exists(`edugain:${'a'.repeat(400)}`),
          'Identifier is too long (at most 400 characters)',
        ],
        ['newline', exists('idp:alice\n@example.org'), 'Identifier must not contain control characters'],
        ['NUL', exists('edugain:a\u0000b'), 'Request contains a NUL character'],
        ['another C0 control character', exists('edugain:a\u0001b'), 'Identifier must not contain control characters'],
        ['DEL', exists('edugain:a\u007fb'), 'Identifier must not contain control characters'],
        ['line separator', exists('edugain:a\u2028b'), 'Identifier must not contain control characters'],
        ['nin of 10 digits', exists('nin:0101701234'), 'A nin identifier must be 11 digits'],
        ['nin with letters', exists('nin:0101701234x'), 'A nin identifier must be 11 digits'],
      ];
      for (const [name, url, message] of cases) {
        it(`400 for ${name}`, async () => {
          const r = await answer(url);
          assert.deepEqual([r.status, r.body], [400, { code: 400, message }]);
        });
      }

      it('answers 400 for bad input even to a client configured for no organization', async () => {
        const r = await answer(exists('foo:bar'), w.tokens.unconfigured);
        assert.equal(r.status, 400);
      });

      it('answers a malformed percent-encoding without a 500', async () => {
        const res = await get(w.ctx, '/userinfo/v1/exists/idp%3Aalice%E0%A4%A', w.tokens.current);
        assert.equal(res.statusCode, 400);
      });
    });

    describe('authentication and scopes', () => {
      const url = exists('idp:alice@example.org');

      it('401 without a token, with a Bearer challenge', async () => {
        const res = await get(w.ctx, url);
        assert.equal(res.statusCode, 401);
        assert.deepEqual(res.json(), { code: 401, message: 'Token missing or invalid' });
        assert.equal(res.headers['www-authenticate'], 'Bearer realm="https://idp.example.test"');
      });

      it('401 for a malformed or tampered token', async () => {
        const [h, p, s] = w.tokens.current.split('.');
        const flipped = `${s!.slice(0, -2)}${s!.endsWith('AA') ? 'BB' : 'AA'}`;
        for (const token of ['garbage', `${h}.${p}.${flipped}`, `${h}.${p}.`]) {
          const res = await get(w.ctx, url, token);
          assert.equal(res.statusCode, 401, token);
          assert.deepEqual(res.json(), { code: 401, message: 'Token missing or invalid' });
          assert.equal(
            res.headers['www-authenticate'],
            'Bearer realm="https://idp.example.test", error="invalid_token"',
          );
        }
      });

      it('401 for a non-Bearer authorization', async () => {
        const res = await w.ctx.app.inject({
          method: 'GET',
          url,
          headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
        });
        assert.equal(res.statusCode, 401);
      });

      it('401 for a token of another audience (passkey API)', async () => {
        const res = await get(w.ctx, url, w.tokens.passkey);
        assert.equal(res.statusCode, 401);
        assert.deepEqual(res.json(), { code: 401, message: 'Token missing or invalid' });
      });

      it('401 comes before input validation', async () => {
        const res = await get(w.ctx, exists('foo:bar'));
        assert.equal(res.statusCode, 401);
      });

      it('403 for a token without system-check-user-existence (legacy gatekeeper scopes only)', async () => {
        const res = await get(w.ctx, url, w.tokens.legacy);
        assert.equal(res.statusCode, 403);
        assert.deepEqual(res.json(), { code: 403, message: 'Token must have all required scopes' });
      });

      it('403 for missing scope comes before input validation', async () => {
        const res = await get(w.ctx, exists('foo:bar'), w.tokens.gkOnly);
        assert.equal(res.statusCode, 403);
      });
    });

    describe('methods', () => {
      for (const method of ['POST', 'DELETE', 'PUT'] as const) {
        it(`405 with Allow for ${method}`, async () => {
          const res = await get(w.ctx, exists('idp:alice@example.org'), w.tokens.current, method);
          assert.equal(res.statusCode, 405);
          assert.equal(res.headers.allow, 'GET, HEAD');
          assert.deepEqual(res.json(), { code: 405, message: 'Method Not Allowed' });
        });
      }

      it('answers HEAD like GET, without a body', async () => {
        const res = await get(w.ctx, exists('idp:alice@example.org'), w.tokens.current, 'HEAD');
        assert.equal(res.statusCode, 200);
        assert.equal(res.body, '');
      });
    });
  });
}
