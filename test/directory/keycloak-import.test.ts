// `import keycloak` with a realm export in Keycloak's own format (test/fixtures/keycloak-realm-export.json,
// its PBKDF2 credentials checked here against Python's hashlib): a dry run writes nothing; the import
// brings the users, who then sign in over real HTTP with their Keycloak passwords through an
// authorization code flow of a client brought with its Keycloak client id and secret; the report
// lists what was not carried over; a second run changes nothing.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cli, dialects, pickFreePort, seedOrg, seedUser, startTestApp, type TestContext } from '../helpers.ts';
import {
  cookieJar,
  FlowError,
  newCredential,
  signIn,
  type RelyingParty,
  type Target,
} from '../../bench/signin-flow.ts';
import { getClient } from '../../src/clients/index.ts';
import { findUserByEppn, listUsersOfOrganization } from '../../src/store/directory.ts';

const FIXTURE = fileURLToPath(new URL('../fixtures/keycloak-realm-export.json', import.meta.url));
const PASSWORDS = JSON.parse(
  readFileSync(fileURLToPath(new URL('../fixtures/keycloak-realm-export.passwords.json', import.meta.url)), 'utf8'),
) as Record<string, string>;
const REALM = 'acme.example.org';
const PORTAL = {
  clientId: 'portal',
  secret: 'kq9Vd2wRZ3pY7sT1bN4mX8cH6fJ0gL5e',
  redirectUri: 'https://portal.acme.example.org/callback',
  scope: 'openid',
};

interface Report {
  realm: string;
  dry_run: boolean;
  users: { created: number; updated: number; unchanged: number; rejected: number; passwords: number };
  disabled: number;
  clients: { client_id: string; type: string; status: string; redirect_uris: string[]; new_secret?: string }[];
  not_carried: { kind: string; subject: string; detail: string }[];
}

