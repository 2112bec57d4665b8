// Group sync from a real OpenLDAP (Debian slapd, started by the test): groupOfNames,
// groupOfUniqueNames and posixGroup entries (and Active Directory's group with a binary objectGUID)
// become the organization's groups with the members the directory names, through the SCIM group
// functions and their audit records; a renamed group stays the same group, a changed membership is
// written, a deleted group is removed (or kept with --on-missing keep), and a dry run writes nothing.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cli, dialects, migratedDatabase, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { listLdapGroups } from '../../src/store/ldap.ts';
import { listMembers } from '../../src/store/provisioning.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { formatGuid } from '../../src/directory/ldap-client.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, SUFFIX, startSlapd, testUsers, type Slapd } from './slapd.ts';

const GROUPS = `ou=groups,${SUFFIX}`;
const USERS = 30;

interface Kit {
  db: TestDatabase;
  store: Store;
  slapd: Slapd;
  close(): Promise<void>;
}

async function kit(dialect: 'sqlite' | 'postgres', ad: boolean, count = USERS): Promise<Kit> {
  const slapd = await startSlapd({ users: testUsers(count, ad) });
  const db = await migratedDatabase(dialect);
  const store = await openStore(db.url);
  await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
  return {
    db,
    store,
    slapd,
    async close() {
      await store.close();
      await db.drop();
      await slapd.stop();
    },
  };
}

async function addDirectory(k: Kit, extra: string[]): Promise<number> {
  const r = await cli(
    k.db.url,
    [
      ...['ldap', 'add', '--org', '1', '--url', k.slapd.url, '--bind-dn', SERVICE_DN, '--bind-password-stdin'],
      ...['--base-dn', PEOPLE, '--filter', '(objectClass=inetOrgPerson)', '--groups-base-dn', GROUPS],
      ...extra,
      '--json',
    ],
    `${SERVICE_PASSWORD}\n`,
  );
  assert.equal(r.code, 0, r.err);
  return (JSON.parse(r.out) as { id: number }).id;
}

interface Summary {
  rejected: number;
  rejections: { dn: string; error: string }[];
  groups: Record<'entries' | 'created' | 'updated' | 'removed' | 'unchanged' | 'kept' | 'unresolved', number>;
}

async function sync(k: Kit, id: number, ...args: string[]): Promise<Summary> {
  const r = await cli(k.db.url, ['ldap', 'sync', String(id), ...args, '--json']);
  assert.equal(r.code, 0, r.err + r.out);
  return JSON.parse(r.out) as Summary;
}

/** The directory's groups by name, each with its members' eppns (sorted). */
async function groupsOf(k: Kit, id: number) {
  const groups = await listLdapGroups(k.store.db, id);
  const members = await listMembers(
    k.store.db,
    groups.map((g) => g.id),
  );
  return new Map(
    groups.map((g) => [
      g.display_name,
      {
        uid: g.uid,
        externalId: g.external_id,
        members: members
          .filter((m) => m.group_id === g.id)
          .map((m) => m.eppn)
          .sort(),
      },
    ]),
  );
}

const uidDn = (n: number) => `uid=user${String(n).padStart(5, '0')},${PEOPLE}`;
const eppn = (n: number) => `user${String(n).padStart(5, '0')}@example.org`;

