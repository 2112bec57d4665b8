import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { checkuserWorld, get, type CheckuserWorld } from './fixtures.ts';

const byMail = (realm: string, mail: string) =>
  `/userinfo/v1/exists-by-mail/${encodeURIComponent(realm)}/${encodeURIComponent(mail)}`;
const NOT_AUTHORIZED = { code: 403, message: 'Client not authorized for organization' };

for (const dialect of dialects()) {
  describe(`GET /userinfo/v1/exists-by-mail/<realm>/<mail> (${dialect})`, () => {
    let w: CheckuserWorld;
    before(async () => {
      w = await checkuserWorld(dialect);
    });
    after(() => w.ctx.close());

    const answer = async (url: string, token: string | null = w.tokens.current) => {
      const res = await get(w.ctx, url, token ?? undefined);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    };

    it('answers exists: true for the mail of a user of the realm, in any letter case', async () => {
      for (const mail of ['Alice.Smith@Example.org', 'alice.smith@example.org', 'ALICE.SMITH@EXAMPLE.ORG']) {
        const r = await answer(byMail('example.org', mail));
        assert.deepEqual([r.status, r.body], [200, { exists: true }], mail);
      }
      assert.deepEqual((await answer(byMail('EXAMPLE.org', 'alice.smith@example.org'))).body, { exists: true });
      assert.deepEqual((await answer(byMail('other.org', 'bob@other.org'))).body, { exists: true });
    });

    it('answers exists: false for an unknown mail', async () => {
      const r = await answer(byMail('example.org', 'nobody@example.org'));
      assert.deepEqual([r.status, r.body], [200, { exists: false }]);
    });

    it('looks only within the named realm', async () => {
      assert.deepEqual((await answer(byMail('example.org', 'bob@other.org'))).body, { exists: false });
    });

    it('takes a mail address with an encoded slash as one segment', async () => {
      assert.deepEqual((await answer(byMail('example.org', 'a/b@example.org'))).body, { exists: false });
    });

    it('answers the same 403 for an existing and an absent mail in an organization the client is not configured for', async () => {
      const present = await answer(byMail('third.org', 'carol@third.org'));
      const absent = await answer(byMail('third.org', 'nobody@third.org'));
      assert.deepEqual([present.status, present.body], [403, NOT_AUTHORIZED]);
      assert.deepEqual([absent.status, absent.body], [present.status, present.body]);
      const unknown = await answer(byMail('unknown.example', 'carol@third.org'));
      assert.deepEqual([unknown.status, unknown.body], [403, NOT_AUTHORIZED]);
    });

    it('answers 403 to a client configured for no organization', async () => {
      const r = await answer(byMail('example.org', 'alice.smith@example.org'), w.tokens.unconfigured);
      assert.deepEqual([r.status, r.body], [403, NOT_AUTHORIZED]);
    });

    describe('bad input', () => {
      const cases: [string, string, string][] = [
        ['no realm segment', '/userinfo/v1/exists-by-mail', 'Missing realm'],
        ['empty realm', '/userinfo/v1/exists-by-mail/', 'Missing realm'],
        ['no mail segment', '/userinfo/v1/exists-by-mail/example.org', 'Missing mail address'],
        ['empty mail', '/userinfo/v1/exists-by-mail/example.org/', 'Missing mail address'],
        ['invalid realm', byMail('exa_mple.org', 'a@example.org'), 'Invalid realm'],
        ['single-label realm', byMail('localhost', 'a@example.org'), 'Invalid realm'],
        ['realm with @', byMail('alice@example.org', 'a@example.org'), 'Invalid realm'],
        [
          'over-long realm',
          byMail(`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.org`, 'a@example.org'),
          'Invalid realm',
        ],
        [
          'control character in realm',
          byMail('example.org\n', 'a@example.org'),
          'Identifier must not contain control characters',
        ],
        ['mail without @', byMail('example.org', 'alice.example.org'), "Mail address must contain '@'"],
        ['mail with empty local part', byMail('example.org', '@example.org'), 'Mail address has an empty local part'],
        ['mail with empty domain', byMail('example.org', 'alice@'), 'Mail address has an empty domain part'],
        [
          'mail with a space',
          byMail('example.org', 'alice smith@example.org'),
          'Mail address must not contain whitespace',
        ],
        [
          'mail with a control character',
          byMail('example.org', 'alice\u0001@example.org'),
          'Identifier must not contain control characters',
        ],
        // as in every path parameter: the request guard's
        ['mail with a NUL', byMail('example.org', 'alice\u0000@example.org'), 'Request contains a NUL character'],
        [
          'over-long mail',
          byMail('example.org', `${'a'.repeat(320)}@example.org`),
          'Mail address is too long (at most 320 characters)',
        ],
      ];
      for (const [name, url, message] of cases) {
        it(`400 for ${name}`, async () => {
          const r = await answer(url);
          assert.deepEqual([r.status, r.body], [400, { code: 400, message }]);
        });
      }
    });

    describe('authentication and scopes', () => {
      const url = byMail('example.org', 'alice.smith@example.org');
      it('401 without a token, with an invalid one, and with a token of another audience', async () => {
        for (const token of [null, 'garbage', w.tokens.passkey]) {
          const r = await answer(url, token);
          assert.deepEqual([r.status, r.body], [401, { code: 401, message: 'Token missing or invalid' }]);
        }
      });

      it('403 without system-check-user-existence', async () => {
        const r = await answer(url, w.tokens.legacy);
        assert.deepEqual([r.status, r.body], [403, { code: 403, message: 'Token must have all required scopes' }]);
      });
    });

    it('405 with Allow for other methods', async () => {
      const res = await get(w.ctx, byMail('example.org', 'a@example.org'), w.tokens.current, 'POST');
      assert.equal(res.statusCode, 405);
      assert.equal(res.headers.allow, 'GET, HEAD');
    });
  });
}