describe('the Keycloak fixture', () => {
  it("holds PBKDF2 credentials that Python's hashlib derives from the documented passwords", () => {
    const realm = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { users: { username: string; credentials: any[] }[] };
    const script = `import hashlib, base64, json, sys
for c in json.load(sys.stdin):
    d = {"pbkdf2": "sha1", "pbkdf2-sha256": "sha256", "pbkdf2-sha512": "sha512"}[c["algorithm"]]
    dk = hashlib.pbkdf2_hmac(d, c["password"].encode(), base64.b64decode(c["salt"]), c["iterations"], 64)
    print(base64.b64encode(dk).decode() == c["value"])`;
    const creds = realm.users.flatMap((u) =>
      u.credentials
        .filter((c) => c.type === 'password' && PASSWORDS[u.username])
        .map((c) => {
          const secret = JSON.parse(c.secretData);
          const data = JSON.parse(c.credentialData);
          return {
            ...secret,
            algorithm: data.algorithm,
            iterations: data.hashIterations,
            password: PASSWORDS[u.username],
          };
        }),
    );
    assert.equal(creds.length, 5);
    const run = spawnSync('/usr/bin/python3', ['-c', script], { input: JSON.stringify(creds), encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.stdout.trim().split('\n'), ['True', 'True', 'True', 'True', 'True']);
  });
});

for (const dialect of dialects()) {
  describe(`import keycloak (${dialect})`, () => {
    let ctx: TestContext;
    let target: Target;
    /** the secret the import made for the client whose secret the export masked */
    let reportsSecret = '';
    const run = async (...args: string[]) => {
      const r = await cli(ctx.config.databaseUrl, ['import', 'keycloak', '--org', '7', '--json', ...args, FIXTURE]);
      return { ...r, report: r.out.startsWith('{') ? (JSON.parse(r.out) as Report) : undefined };
    };
    const person = async (username: string, password = PASSWORDS[username]!) => {
      const eppn = username.includes('@') ? username : `${username}@${REALM}`;
      const sub = (await findUserByEppn(ctx.store.db, eppn))!.sub;
      return { eppn, password, sub, credential: newCredential(), jar: cookieJar() };
    };

    before(async () => {
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url }, { listen: port });
      target = { url, publicUrl: url };
      await seedOrg(ctx, 7, REALM, 'ACME University');
    });
    after(() => ctx?.close());

    it('a dry run reports what would happen and writes nothing', async () => {
      const { code, report, err } = await run('--dry-run');
      assert.equal(code, 0, err);
      assert.equal(report!.dry_run, true);
      assert.deepEqual([report!.users.created, report!.users.passwords, report!.disabled], [6, 5, 1]);
      assert.deepEqual(
        report!.clients.map((c) => [c.client_id, c.status]),
        [
          ['portal', 'would add'],
          ['timetable-spa', 'would add'],
          ['reports', 'would add'],
        ],
      );
      assert.equal((await listUsersOfOrganization(ctx.store.db, 7)).length, 0);
      await assert.rejects(getClient(ctx.store, 'portal'), /does not exist/);
    });

    it('imports users and clients, and reports what was not carried over', async () => {
      const { code, report, out } = await run();
      assert.equal(code, 0);
      assert.deepEqual(
        [report!.users.created, report!.users.rejected, report!.users.passwords, report!.disabled],
        [6, 0, 5, 1],
      );
      assert.ok(!out.includes('VY6i') && !/"salt"/.test(out), 'no credential in the report');
      const kinds = (kind: string) =>
        report!.not_carried.filter((n) => n.kind === kind).map((n) => n.subject + ': ' + n.detail);
      assert.deepEqual(kinds('credential'), ['alice: otp credential (enrol again here)']);
      assert.deepEqual(kinds('identity_provider_link'), ["alice: link to identity provider 'google'"]);
      assert.deepEqual(kinds('role'), ['alice: realm roles: helpdesk', 'alice: client roles: portal: editor']);
      assert.deepEqual(kinds('group'), ['alice: groups: /staff']);
      assert.deepEqual(kinds('password'), ["frank: algorithm 'md5' is not supported"]);
      assert.deepEqual(kinds('identity_provider'), ["acme: identity provider 'google' (google)"]);
      assert.deepEqual(kinds('attribute'), ["alice: attribute 'phoneNumber' has no column here"]);
      assert.deepEqual(
        kinds('client').map((s) => s.split(':')[0]),
        ['grades-api', 'https'],
      );
      assert.match(kinds('client')[1]!, /protocol 'saml'/);
      assert.ok(kinds('redirect_uri').some((s) => s.includes('https://portal.acme.example.org/*')));
      assert.ok(kinds('client_setting').some((s) => s.startsWith('reports: service account')));
      assert.deepEqual(kinds('service_account'), ['service-account-reports: the user of a client service account']);

      const alice = (await findUserByEppn(ctx.store.db, `alice@${REALM}`))!;
      assert.deepEqual(
        [alice.name, alice.given_name, alice.email, alice.employee_number, alice.affiliation, alice.external_id],
        ['Alice Liddell', 'Alice', `alice@${REALM}`, 'E-1001', 'staff member', '0c6b2f1e-7d1a-4c8e-9f63-1a2b3c4d5e01'],
      );
      assert.equal((await findUserByEppn(ctx.store.db, `bob@${REALM}`))!.student_number, 'S-2002');
      assert.notEqual((await findUserByEppn(ctx.store.db, `dave@${REALM}`))!.disabled_at, null);
      assert.equal((await findUserByEppn(ctx.store.db, `frank@${REALM}`))!.password_hash, null);

      const portal = await getClient(ctx.store, 'portal');
      assert.deepEqual(
        [portal.name, portal.public, portal.redirectUris],
        ['Staff portal', false, [PORTAL.redirectUri]],
      );
      assert.deepEqual(portal.postLogoutRedirectUris, ['https://portal.acme.example.org/bye']);
      const spa = await getClient(ctx.store, 'timetable-spa');
      assert.deepEqual([spa.public, spa.redirectUris], [true, ['https://timetable.acme.example.org/app/callback']]);
      const reports = report!.clients.find((c) => c.client_id === 'reports')!;
      assert.match(reports.new_secret!, /^[A-Za-z0-9_-]{43}$/, 'the masked secret was replaced by a new one');
      reportsSecret = reports.new_secret!;
      assert.equal(report!.clients.find((c) => c.client_id === 'portal')!.new_secret, undefined);
    });

    it('users sign in with their Keycloak passwords through the portal, with its Keycloak secret; hashes become argon2id', async () => {
      const rp: RelyingParty = PORTAL;
      for (const username of ['alice', 'bob', 'carol', 'erin@acme.example.org']) {
        const user = await person(username);
        await assert.rejects(
          signIn(target, rp, { ...user, password: `${user.password}?` }, 'password'),
          /password sign-in: 401/,
        );
        const { claims } = await signIn(target, rp, user, 'password');
        assert.equal(claims.sub, user.sub);
        assert.match((await findUserByEppn(ctx.store.db, user.eppn))!.password_hash!, /^\$argon2id\$v=19\$/);
        assert.equal((await signIn(target, rp, await person(username), 'password')).claims.sub, user.sub);
      }
      // disabled in Keycloak: the password is right, the account is not open
      await assert.rejects(signIn(target, rp, await person('dave'), 'password'), (err) => {
        assert.ok(err instanceof FlowError);
        assert.match(err.message, /^password sign-in: 403/);
        return true;
      });
      await assert.rejects(signIn(target, rp, await person('frank', 'anything at all'), 'password'), /401/);
    });

    it('the client whose secret was masked in the export works with the new one', async () => {
      const report = (await run('--dry-run')).report!;
      assert.equal(report.clients.find((c) => c.client_id === 'reports')!.status, 'exists');
      const rp = {
        clientId: 'reports',
        secret: reportsSecret,
        redirectUri: 'https://reports.acme.example.org/oidc/callback',
        scope: 'openid',
      };
      const user = await person('bob');
      assert.equal((await signIn(target, rp, user, 'password')).claims.sub, user.sub);
      await assert.rejects(
        signIn(target, { ...rp, secret: '**********' }, await person('bob'), 'password'),
        /token: 401/,
      );
    });

    it('a second run changes nothing: no user, password or client is written again', async () => {
      const before = (await findUserByEppn(ctx.store.db, `alice@${REALM}`))!.password_hash;
      const { report } = await run();
      assert.deepEqual(
        [
          report!.users.created,
          report!.users.updated,
          report!.users.unchanged,
          report!.users.passwords,
          report!.disabled,
        ],
        [0, 0, 6, 0, 0],
      );
      assert.deepEqual(
        report!.clients.map((c) => c.status),
        ['exists', 'exists', 'exists'],
      );
      assert.equal((await findUserByEppn(ctx.store.db, `alice@${REALM}`))!.password_hash, before);
    });
  });
}