for (const dialect of dialects()) {
  describe(`LDAP group sync from OpenLDAP (${dialect})`, () => {
    let k: Kit;
    let id: number;
    before(async () => {
      k = await kit(dialect, false);
      // besides the fixture's groupOfNames (staff: every third user; student: the others)
      k.slapd.add(
        `dn: cn=project,${GROUPS}\nobjectClass: groupOfUniqueNames\ncn: project\n` +
          `uniqueMember: ${uidDn(1)}\nuniqueMember: ${uidDn(2)}\nuniqueMember: ${uidDn(3).toUpperCase().replace('OU=PEOPLE', 'ou=people')}\n` +
          `uniqueMember: cn=nobody,ou=elsewhere,${SUFFIX}\n\n` +
          `dn: cn=admins,${GROUPS}\nobjectClass: posixGroup\ncn: admins\ngidNumber: 1000\n` +
          'memberUid: user00004\nmemberUid: user00005\nmemberUid: nobody\n',
      );
      id = await addDirectory(k, ['--on-missing', 'disable']);
    });
    after(() => k.close());

    it('a dry run counts the groups and writes none', async () => {
      const s = await sync(k, id, '--dry-run');
      assert.equal(s.groups.entries, 4);
      assert.equal(s.groups.created, 4);
      assert.equal((await listLdapGroups(k.store.db, id)).length, 0);
      assert.equal((await listAuditEvents(k.store.db, { action: 'group.add', limit: 10 })).length, 0);
    });

    it('the first run creates every group with the members it names, by DN or by uid', async () => {
      const s = await sync(k, id);
      assert.deepEqual([s.groups.created, s.groups.updated, s.groups.removed, s.rejected], [4, 0, 0, 0]);
      assert.equal(s.groups.unresolved, 2, 'the DN outside the users and the unknown memberUid');
      const groups = await groupsOf(k, id);
      assert.deepEqual(groups.get('project')?.members, [eppn(1), eppn(2), eppn(3)]);
      assert.deepEqual(groups.get('admins')?.members, [eppn(4), eppn(5)]);
      assert.equal(groups.get('staff')?.members.length, USERS / 3);
      assert.equal(groups.get('student')?.members.length, (USERS * 2) / 3);
      assert.match(groups.get('staff')?.externalId ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-/, 'the entryUUID');
      const audit = await listAuditEvents(k.store.db, { action: 'group.add', limit: 10 });
      assert.equal(audit.length, 4, 'each group is added as SCIM adds one, with its audit record');
      assert.equal(audit[0]!.actor_type, 'provisioning');
    });

    it('a run with nothing changed writes nothing', async () => {
      const s = await sync(k, id);
      assert.deepEqual([s.groups.unchanged, s.groups.created, s.groups.updated], [4, 0, 0]);
      assert.equal((await listAuditEvents(k.store.db, { action: 'group.update', limit: 10 })).length, 0);
    });

    it('a renamed group stays the same group; a member taken out leaves it', async () => {
      const before = (await groupsOf(k, id)).get('project');
      k.slapd.rename(`cn=project,${GROUPS}`, 'cn=project-x');
      k.slapd.modify(
        `dn: cn=project-x,${GROUPS}\nchangetype: modify\ndelete: uniqueMember\nuniqueMember: ${uidDn(2)}\n`,
      );
      const s = await sync(k, id);
      assert.deepEqual([s.groups.updated, s.groups.created, s.groups.removed], [1, 0, 0]);
      const after = (await groupsOf(k, id)).get('project-x');
      assert.equal(after?.uid, before?.uid, 'the same group');
      assert.deepEqual(after?.members, [eppn(1), eppn(3)]);
      const audit = await listAuditEvents(k.store.db, { action: 'group.update', limit: 10 });
      assert.equal(audit.length, 1);
      assert.equal((JSON.parse(audit[0]!.details) as { members_removed: number }).members_removed, 1);
    });

    it('a new user named by a group joins it in the same run', async () => {
      k.slapd.add(
        `dn: uid=newcomer,${PEOPLE}\nobjectClass: inetOrgPerson\nuid: newcomer\ncn: New Comer\nsn: Comer\n\n`,
      );
      k.slapd.modify(`dn: cn=admins,${GROUPS}\nchangetype: modify\nadd: memberUid\nmemberUid: newcomer\n`);
      const s = await sync(k, id);
      assert.equal(s.groups.updated, 1);
      assert.deepEqual((await groupsOf(k, id)).get('admins')?.members, ['newcomer@example.org', eppn(4), eppn(5)]);
    });

    it('a deleted group is removed, through the function SCIM uses', async () => {
      k.slapd.remove(`cn=admins,${GROUPS}`);
      const s = await sync(k, id);
      assert.equal(s.groups.removed, 1);
      assert.equal((await groupsOf(k, id)).has('admins'), false);
      const audit = await listAuditEvents(k.store.db, { action: 'group.remove', limit: 10 });
      assert.equal(audit.length, 1);
    });
  });

  describe(`LDAP group sync from an Active Directory-like directory (${dialect})`, () => {
    let k: Kit;
    let id: number;
    const guid = randomBytes(16);
    before(async () => {
      k = await kit(dialect, true, 12);
      k.slapd.add(
        `dn: cn=Teachers,${GROUPS}\nobjectClass: group\ncn: Teachers\nobjectGUID:: ${guid.toString('base64')}\n` +
          `member: ${uidDn(1)}\nmember: ${uidDn(2)}\nmember: cn=staff,${GROUPS}\n`,
      );
      id = await addDirectory(k, ['--map', 'eppn=userPrincipalName', '--on-missing', 'keep']);
    });
    after(() => k.close());

    it('objectGUID is the group external id; members by DN; a nested group is not a member', async () => {
      const s = await sync(k, id);
      assert.equal(s.groups.created, 3);
      const teachers = (await groupsOf(k, id)).get('Teachers');
      assert.equal(teachers?.externalId, formatGuid(guid));
      assert.deepEqual(teachers?.members, [eppn(1), eppn(2)]);
      assert.equal(s.groups.unresolved, 1);
    });

    it('a renamed group keeps its group; a deleted one is kept with --on-missing keep', async () => {
      const before = (await groupsOf(k, id)).get('Teachers');
      k.slapd.rename(`cn=Teachers,${GROUPS}`, 'cn=Lecturers');
      k.slapd.remove(`cn=student,${GROUPS}`);
      const s = await sync(k, id);
      assert.deepEqual([s.groups.updated, s.groups.kept, s.groups.removed], [1, 1, 0]);
      const groups = await groupsOf(k, id);
      assert.equal(groups.get('Lecturers')?.uid, before?.uid);
      assert.ok(groups.has('student'), 'kept');
    });
  });
}
