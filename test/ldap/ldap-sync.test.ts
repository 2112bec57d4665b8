// Syncing an organization's users from a real OpenLDAP (Debian slapd, started by the test): the
// first run creates them, an incremental run with nothing changed leaves them, modifications,
// renames (same entry id, same user), Active Directory's disabled flag, deleted entries (disable or
// remove), a dry run that writes nothing, and a directory killed in the middle of a run.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { cli, dialects, migratedDatabase, TEST_SECRET, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { keyring } from '../../src/crypto.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { findUserByEppn, findUserById } from '../../src/store/directory.ts';
import { claimLdapLease, countLdapEntries, listLdapEntries, releaseLdapLease } from '../../src/store/ldap.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { setDirectoryColumns } from '../../src/directory/provisioning.ts';
import { formatGuid } from '../../src/directory/ldap-client.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, userLdif, type Slapd } from './slapd.ts';

const USERS = 300;
/** Entries the directory has when it is killed in the middle of a run. */
const TOTAL = 3000;
const keys = keyring(TEST_SECRET);

interface Kit {
  db: TestDatabase;
  store: Store;
  slapd: Slapd;
  close(): Promise<void>;
}

async function kit(
  dialect: 'sqlite' | 'postgres',
  ad: boolean,
  count = USERS,
): Promise<Kit & { users: ReturnType<typeof testUsers> }> {
  const users = testUsers(count, ad);
  const slapd = await startSlapd({ users });
  const db = await migratedDatabase(dialect);
  const store = await openStore(db.url);
  await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
  return {
    db,
    store,
    slapd,
    users,
    async close() {
      await store.close();
      await db.drop();
      await slapd.stop();
    },
  };
}

async function addDirectory(k: Kit, extra: string[] = []): Promise<number> {
  const r = await cli(
    k.db.url,
    [
      ...['ldap', 'add', '--org', '1', '--url', k.slapd.url, '--bind-dn', SERVICE_DN, '--bind-password-stdin'],
      ...['--base-dn', PEOPLE, '--filter', '(objectClass=inetOrgPerson)', '--map', 'affiliation=employeeType'],
      ...extra,
      '--json',
    ],
    `${SERVICE_PASSWORD}\n`,
  );
  assert.equal(r.code, 0, r.err);
  return (JSON.parse(r.out) as { id: number }).id;
}

async function sync(k: Kit, id: number, ...args: string[]) {
  const r = await cli(k.db.url, ['ldap', 'sync', String(id), ...args, '--json']);
  // exit 1 when entries were rejected, as for an import with rejected lines
  assert.equal(r.code, r.out.includes('"rejected": 0') ? 0 : 1, r.err);
  return JSON.parse(r.out) as Record<string, number | string | boolean>;
}