for (const dialect of dialects()) {
  describe(`import keycloak: a disabled user named in another organization's realm (${dialect})`, () => {
    it('is refused, and the user of that other organization stays enabled', async () => {
      const ctx = await startTestApp(dialect);
      const dir = mkdtempSync(join(tmpdir(), 'kc-'));
      try {
        await seedOrg(ctx, 7, REALM, 'ACME University');
        await seedOrg(ctx, 8, 'other.example.org', 'Other College');
        await seedUser(ctx, 8, 'bob@other.example.org');
        const realm = JSON.parse(readFileSync(FIXTURE, 'utf8')) as { users: unknown[]; clients: unknown[] };
        realm.users = [{ username: 'bob@other.example.org', enabled: false, firstName: 'Bob', credentials: [] }];
        realm.clients = [];
        const file = join(dir, 'realm.json');
        writeFileSync(file, JSON.stringify(realm));
        const r = await cli(ctx.config.databaseUrl, ['import', 'keycloak', '--org', '7', '--json', file]);
        const report = JSON.parse(r.out) as { disabled: number; users: { rejected: number } };
        assert.equal(report.disabled, 0);
        assert.equal(report.users.rejected, 1, 'the line is rejected: another realm');
        assert.equal((await findUserByEppn(ctx.store.db, 'bob@other.example.org'))!.disabled_at, null);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await ctx.close();
      }
    });
  });
}
