import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dialects, migratedDatabase, cli, coseP256PublicKey, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { listOrganizationPasskeys } from '../../src/store/passkeys.ts';
import { keyring } from '../../src/crypto.ts';
import { secretMatches } from '../../src/clients/index.ts';
import { findClient } from '../../src/store/clients.ts';

const tmp = mkdtempSync(join(tmpdir(), 'idp-cli-'));
function file(name: string, content: unknown): string {
  const path = join(tmp, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

for (const dialect of dialects()) {
  describe(`admin CLI (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    const run = (args: string[], stdin?: string) => cli(db.url, args, stdin);
    const count = async (table: 'organizations' | 'users' | 'clients' | 'passkeys') =>
      Number(
        (
          await store.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );

    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
    });
    after(async () => {
      await store.close();
      await db.drop();
    });

    it('adds and lists organizations', async () => {
      assert.deepEqual(
        await run(['org', 'add', '--id', '1', '--realm', 'Example.org', '--name', 'Example University']),
        { code: 0, out: 'organization 1 (example.org) added', err: '' },
      );
      assert.equal((await run(['org', 'add', '--id', '2', '--realm', 'other.org', '--name', 'Other'])).code, 0);
      const list = await run(['org', 'list', '--json']);
      assert.equal(list.code, 0);
      assert.deepEqual(
        JSON.parse(list.out).map((o: { id: number; realm: string }) => [o.id, o.realm]),
        [
          [1, 'example.org'],
          [2, 'other.org'],
        ],
      );
      assert.match((await run(['org', 'list'])).out, /^id\s+realm\s+name/);
    });

    const orgErrors: [string[], RegExp][] = [
      [['org', 'add', '--id', '1', '--realm', 'again.org', '--name', 'Dup'], /organization 1 already exists/],
      [
        ['org', 'add', '--id', '3', '--realm', 'example.org', '--name', 'Dup realm'],
        /realm 'example.org' already belongs/,
      ],
      [['org', 'add', '--id', 'x', '--realm', 'x.org', '--name', 'X'], /--id must be a positive integer/],
      [['org', 'add', '--id', '4', '--realm', 'not a realm', '--name', 'X'], /not a valid domain name/],
      [['org', 'add', '--id', '4', '--realm', 'x.org'], /--name is required/],
      [
        ['org', 'add', '--id', '4', '--realm', 'x.org', '--name', 'X', '--colour', 'red'],
        /^error: unknown option '--colour' \(usage: npm run idp -- org add --id <n> --realm <realm> --name <name>;/,
      ],
    ];
    for (const [args, message] of orgErrors) {
      it(`refuses: ${args.join(' ')}`, async () => {
        const before = await count('organizations');
        const r = await run(args);
        assert.notEqual(r.code, 0);
        assert.equal(r.out, '');
        assert.equal(r.err.split('\n').length, 1);
        assert.match(r.err, message);
        assert.equal(await count('organizations'), before);
      });
    }

    it('adds users, with a password from stdin, and lists them', async () => {
      const r = await run(
        [
          'user',
          'add',
          '--org',
          '1',
          '--eppn',
          'Alice@Example.org',
          '--name',
          'Alice Example',
          '--email',
          'alice@example.org',
          '--nin',
          '01019012345',
          '--password-stdin',
          '--json',
        ],
        'correct horse battery\n',
      );
      assert.equal(r.code, 0, r.err);
      const user = JSON.parse(r.out);
      assert.equal(user.eppn, 'alice@example.org');
      assert.equal(user.has_password, true);
      assert.match(user.sub, /^[0-9a-f-]{36}$/);
      assert.equal((await run(['user', 'add', '--org', '1', '--eppn', 'bob@example.org', '--name', 'Bob'])).code, 0);
      const list = JSON.parse((await run(['user', 'list', '--org', '1', '--json'])).out);
      assert.deepEqual(
        list.map((u: { eppn: string; has_password: boolean }) => [u.eppn, u.has_password]),
        [
          ['alice@example.org', true],
          ['bob@example.org', false],
        ],
      );
    });

    const userErrors: [string[], RegExp, string?][] = [
      [['user', 'add', '--org', '99', '--eppn', 'x@example.org', '--name', 'X'], /organization 99 does not exist/],
      [
        ['user', 'add', '--org', '1', '--eppn', 'alice@example.org', '--name', 'Dup'],
        /user 'alice@example.org' already exists/,
      ],
      [
        ['user', 'add', '--org', '1', '--eppn', 'carol@other.org', '--name', 'Carol'],
        /eppn realm 'other.org' does not match organization 1/,
      ],
      [['user', 'add', '--org', '1', '--eppn', 'carol', '--name', 'Carol'], /must contain '@'/],
      [
        ['user', 'add', '--org', '1', '--eppn', 'carol@example.org', '--name', 'Carol', '--email', 'nope'],
        /not a valid address/,
      ],
      [['user', 'add', '--org', '1', '--eppn', 'carol@example.org', '--name', 'Carol', '--nin', '123'], /11 digits/],
      [
        ['user', 'add', '--org', '1', '--eppn', 'carol@example.org', '--name', 'Carol', '--password-stdin'],
        /at least 8 characters/,
        'short\n',
      ],
      [
        ['user', 'add', '--org', '1', '--eppn', 'carol@example.org', '--name', 'Carol', '--password-stdin'],
        /no password on standard input/,
        '',
      ],
    ];
    for (const [args, message, stdin] of userErrors) {
      it(`refuses: ${args.slice(2).join(' ')}`, async () => {
        const before = await count('users');
        const r = await run(args, stdin);
        assert.notEqual(r.code, 0);
        assert.equal(r.err.split('\n').length, 1);
        assert.match(r.err, message);
        assert.equal(await count('users'), before);
      });
    }

    it('sets a password from stdin only', async () => {
      assert.equal(
        (await run(['user', 'set-password', '--eppn', 'bob@example.org', '--password-stdin'], 'a long enough password'))
          .code,
        0,
      );
      const r = await run(
        ['user', 'set-password', '--eppn', 'nobody@example.org', '--password-stdin'],
        'a long enough password',
      );
      assert.equal(r.code, 1);
      assert.match(r.err, /user 'nobody@example.org' does not exist/);
      assert.match(
        (await run(['user', 'set-password', '--eppn', 'bob@example.org'])).err,
        /--password-stdin is required/,
      );
    });

    it('adds and removes secondary ids', async () => {
      assert.deepEqual(await run(['user', 'add-id', '--eppn', 'alice@example.org', '--id', 'Facebook:10001234']), {
        code: 0,
        out: 'facebook:10001234 added to alice@example.org',
        err: '',
      });
      const cases: [string[], RegExp][] = [
        [['user', 'add-id', '--eppn', 'bob@example.org', '--id', 'facebook:10001234'], /already belongs to a user/],
        [['user', 'add-id', '--eppn', 'alice@example.org', '--id', 'myspace:1'], /namespace of edugain, eidas/],
        [['user', 'add-id', '--eppn', 'alice@example.org', '--id', 'nin:01019012345'], /namespace of edugain/],
        [['user', 'add-id', '--eppn', 'alice@example.org', '--id', 'edugain:'], /1-256 characters/],
        [
          ['user', 'add-id', '--eppn', 'ghost@example.org', '--id', 'edugain:x'],
          /user 'ghost@example.org' does not exist/,
        ],
        [['user', 'remove-id', '--eppn', 'bob@example.org', '--id', 'facebook:10001234'], /has no id/],
      ];
      for (const [args, message] of cases) {
        const r = await run(args);
        assert.equal(r.code, 1, args.join(' '));
        assert.match(r.err, message);
      }
      assert.equal(
        (await run(['user', 'remove-id', '--eppn', 'alice@example.org', '--id', 'facebook:10001234'])).code,
        0,
      );
      assert.equal((await store.db.selectFrom('user_ids').selectAll().execute()).length, 0);
    });

    let clientId = '';
    it('adds a client, printing the secret once; show and list never print it', async () => {
      const r = await run([
        'client',
        'add',
        '--name',
        'Helpdesk',
        '--scopes',
        'passkey.read passkey.delete',
        '--orgs',
        '1',
        '--json',
      ]);
      assert.equal(r.code, 0, r.err);
      const c = JSON.parse(r.out);
      clientId = c.client_id;
      assert.equal(typeof c.client_secret, 'string');
      assert.ok(c.client_secret.length >= 43);
      assert.deepEqual(c.scopes, ['passkey.read', 'passkey.delete']);
      assert.deepEqual(c.organizations, [1]);
      const row = await findClient(store.db, clientId);
      assert.notEqual(row!.secret_hash, c.client_secret, 'the secret is stored hashed');
      assert.ok(secretMatches(keyring(TEST_SECRET), row!.secret_hash, c.client_secret));
      const shown = await run(['client', 'show', clientId]);
      assert.doesNotMatch(shown.out, new RegExp(c.client_secret));
      assert.match(shown.out, /Helpdesk/);
      assert.doesNotMatch((await run(['client', 'list'])).out, new RegExp(c.client_secret));
      const human = await run([
        'client',
        'add',
        '--name',
        'Web app',
        '--redirect-uri',
        'https://app.example.org/cb',
        '--groups',
        'userinfo-name',
      ]);
      assert.match(human.out, /shown only now/);
    });

    it('rotates a secret: the old one stops matching', async () => {
      const before = (await findClient(store.db, clientId))!.secret_hash;
      const r = await run(['client', 'rotate-secret', clientId, '--json']);
      assert.equal(r.code, 0);
      const { client_secret } = JSON.parse(r.out);
      const after = (await findClient(store.db, clientId))!.secret_hash;
      assert.notEqual(before, after);
      assert.ok(secretMatches(keyring(TEST_SECRET), after, client_secret));
    });

    it('registers back- and front-channel logout URIs; show prints them', async () => {
      const r = await run([
        'client',
        'add',
        '--name',
        'Portal',
        '--redirect-uri',
        'https://portal.example.org/cb',
        '--backchannel-logout-uri',
        'https://portal.example.org/logout/back',
        '--frontchannel-logout-uri',
        'https://portal.example.org/logout/front',
        '--json',
      ]);
      assert.equal(r.code, 0, r.err);
      const c = JSON.parse(r.out);
      assert.equal(c.backchannel_logout_uri, 'https://portal.example.org/logout/back');
      assert.equal(c.frontchannel_logout_uri, 'https://portal.example.org/logout/front');
      const row = await findClient(store.db, c.client_id);
      assert.equal(row!.backchannel_logout_uri, 'https://portal.example.org/logout/back');
      assert.equal(row!.frontchannel_logout_uri, 'https://portal.example.org/logout/front');
      const shown = await run(['client', 'show', c.client_id]);
      assert.match(shown.out, /backchannel_logout_uri\s+https:\/\/portal\.example\.org\/logout\/back/);
      assert.match(shown.out, /frontchannel_logout_uri\s+https:\/\/portal\.example\.org\/logout\/front/);
      const help = await run(['client', 'add', '--help']);
      assert.match(help.out, /--backchannel-logout-uri <uri>/);
      assert.match(help.out, /--frontchannel-logout-uri <uri>/);
    });

    const clientErrors: [string[], RegExp][] = [
      [['client', 'add', '--name', 'X', '--scopes', 'passkey.write'], /unknown scope 'passkey.write'/],
      [['client', 'add', '--name', 'X', '--groups', 'everything'], /unknown attribute group 'everything'/],
      [['client', 'add', '--name', 'X', '--orgs', '42'], /organization 42 does not exist/],
      [['client', 'add', '--name', 'X', '--redirect-uri', 'http://app.example.org/cb'], /must use https/],
      [['client', 'add', '--name', 'X', '--redirect-uri', 'not-a-url'], /not an absolute URL/],
      [['client', 'add', '--name', 'X', '--redirect-uri', 'com.example.app:/cb'], /must use https/],
      [['client', 'add', '--name', 'X', '--redirect-uri', 'file:///etc/passwd'], /must use https/],
      [['client', 'grant-orgs', 'no-such-client', '--orgs', '1'], /does not exist/],
      [['client', 'add', '--name', 'X', '--orgs', '99999999999999999999'], /at most 15 digits/],
      [['client', 'add', '--name', 'X', '--public'], /public client needs at least one --redirect-uri/],
      [['client', 'show', 'no-such-client'], /client 'no-such-client' does not exist/],
      [['client', 'rotate-secret', 'no-such-client'], /does not exist/],
      [
        [
          'client',
          'add',
          '--name',
          'X',
          '--redirect-uri',
          'https://a.example.org/cb',
          '--backchannel-logout-uri',
          'http://a.example.org/bc',
        ],
        /back-channel logout URI 'http:\/\/a.example.org\/bc' must use https/,
      ],
      [
        [
          'client',
          'add',
          '--name',
          'X',
          '--redirect-uri',
          'https://a.example.org/cb',
          '--frontchannel-logout-uri',
          'https://a.example.org/fc#x',
        ],
        /front-channel logout URI .* must not contain a fragment/,
      ],
      [
        ['client', 'add', '--name', 'X', '--backchannel-logout-uri', 'https://a.example.org/bc'],
        /logout URIs are for clients that sign users in/,
      ],
      [['client', 'add', '--name', 'X', '--backchannel-logout-uri'], /backchannel-logout-uri/],
    ];
    for (const [args, message] of clientErrors) {
      it(`refuses: ${args.join(' ')}`, async () => {
        const before = await count('clients');
        const r = await run(args);
        assert.notEqual(r.code, 0);
        assert.equal(r.err.split('\n').length, 1);
        assert.match(r.err, message);
        assert.equal(await count('clients'), before);
      });
    }

    it('imports passkeys all or nothing, naming the bad entry', async () => {
      const key = (await coseP256PublicKey()).toString('base64url');
      const entry = (n: number, extra: Record<string, unknown> = {}) => ({
        eppn: 'alice@example.org',
        label: `Key ${n}`,
        credential_id: Buffer.alloc(32, n).toString('base64url'),
        public_key: key,
        aaguid: 'ADCE0002-35BC-C60A-648B-0B25F1F05503',
        sign_count: 7,
        transports: ['internal', 'hybrid'],
        created_at: '2024-01-15T10:30:00+00:00',
        last_used_at: null,
        mfa_verified: true,
        ...extra,
      });
      const cases: [unknown, RegExp][] = [
        [[entry(1), entry(2, { eppn: 'ghost@example.org' })], /entry 2: user 'ghost@example.org' does not exist/],
        [[entry(1), entry(2), entry(3, { public_key: 'AAAA' })], /entry 3: public_key/],
        [[entry(1), entry(2, { credential_id: entry(1).credential_id })], /entry 2: credential_id appears twice/],
        [[entry(1, { created_at: 'yesterday' })], /entry 1: created_at/],
        [[entry(1, { aaguid: 'nope' })], /entry 1: aaguid/],
        [[entry(1, { sign_count: -1 })], /entry 1: sign_count/],
        [[entry(1, { transports: ['carrier-pigeon'] })], /entry 1: transports/],
        [[entry(1, { mfa_verified: 'yes' })], /entry 1: mfa_verified/],
        [[entry(1, { colour: 'red' })], /entry 1: unknown field 'colour'/],
        [[entry(1, { label: 'x'.repeat(101) })], /entry 1: label must be 1-100 printable characters/],
        [[entry(1, { label: 'Key \u202Eevil' })], /entry 1: label must be 1-100 printable characters/],
        [{ not: 'an array' }, /JSON array/],
        ['{ broken json', /not valid JSON/],
      ];
      for (const [content, message] of cases) {
        const r = await run(['passkey', 'import', '--file', file('bad.json', content)]);
        assert.equal(r.code, 1, JSON.stringify(content));
        assert.match(r.err, message);
        assert.equal(await count('passkeys'), 0);
      }
      assert.match((await run(['passkey', 'import', '--file', join(tmp, 'missing.json')])).err, /no such file/);
      const ok = await run([
        'passkey',
        'import',
        '--file',
        file('good.json', [entry(1), entry(2, { aaguid: null, last_used_at: '2024-02-01T08:00:00Z' })]),
        '--json',
      ]);
      assert.equal(ok.code, 0, ok.err);
      assert.equal(JSON.parse(ok.out).imported, 2);
      const again = await run(['passkey', 'import', '--file', file('again.json', [entry(3), entry(1)])]);
      assert.match(again.err, /already registered; nothing was imported/);
      assert.equal(await count('passkeys'), 2);
      const rows = await listOrganizationPasskeys(store.db, 1, 0, 10);
      assert.equal(rows[0]!.aaguid, 'adce0002-35bc-c60a-648b-0b25f1f05503');
      assert.equal(rows[1]!.aaguid, '00000000-0000-0000-0000-000000000000');
    });

    it('lists passkeys of an organization and of one user', async () => {
      const all = JSON.parse((await run(['passkey', 'list', '--org', '1', '--json'])).out);
      assert.equal(all.length, 2);
      assert.deepEqual(Object.keys(all[0]).sort(), [
        'aaguid',
        'created_at',
        'eppn',
        'id',
        'label',
        'last_used_at',
        'mfa_verified',
      ]);
      assert.equal(all[0].created_at, '2024-01-15T10:30:00+00:00');
      assert.equal(all[1].last_used_at, '2024-02-01T08:00:00+00:00');
      assert.equal(
        JSON.parse((await run(['passkey', 'list', '--org', '1', '--eppn', 'bob@example.org', '--json'])).out).length,
        0,
      );
      assert.match(
        (await run(['passkey', 'list', '--org', '1', '--eppn', 'x@other.org'])).err,
        /does not exist in organization 1/,
      );
    });

    it('rotates signing keys: new keys activate later, old ones stay published', async () => {
      const r = await run(['keys', 'rotate', '--json']);
      assert.equal(r.code, 0, r.err);
      const added = JSON.parse(r.out);
      assert.deepEqual(added.map((k: { alg: string }) => k.alg).sort(), ['ES256', 'RS256']);
      const rows = await store.db.selectFrom('signing_keys').selectAll().execute();
      assert.equal(rows.length, 4);
      assert.equal(rows.filter((k) => k.retired_at !== null).length, 2);
    });

    it('grant-orgs and revoke-orgs refuse unknown or missing organizations', async () => {
      for (const args of [
        ['client', 'grant-orgs', clientId, '--orgs', '77'],
        ['client', 'grant-orgs', clientId, '--orgs', ','],
        ['client', 'revoke-orgs', clientId, '--orgs', '77'],
      ]) {
        const r = await run(args);
        assert.equal(r.code, 1, args.join(' '));
        assert.equal(r.err.split('\n').length, 1);
      }
      assert.deepEqual(JSON.parse((await run(['client', 'show', clientId, '--json'])).out).organizations, [1]);
    });

    it('refuses to run with a secret the database was not set up with', async () => {
      const { runCli } = await import('../../src/cli/index.ts');
      const err: string[] = [];
      const code = await runCli(
        ['org', 'add', '--id', '9', '--realm', 'nine.org', '--name', 'Nine'],
        { out: () => {}, err: (l) => err.push(l), readStdin: async () => '' },
        {
          DATABASE_URL: db.url,
          IDP_SECRET: 'another-secret-0123456789-abcdefghijklmnop',
        },
      );
      assert.equal(code, 1);
      assert.match(err.join('\n'), /IDP_SECRET does not match/);
      assert.equal(await count('organizations'), 2);
    });

    it('unknown commands and help', async () => {
      const r = await run(['frobnicate']);
      assert.equal(r.code, 2);
      assert.match(r.err, /unknown command/);
      assert.match((await run(['help'])).out, /org add --id <n>/);
    });
  });
}

describe('admin CLI as a process', () => {
  it('never generates a secret of its own', () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-cli-nosecret-'));
    const env = { ...process.env, DATABASE_URL: join(dir, 'idp.sqlite'), IDP_SECRET: '' };
    const r = spawnSync(process.execPath, ['src/main.ts', 'org', 'list'], { env, encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no IDP_SECRET set and none stored at/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
  });

  it('npm run idp prints one error line and exits non-zero', () => {
    const dir = mkdtempSync(join(tmpdir(), 'idp-cli-proc-'));
    const env = { ...process.env, DATABASE_URL: join(dir, 'idp.sqlite'), IDP_SECRET: TEST_SECRET };
    const ok = spawnSync(
      process.execPath,
      ['src/main.ts', 'org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example'],
      { env, encoding: 'utf8' },
    );
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout.trim(), 'organization 1 (example.org) added');
    const dup = spawnSync(
      process.execPath,
      ['src/main.ts', 'org', 'add', '--id', '1', '--realm', 'example.org', '--name', 'Example'],
      { env, encoding: 'utf8' },
    );
    assert.equal(dup.status, 1);
    assert.equal(dup.stderr.trim(), 'error: organization 1 already exists');
  });
});

describe('admin CLI usage and help (a real process)', () => {
  const idp = (...args: string[]) =>
    spawnSync(process.execPath, ['src/main.ts', ...args], {
      env: { ...process.env, DATABASE_URL: join(tmp, 'absent', 'x.sqlite') },
      encoding: 'utf8',
      timeout: 20000,
    });

  it('with no command prints the usage and exits 2, starting nothing', () => {
    const r = idp();
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^usage: npm run idp -- <command>/);
    assert.match(r.stderr, /\n {2}org add --id <n> --realm <realm> --name <name>\n/);
    assert.equal(r.stdout, '');
  });

  for (const flag of ['--help', '-h']) {
    it(`${flag} works at every level and exits 0`, () => {
      const top = idp(flag);
      assert.equal(top.status, 0);
      assert.match(top.stdout, /^usage: npm run idp -- <command>/);
      const group = idp('org', flag);
      assert.equal(group.status, 0);
      assert.match(group.stdout, /org add --id <n>/);
      assert.match(group.stdout, /org list/);
      assert.doesNotMatch(group.stdout, /client add/);
      const command = idp('client', 'add', flag);
      assert.equal(command.status, 0);
      assert.match(command.stdout, /^usage: npm run idp -- client add --name <name>/);
      // each option with its description, from the same definition the parser uses
      assert.match(command.stdout, /--grant <grant>\s+\S.*client_credentials/);
    });
  }

  it('an unknown option names the option and the command usage, not the parser text', () => {
    const r = idp('org', 'add', '--bogus', '1');
    assert.equal(r.status, 2);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    assert.match(r.stderr, /^error: unknown option '--bogus' \(usage: npm run idp -- org add --id <n>/);
    assert.doesNotMatch(r.stderr, /ERR_PARSE_ARGS|To specify a positional argument/);
  });
});
