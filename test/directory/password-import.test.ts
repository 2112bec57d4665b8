// Users imported with the password hashes their old system exported (passlib, python3-bcrypt),
// through the real `user import` command, then signing in over real HTTP: the right password signs
// in and the stored hash becomes argon2id (audited as a rehash); a wrong one is refused and leaves
// the hash alone; an unknown or malformed hash is a rejected line whose reason does not repeat it;
// running the import again does not put the old hash back.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cli,
  coseP256PublicKey,
  dialects,
  pickFreePort,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import {
  cookieJar,
  FlowError,
  newCredential,
  signIn,
  type RelyingParty,
  type Target,
} from '../../bench/signin-flow.ts';
import { createClient } from '../../src/clients/index.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { independentHashes, passlibMissing } from './imported-hashes.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';

const PASSWORD = 'imported pässword 1';
const REALM = 'hashes.example.org';
const REDIRECT_URI = 'https://rp.example.test/callback';
const tmp = mkdtempSync(join(tmpdir(), 'idp-hash-import-'));

for (const dialect of dialects()) {
  describe(`importing users with their password hashes (${dialect})`, { skip: passlibMissing }, () => {
    let ctx: TestContext;
    let target: Target;
    let rp: RelyingParty;
    const hashes = passlibMissing ? {} : independentHashes(PASSWORD);
    const eppnOf = (format: string) => `${format.replace(/_/g, '-')}@${REALM}`;
    const file = join(tmp, `users-${dialect}.jsonl`);
    const importFile = (path = file) => cli(ctx.config.databaseUrl, ['user', 'import', '--org', '1', '--json', path]);
    const stored = async (eppn: string) => (await findUserByEppn(ctx.store.db, eppn))?.password_hash;
    const user = async (eppn: string, password = PASSWORD) => ({
      eppn,
      password,
      sub: (await findUserByEppn(ctx.store.db, eppn))!.sub,
      credential: newCredential(),
      jar: cookieJar(),
    });
    const UNKNOWN = '$6$rounds=5000$saltsalt$' + 'x'.repeat(86);
    const TOO_COSTLY = '$2b$14$' + 'a'.repeat(53);

    before(async () => {
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url }, { listen: port });
      target = { url, publicUrl: url };
      await seedOrg(ctx, 1, REALM, 'Hashes');
      await seedUser(ctx, 1, `has-password@${REALM}`, { password: 'the password set here' });
      const { client, secret } = await createClient(ctx.store, ctx.keys, {
        name: 'Portal',
        redirectUris: [REDIRECT_URI],
        firstParty: true,
      });
      rp = { clientId: client.clientId, secret: secret!, redirectUri: REDIRECT_URI, scope: 'openid' };
      const lines = Object.entries(hashes).map(([format, hash]) =>
        JSON.stringify({ eppn: eppnOf(format), name: format, password_hash: hash }),
      );
      lines.push(JSON.stringify({ eppn: `unknown@${REALM}`, name: 'Unknown', password_hash: UNKNOWN }));
      lines.push(JSON.stringify({ eppn: `costly@${REALM}`, name: 'Costly', password_hash: TOO_COSTLY }));
      lines.push(JSON.stringify({ eppn: `has-password@${REALM}`, password_hash: hashes.bcrypt_2b }));
      writeFileSync(file, lines.join('\n'));
    });
    after(() => ctx?.close());

    it('creates a user per hash and rejects the unknown and the too costly ones, naming no hash', async () => {
      const run = await importFile();
      assert.equal(run.code, 1, 'a rejected line makes the exit status 1');
      const summary = JSON.parse(run.out) as {
        created: number;
        unchanged: number;
        passwords: number;
        rejections: { line: number; error: string }[];
      };
      const formats = Object.keys(hashes).length;
      assert.equal(summary.created, formats);
      assert.equal(summary.passwords, formats, 'the user who has a password keeps it');
      assert.equal(summary.unchanged, 1);
      assert.deepEqual(
        summary.rejections.map((r) => [r.line, r.error]),
        [
          [formats + 1, 'password_hash is in no accepted format (bcrypt, PBKDF2, argon2, scrypt, LDAP {SSHA})'],
          [formats + 2, 'password_hash bcrypt cost 14 is not within 4-12'],
        ],
      );
      for (const secret of [UNKNOWN, TOO_COSTLY, 'saltsalt', 'a'.repeat(53)]) {
        assert.ok(!run.out.includes(secret) && !run.err.includes(secret), 'no hash in the output');
      }
      assert.equal(await stored(`unknown@${REALM}`), undefined);
      assert.match((await stored(`has-password@${REALM}`))!, /^\$argon2id\$/);
      for (const [format, hash] of Object.entries(hashes)) assert.equal(await stored(eppnOf(format)), hash);
      const [audit] = await listAuditEvents(ctx.store.db, { action: 'user.import', after: 0 });
      assert.equal((JSON.parse(audit!.details) as { passwords: number }).passwords, formats);
    });

    it('every user signs in with the old password; the hash becomes argon2id; a wrong password is refused', async () => {
      for (const [format, hash] of Object.entries(hashes)) {
        const eppn = eppnOf(format);
        await assert.rejects(signIn(target, rp, await user(eppn, `${PASSWORD}!`), 'password'), (err) => {
          assert.ok(err instanceof FlowError);
          assert.match(err.message, /^password sign-in: 401/, format);
          return true;
        });
        assert.equal(await stored(eppn), hash, `${format}: a failed sign-in leaves the hash`);
        const u = await user(eppn);
        const { claims } = await signIn(target, rp, u, 'password');
        assert.equal(claims.sub, u.sub, format);
        const now = (await stored(eppn))!;
        // every imported hash, argon2id too, becomes the service's own
        assert.match(now, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/, format);
        // and the new hash is the same password's
        assert.equal((await signIn(target, rp, await user(eppn), 'password')).claims.sub, u.sub, format);
      }
      const rehashed = await listAuditEvents(ctx.store.db, { action: 'password.rehash', after: 0, limit: 100 });
      const expected = Object.keys(hashes);
      assert.deepEqual(rehashed.map((e) => e.eppn).sort(), expected.map(eppnOf).sort());
    });

    it('importing the file again leaves the argon2id hashes the sign-ins made', async () => {
      const before = await stored(eppnOf('bcrypt_2b'));
      const run = await importFile();
      const summary = JSON.parse(run.out) as { created: number; updated: number; passwords: number };
      assert.deepEqual([summary.created, summary.updated, summary.passwords], [0, 0, 0]);
      assert.equal(await stored(eppnOf('bcrypt_2b')), before);
    });

    it('a CSV takes the password_hash column; an existing user without a password or passkey gets it', async () => {
      await seedUser(ctx, 1, `no-password@${REALM}`);
      const csv = join(tmp, `users-${dialect}.csv`);
      writeFileSync(
        csv,
        [
          'eppn,name,password_hash',
          `no-password@${REALM},,${hashes.django_pbkdf2_sha256}`,
          `csv-user@${REALM},CSV User,"${hashes.ldap_salted_sha1}"`,
        ].join('\n'),
      );
      const run = await importFile(csv);
      assert.equal(run.code, 0, run.out);
      const summary = JSON.parse(run.out) as { created: number; updated: number; passwords: number };
      assert.deepEqual([summary.created, summary.updated, summary.passwords], [1, 1, 2]);
      for (const eppn of [`no-password@${REALM}`, `csv-user@${REALM}`]) {
        const u = await user(eppn);
        assert.equal((await signIn(target, rp, u, 'password')).claims.sub, u.sub);
      }
    });

    it('a user with a passkey and no password stays passkey-only: the hash of their line is not taken', async () => {
      const holder = await seedUser(ctx, 1, `passkey-only@${REALM}`);
      await insertPasskeys(ctx.store.db, [
        {
          ...{ user_id: holder.id, org_id: holder.org_id, credential_id: Buffer.from('passkey-only-key') },
          ...{ public_key: await coseP256PublicKey(), sign_count: 0, transports: '[]', label: 'Key' },
          ...{ aaguid: ZERO_AAGUID, backup_eligible: 1, backup_state: 1, mfa_verified: 1 },
          ...{ created_at: Date.now(), last_used_at: null },
        },
      ]);
      const path = join(tmp, `passkey-only-${dialect}.jsonl`);
      writeFileSync(path, JSON.stringify({ eppn: `passkey-only@${REALM}`, password_hash: hashes.bcrypt_2a }));
      const run = await importFile(path);
      const summary = JSON.parse(run.out) as { unchanged: number; passwords: number };
      assert.deepEqual([summary.unchanged, summary.passwords], [1, 0]);
      assert.equal(await stored(`passkey-only@${REALM}`), null);
      await assert.rejects(
        signIn(target, rp, await user(`passkey-only@${REALM}`), 'password'),
        /password sign-in: 401/,
      );
    });
  });
}
