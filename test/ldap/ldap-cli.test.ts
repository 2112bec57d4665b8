// The `ldap` commands: every option checked before anything is stored (URL schemes, DNs, filters,
// mappings, durations, the CA file), the bind password read from standard input, sealed and never
// printed, `ldap test` against a real OpenLDAP (plain, StartTLS and ldaps:// with a test CA, and a
// certificate it does not trust), list, show and remove (the users stay), all audited.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, migratedDatabase, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

/** A test CA and a certificate for 127.0.0.1 and localhost signed by it, made with openssl. */
function testCa(dir: string) {
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run(
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2'],
    ...['-subj', '/CN=Test LDAP CA', '-keyout', 'ca.key', '-out', 'ca.pem'],
  );
  run(
    ...['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=localhost'],
    ...['-keyout', 'server.key', '-out', 'server.csr'],
  );
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  run(
    ...['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial'],
    ...['-days', '2', '-extfile', 'ext.cnf', '-out', 'server.pem'],
  );
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key') };
}

for (const dialect of dialects()) {
  describe(`the ldap commands (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    let slapd: Slapd;
    let certs: ReturnType<typeof testCa>;
    let tmp: string;

    before(async () => {
      tmp = mkdtempSync(join(tmpdir(), 'idp-ldap-ca-'));
      certs = testCa(tmp);
      slapd = await startSlapd({ users: testUsers(12), tls: { cert: certs.cert, key: certs.key } });
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
    });
    after(async () => {
      await store?.close();
      await db?.drop();
      await slapd?.stop();
      rmSync(tmp, { recursive: true, force: true });
    });

    const add = (args: string[], password = `${SERVICE_PASSWORD}\n`) =>
      cli(
        db.url,
        [
          ...['ldap', 'add', '--org', '1', '--bind-dn', SERVICE_DN, '--bind-password-stdin', '--base-dn', PEOPLE],
          ...args,
          '--json',
        ],
        password,
      );

    it('refuses bad options with a clear message and stores nothing', async () => {
      const cases: [string[], RegExp, string?][] = [
        [['--url', 'http://127.0.0.1:389'], /ldaps:\/\/ or ldap:\/\//],
        [['--url', 'ldap://dc1.example.org'], /in the clear/],
        [['--url', 'ldaps://dc1.example.org', '--starttls'], /--starttls is for ldap:\/\//],
        [['--url', 'ldaps://dc1.example.org/dc=example'], /scheme, host and port only/],
        [['--url', 'ldaps://user:pw@dc1.example.org'], /scheme, host and port only/],
        [['--url', 'not a url'], /must be an ldaps/],
        [['--url', slapd.url, '--filter', 'objectClass=person'], /--filter must be in parentheses/],
        [['--url', slapd.url, '--filter', '(&(objectClass=person)'], /--filter/],
        [['--url', slapd.url, '--map', 'shoe_size=x'], /--map 'shoe_size=x' must be <column>=/],
        [['--url', slapd.url, '--map', 'email=bad attr'], /not an LDAP attribute name/],
        [['--url', slapd.url, '--map', 'email=mail', '--map', 'email=mail2'], /given twice/],
        [['--url', slapd.url, '--sync-every', '10s'], /between 1m and 7d/],
        [['--url', slapd.url, '--sync-every', 'soon'], /--sync-every must be a duration/],
        [['--url', slapd.url, '--on-missing', 'explode'], /--on-missing must be one of disable, remove, keep/],
        [['--url', slapd.url, '--password-check', 'yes'], /--password-check must be on or off/],
        [['--url', slapd.url, '--ca-file', '/nonexistent.pem'], /cannot read --ca-file/],
        [['--url', slapd.url, '--ca-file', '/etc/hostname'], /no PEM certificate/],
        [['--url', slapd.url], /the bind password is empty|no password on standard input/, ''],
      ];
      for (const [args, message, password] of cases) {
        const r = await add(args, password);
        assert.equal(r.code, 1, `${args.join(' ')}: ${r.out}`);
        assert.match(r.err, message, args.join(' '));
        assert.doesNotMatch(r.err, /\n\s+at /, 'no stack trace');
      }
      const bad = await cli(
        db.url,
        [
          ...['ldap', 'add', '--org', '1', '--url', slapd.url, '--bind-dn', 'not a dn', '--bind-password-stdin'],
          ...['--base-dn', PEOPLE],
        ],
        'x\n',
      );
      assert.match(bad.err, /--bind-dn is not a distinguished name|--bind-dn must be/);
      const noOrg = await cli(
        db.url,
        [
          ...['ldap', 'add', '--org', '9', '--url', slapd.url, '--bind-dn', SERVICE_DN, '--bind-password-stdin'],
          ...['--base-dn', PEOPLE],
        ],
        'x\n',
      );
      assert.match(noOrg.err, /organization 9 does not exist/);
      const list = await cli(db.url, ['ldap', 'list', '--json']);
      assert.deepEqual(JSON.parse(list.out), []);
    });

    it('adds a directory: the password sealed, never shown; list, show and test', async () => {
      const r = await add(['--url', slapd.url, '--filter', '(objectClass=inetOrgPerson)', '--sync-every', '15m']);
      assert.equal(r.code, 0, r.err);
      const { id } = JSON.parse(r.out) as { id: number };
      const row = await store.db.selectFrom('ldap_directories').selectAll().where('id', '=', id).executeTakeFirst();
      assert.ok(row && !row.bind_password.includes(SERVICE_PASSWORD), 'sealed at rest');
      for (const args of [
        ['ldap', 'list'],
        ['ldap', 'list', '--json'],
        ['ldap', 'show', String(id)],
      ]) {
        const out = await cli(db.url, args);
        assert.equal(out.code, 0, out.err);
        assert.ok(!out.out.includes(SERVICE_PASSWORD) && !out.out.includes(row.bind_password));
      }
      const shown = JSON.parse((await cli(db.url, ['ldap', 'show', String(id), '--json'])).out) as Record<
        string,
        unknown
      >;
      assert.equal(shown.sync_every, '15m');
      assert.equal(shown.on_missing, 'disable');
      assert.equal(shown.password_check, false);
      const tested = await cli(db.url, ['ldap', 'test', String(id), '--json']);
      assert.equal(tested.code, 0, tested.err);
      const probe = JSON.parse(tested.out) as { transport: string; sample: { eppn: string }[] };
      assert.equal(probe.transport, 'plain');
      assert.equal(probe.sample.length, 5);
      assert.match(probe.sample[0]!.eppn, /^user\d{5}@example\.org$/);
      const audit = await listAuditEvents(store.db, { action: 'ldap.add', limit: 5 });
      assert.equal(audit.length, 1);
      assert.ok(!audit[0]!.details.includes(SERVICE_PASSWORD));
    });

    it('ldap test says what is wrong: a refused password, a certificate it does not trust', async () => {
      const wrong = await add(['--url', slapd.url], 'not-the-password\n');
      const id = (JSON.parse(wrong.out) as { id: number }).id;
      const r = await cli(db.url, ['ldap', 'test', String(id)]);
      assert.equal(r.code, 1);
      assert.match(r.err, /refused the credentials/);
      assert.ok(!r.err.includes('not-the-password'));
      const untrusted = await add(['--url', slapd.tlsUrl!]);
      const t = await cli(db.url, ['ldap', 'test', String((JSON.parse(untrusted.out) as { id: number }).id)]);
      assert.equal(t.code, 1);
      assert.match(t.err, /certificate is not trusted/);
    });

    it('ldaps:// and StartTLS verified against the CA given', async () => {
      for (const args of [
        ['--url', slapd.tlsUrl!, '--ca-file', certs.ca],
        ['--url', slapd.url.replace('127.0.0.1', 'localhost'), '--starttls', '--ca-file', certs.ca],
      ]) {
        const r = await add(args);
        assert.equal(r.code, 0, r.err);
        const t = await cli(db.url, ['ldap', 'test', String((JSON.parse(r.out) as { id: number }).id), '--json']);
        assert.equal(t.code, 0, t.err);
        assert.equal(
          (JSON.parse(t.out) as { transport: string }).transport,
          args.includes('--starttls') ? 'starttls' : 'ldaps',
        );
      }
    });

    it('remove disconnects the directory; its users stay', async () => {
      const r = await add(['--url', slapd.url, '--filter', '(objectClass=inetOrgPerson)']);
      const id = (JSON.parse(r.out) as { id: number }).id;
      const s = await cli(db.url, ['ldap', 'sync', String(id), '--json']);
      assert.equal(s.code, 0, s.err);
      assert.equal((JSON.parse(s.out) as { created: number }).created, 12);
      const removed = await cli(db.url, ['ldap', 'remove', String(id), '--json']);
      assert.equal(removed.code, 0, removed.err);
      assert.equal((JSON.parse(removed.out) as { users: number }).users, 12);
      assert.ok(await findUserByEppn(store.db, 'user00001@example.org'));
      assert.match((await cli(db.url, ['ldap', 'show', String(id)])).err, /does not exist/);
      assert.match((await cli(db.url, ['ldap', 'sync', 'x'])).err, /--id must be a positive integer/);
      assert.equal((await listAuditEvents(store.db, { action: 'ldap.remove', limit: 5 })).length, 1);
    });
  });
}