for (const dialect of dialects()) {
  describe(`LDAP sync from OpenLDAP (${dialect})`, () => {
    let k: Kit & { users: ReturnType<typeof testUsers> };
    let id: number;
    before(async () => {
      k = await kit(dialect, false);
      id = await addDirectory(k, ['--on-missing', 'disable']);
    });
    after(() => k.close());

    it('a dry run reads everything and writes nothing', async () => {
      const s = await sync(k, id, '--dry-run');
      assert.equal(s.created, USERS);
      assert.equal(s.dry_run, true);
      assert.equal(await findUserByEppn(k.store.db, 'user00001@example.org'), undefined);
      assert.equal((await listLdapEntries(k.store.db, id)).length, 0);
    });

    it('the first run creates every user, with the mapped attributes and the entryUUID as external id', async () => {
      const s = await sync(k, id);
      assert.equal(s.mode, 'full');
      assert.deepEqual([s.created, s.updated, s.disabled, s.removed, s.unchanged, s.rejected], [USERS, 0, 0, 0, 0, 0]);
      const u = await findUserByEppn(k.store.db, 'user00001@example.org');
      assert.equal(u?.name, 'Given00001 Family00001');
      assert.equal(u?.given_name, 'Given00001');
      assert.equal(u?.email, 'user00001@example.org');
      assert.equal(u?.affiliation, 'staff');
      assert.match(u?.external_id ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      const audit = await listAuditEvents(k.store.db, { action: 'user.add', limit: 1000 });
      assert.equal(audit.length, USERS, 'each user is added as every surface adds one, with its audit record');
      assert.equal(audit[0]!.actor_type, 'provisioning');
    });

    it('an incremental run with nothing changed changes nothing', async () => {
      const started = Date.now();
      const s = await sync(k, id);
      assert.equal(s.mode, 'incremental');
      assert.deepEqual([s.created, s.updated, s.disabled, s.removed, s.rejected], [0, 0, 0, 0, 0]);
      assert.equal(s.unchanged, s.entries);
      assert.ok(Date.now() - started < 5000);
    });

    it('a user changed here is put back as the directory says by the next run that reads the entry (a full one)', async () => {
      // the entry is unchanged, but its user is not as the sync left it: the stored digest no longer matches
      const user = await findUserByEppn(k.store.db, 'user00005@example.org');
      await setDirectoryColumns(k.store, user!, { email: 'elsewhere@example.org' });
      const s = await sync(k, id, '--full');
      assert.equal(s.updated, 1);
      assert.equal((await findUserByEppn(k.store.db, 'user00005@example.org'))?.email, 'user00005@example.org');
    });

    it('a modification reaches the user; a rename keeps the same user', async () => {
      const before = await findUserByEppn(k.store.db, 'user00002@example.org');
      k.slapd.modify(`dn: uid=user00003,${PEOPLE}\nchangetype: modify\nreplace: mail\nmail: new3@example.org\n`);
      k.slapd.rename(`uid=user00002,${PEOPLE}`, 'uid=renamed00002');
      const s = await sync(k, id);
      assert.equal(s.mode, 'incremental');
      assert.equal(s.updated, 2);
      assert.equal(s.renamed, 1);
      assert.equal(s.created, 0);
      assert.equal((await findUserByEppn(k.store.db, 'user00003@example.org'))?.email, 'new3@example.org');
      const renamed = await findUserByEppn(k.store.db, 'renamed00002@example.org');
      assert.equal(renamed?.sub, before?.sub, 'the same user, renamed');
      assert.equal(await findUserByEppn(k.store.db, 'user00002@example.org'), undefined);
    });

    it('a deleted entry disables its user on the next full run', async () => {
      k.slapd.remove(`uid=user00004,${PEOPLE}`);
      const incremental = await sync(k, id);
      assert.equal(incremental.disabled, 0, 'an incremental run cannot see deletions');
      const s = await sync(k, id, '--full');
      assert.equal(s.mode, 'full');
      assert.equal(s.disabled, 1);
      assert.equal(s.unchanged, USERS - 1);
      assert.notEqual((await findUserByEppn(k.store.db, 'user00004@example.org'))?.disabled_at, null);
      const audit = await listAuditEvents(k.store.db, { action: 'user.disable', limit: 10 });
      assert.equal(audit.length, 1);
    });

    it('a new entry with the eppn of a user another entry provided is rejected, not merged', async () => {
      k.slapd.add(userLdif({ ...k.users[3]!, uid: 'user00004' }));
      // a new entry (a new entryUUID) with the old eppn: adopted, as a user with no other directory entry
      const s = await sync(k, id, '--full');
      assert.equal(s.rejected, 1, JSON.stringify(s));
    });

    it('the directory killed mid-run: a clean failure, recorded; the next run completes', async () => {
      const more = testUsers(TOTAL).slice(USERS);
      k.slapd.add(more.map(userLdif).join(''));
      let done = false;
      const running = cli(k.db.url, ['ldap', 'sync', String(id), '--json']).finally(() => (done = true));
      // killed once the run has written its first batch (a fixed delay may outlast the whole run)
      while (!done && (await countLdapEntries(k.store.db, id)) <= USERS) await new Promise((r) => setTimeout(r, 5));
      k.slapd.kill();
      const r = await running;
      assert.equal(r.code, 1);
      assert.match(r.err, /stopped after \d+ entries/);
      assert.doesNotMatch(r.err, /secret|at .*\.ts/);
      const failed = await cli(k.db.url, ['ldap', 'show', String(id), '--json']);
      assert.equal((JSON.parse(failed.out) as { last_sync_status: string }).last_sync_status, 'failed');
      const audit = await listAuditEvents(k.store.db, { action: 'ldap.sync', limit: 1 });
      assert.equal((JSON.parse(audit[0]!.details) as { failed?: boolean }).failed, true);
      await k.slapd.start();
      const s = await sync(k, id);
      assert.equal(s.rejected, 1); // the re-added user00004 of the case before
      const total = (await listLdapEntries(k.store.db, id)).length;
      assert.equal(total, TOTAL, 'every entry has its user (the first user00004 keeps its link)');
    });
  });

  describe(`LDAP sync from an Active Directory-like directory (${dialect})`, () => {
    let k: Kit & { users: ReturnType<typeof testUsers> };
    let id: number;
    before(async () => {
      k = await kit(dialect, true, 50);
      k.users[5]!.disabled = true;
      k.slapd.modify(
        `dn: uid=${k.users[5]!.uid},${PEOPLE}\nchangetype: modify\nreplace: userAccountControl\nuserAccountControl: 514\n`,
      );
      id = await addDirectory(k, ['--map', 'eppn=userPrincipalName', '--on-missing', 'remove']);
    });
    after(() => k.close());

    it('objectGUID is the external id, as a GUID string; userAccountControl disables', async () => {
      const s = await sync(k, id);
      assert.equal(s.created, 50);
      const u = await findUserByEppn(k.store.db, 'user00001@example.org');
      assert.equal(u?.external_id, formatGuid(k.users[0]!.guid!));
      assert.notEqual((await findUserByEppn(k.store.db, 'user00006@example.org'))?.disabled_at, null);
      assert.equal((await findUserByEppn(k.store.db, 'user00007@example.org'))?.disabled_at, null);
    });

    it('enabling the account in the directory enables the user; a new UPN renames them', async () => {
      const before = await findUserByEppn(k.store.db, 'user00001@example.org');
      k.slapd.modify(
        `dn: uid=user00006,${PEOPLE}\nchangetype: modify\nreplace: userAccountControl\nuserAccountControl: 512\n`,
      );
      k.slapd.modify(
        `dn: uid=user00001,${PEOPLE}\nchangetype: modify\nreplace: userPrincipalName\nuserPrincipalName: first.one@example.org\n`,
      );
      const s = await sync(k, id);
      assert.equal(s.enabled, 1);
      assert.equal(s.renamed, 1);
      assert.equal((await findUserByEppn(k.store.db, 'user00006@example.org'))?.disabled_at, null);
      assert.equal((await findUserByEppn(k.store.db, 'first.one@example.org'))?.sub, before?.sub);
    });

    it('a deleted entry removes its user (--on-missing remove)', async () => {
      const gone = await findUserByEppn(k.store.db, 'user00010@example.org');
      k.slapd.remove(`uid=user00010,${PEOPLE}`);
      const s = await sync(k, id, '--full');
      assert.equal(s.removed, 1);
      assert.equal(await findUserById(k.store.db, Number(gone!.id)), undefined);
      const audit = await listAuditEvents(k.store.db, { action: 'user.remove', limit: 10 });
      assert.equal(audit.length, 1);
    });

    it("an operator's account is not changed by the directory: refused, recorded, reported", async () => {
      const granted = await cli(k.db.url, ['role', 'grant', 'user00020@example.org', 'operator']);
      assert.equal(granted.code, 0, granted.err);
      k.slapd.modify(
        `dn: uid=user00020,${PEOPLE}\nchangetype: modify\nreplace: userPrincipalName\nuserPrincipalName: boss@example.org\n`,
      );
      const dry = await sync(k, id, '--dry-run');
      assert.equal(dry.rejected, 1);
      assert.equal((await listAuditEvents(k.store.db, { action: 'access.refused', limit: 5 })).length, 0);
      const s = await sync(k, id);
      assert.equal(s.rejected, 1);
      assert.ok(await findUserByEppn(k.store.db, 'user00020@example.org'), 'not renamed');
      const refused = await listAuditEvents(k.store.db, { action: 'access.refused', limit: 5 });
      assert.equal(refused.length, 1);
    });

    it('a run already holding the directory keeps a second one out', async () => {
      // another instance's run holds the lease (taken here, so the outcome does not hang on timing)
      assert.ok(await claimLdapLease(k.store.db, id, 'another-instance', Date.now(), Date.now() + 60_000));
      const second = await syncLdapDirectory(k.store, keys, id, { full: true }).then(
        () => 'ran',
        (err: Error) => err.message,
      );
      assert.match(second, /already running/);
      await releaseLdapLease(k.store.db, id, 'another-instance');
      await syncLdapDirectory(k.store, keys, id, { full: true });
    });
  });
}
