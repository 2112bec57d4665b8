// `upstream add|list|show|update|disable|enable|remove|link|unlink` and `user show`: what they
// accept, refuse, print and audit; the client secret sealed and never shown; on both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects, migratedDatabase, seedOrg, seedUser, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { oidcCredentials } from '../../src/upstream/providers.ts';

for (const dialect of dialects()) {
  describe(`upstream commands (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      await seedOrg({ store });
      await seedUser({ store }, 1, 'ada@example.org');
    });
    after(async () => {
      await store?.close();
      await db?.drop();
    });

    const run = (args: string[], stdin = '') => cli(db.url, args, stdin);
    let id = '';

    it('adds an OpenID Connect provider, prints an object with id, seals the secret', async () => {
      const added = await run(
        [
          'upstream',
          'add',
          '--org',
          '1',
          '--type',
          'oidc',
          '--issuer',
          'https://accounts.google.com',
          '--client-id',
          'c1',
          '--client-secret-stdin',
          '--name',
          'Google',
          '--link-by',
          'email',
          '--namespace',
          'google',
          '--map',
          'eppn=upn',
          '--json',
        ],
        's3cret-value\n',
      );
      assert.equal(added.code, 0, added.err);
      const view = JSON.parse(added.out) as Record<string, unknown>;
      id = String(view.id);
      assert.match(id, /^[a-z0-9]{12}$/);
      assert.equal(view.name, 'Google');
      assert.equal(view.client_secret, 'set');
      assert.doesNotMatch(added.out, /s3cret/);
      const row = await store.db
        .selectFrom('upstream_providers')
        .selectAll()
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.doesNotMatch(row.oidc_client_secret ?? '', /s3cret/);
      assert.equal((await oidcCredentials(store, keyring(TEST_SECRET), id)).clientSecret, 's3cret-value');
      const audit = await store.db.selectFrom('audit_events').selectAll().where('kind', '=', 'upstream.add').execute();
      assert.equal(audit.length, 1);
      const shown = await run(['upstream', 'show', id]);
      assert.match(shown.out, /redirect_uri: https:\/\/idp\.example\.test\/upstream\/[a-z0-9]{12}\/callback/);
    });

    it('refuses bad input with a clear message and no row', async () => {
      const cases: [string[], RegExp][] = [
        [['--issuer', 'http://idp.example.com', '--client-id', 'c', '--client-secret-stdin'], /https URL/],
        [['--issuer', 'https://idp.example.com', '--client-id', 'c'], /--client-secret-stdin is required/],
        [
          ['--issuer', 'https://idp.example.com', '--client-id', 'c', '--client-secret-stdin', '--link-by', 'name'],
          /--link-by must be one of/,
        ],
        [
          ['--issuer', 'https://idp.example.com', '--client-id', 'c', '--client-secret-stdin', '--scopes', 'email'],
          /must include openid/,
        ],
        [
          [
            '--issuer',
            'https://idp.example.com',
            '--client-id',
            'c',
            '--client-secret-stdin',
            '--namespace',
            'myspace',
          ],
          /--namespace must be one of/,
        ],
        [
          ['--issuer', 'https://idp.example.com', '--client-id', 'c', '--client-secret-stdin', '--namespace', 'google'],
          /--namespace google is only for its own issuer \(https:\/\/accounts\.google\.com\)/,
        ],
        [
          ['--issuer', 'https://idp.example.com', '--client-id', 'c', '--client-secret-stdin', '--namespace', 'github'],
          /--namespace github has no OpenID Connect issuer/,
        ],
        [
          ['--issuer', 'https://idp.example.com', '--client-id', 'c', '--client-secret-stdin', '--map', 'eppn'],
          /<attribute>=<claim>/,
        ],
      ];
      for (const [args, message] of cases) {
        const r = await run(['upstream', 'add', '--org', '1', '--type', 'oidc', ...args], 'secret\n');
        assert.notEqual(r.code, 0, args.join(' '));
        assert.match(r.err, message);
      }
      const list = JSON.parse((await run(['upstream', 'list', '--json'])).out) as unknown[];
      assert.equal(list.length, 1);
    });

    it('links, shows the link in user show, refuses a second identity, unlinks; audited', async () => {
      assert.equal(
        (await run(['upstream', 'link', id, '--eppn', 'ada@example.org', '--subject', '1234567890'])).code,
        0,
      );
      const shown = JSON.parse((await run(['user', 'show', 'ada@example.org', '--json'])).out) as {
        links: { upstream: string; subject: string }[];
        secondary_ids: string[];
        passkeys: number;
      };
      assert.deepEqual(
        shown.links.map((l) => [l.upstream, l.subject]),
        [[id, '1234567890']],
      );
      assert.deepEqual(shown.secondary_ids, ['google:1234567890']);
      assert.equal(shown.passkeys, 0);
      const again = await run(['upstream', 'link', id, '--eppn', 'ada@example.org', '--subject', 'other']);
      assert.notEqual(again.code, 0);
      assert.match(again.err, /linked to another identity/);
      const refused = await store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'upstream.refused')
        .execute();
      assert.equal(refused.length, 1);
      assert.equal((await run(['upstream', 'unlink', id, '--eppn', 'ada@example.org'])).code, 0);
      const after = JSON.parse((await run(['user', 'show', 'ada@example.org', '--json'])).out) as {
        links: unknown[];
        secondary_ids: string[];
      };
      assert.deepEqual(after.links, []);
      assert.deepEqual(after.secondary_ids, []);
    });

    it('disables, enables, updates and removes, each audited', async () => {
      assert.equal(JSON.parse((await run(['upstream', 'disable', id, '--json'])).out).enabled, false);
      assert.equal(JSON.parse((await run(['upstream', 'enable', id, '--json'])).out).enabled, true);
      const updated = JSON.parse(
        (await run(['upstream', 'update', id, '--name', 'Google Workspace', '--create-users', 'on', '--json'])).out,
      );
      assert.equal(updated.name, 'Google Workspace');
      assert.equal(updated.create_users, true);
      const moved = await run(['upstream', 'update', id, '--namespace', 'apple']);
      assert.notEqual(moved.code, 0, 'Google is not the issuer of apple ids');
      assert.match(moved.err, /--namespace apple is only for its own issuer/);
      assert.equal((await run(['upstream', 'remove', id])).code, 0);
      assert.notEqual((await run(['upstream', 'show', id])).code, 0);
      const kinds = (
        await store.db.selectFrom('audit_events').select('kind').where('kind', 'like', 'upstream.%').execute()
      ).map((r) => r.kind);
      for (const k of ['upstream.disable', 'upstream.enable', 'upstream.update', 'upstream.remove'])
        assert.ok(kinds.includes(k), k);
    });

    it('refuses --type saml with metadata it cannot read, with a clear message (test/upstream/saml-cli.test.ts has the rest)', async () => {
      const r = await run(['upstream', 'add', '--org', '1', '--type', 'saml', '--metadata', '/nonexistent.xml']);
      assert.notEqual(r.code, 0);
      assert.match(r.err, /--metadata '\/nonexistent.xml' cannot be read/);
    });
  });
}
