// RFC 7643/7644 as Entra ID speaks it, on both databases: a changed userName renames the user,
// an extension set or removed by its URN, memberRoles changes answered, core attributes the
// service does not keep accepted, a changed e-mail address no longer verified, and emails[].primary
// returned as sent (true for users the directory never said it of).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dialects } from '../helpers.ts';
import { EDU_GROUP, ENTERPRISE, GROUP, PATCH_OP, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { findUserBySub } from '../../src/store/directory.ts';
import { addUser, setUserAttributes } from '../../src/directory/index.ts';
import { importUsers } from '../../src/directory/user-import.ts';

const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });

for (const dialect of dialects()) {
  describe(`SCIM conformance with Entra ID's requests (${dialect})`, () => {
    let k: ScimKit;
    before(async () => {
      k = await scimKit(dialect);
    });
    after(() => k.close());

    const create = async (local: string, extra = {}) => {
      const r = await k.call('POST', '/Users', newUser(local, extra));
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body;
    };

    it('replacing userName renames the user: the eppn follows, sub and everything else stay', async () => {
      const before = await create('rena', { title: 'Lecturer' });
      const r = await k.call(
        'PATCH',
        `/Users/${before.id}`,
        patch({ op: 'Replace', path: 'userName', value: 'Rena.New@example.org' }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body.id, before.id);
      assert.equal(r.body.userName, 'rena.new@example.org');
      assert.equal(r.body.title, 'Lecturer');
      assert.equal(r.body.externalId, before.externalId);
      assert.deepEqual(r.body.emails, before.emails);
      const stored = await findUserBySub(k.ctx.store.db, before.id);
      assert.equal(stored?.eppn, 'rena.new@example.org');
      const found = await k.call('GET', `/Users?filter=${encodeURIComponent('userName eq "rena.new@example.org"')}`);
      assert.equal(found.body.totalResults, 1);
      const put = await k.call('PUT', `/Users/${before.id}`, newUser('rena2', { externalId: before.externalId }));
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(put.body.userName, 'rena2@example.org');
      assert.equal(put.body.id, before.id);
    });

    it("a userName that is another user's is 409 uniqueness; another realm 403", async () => {
      const a = await create('taken');
      const b = await create('taker');
      const r = await k.call('PATCH', `/Users/${b.id}`, patch({ op: 'replace', path: 'userName', value: a.userName }));
      assert.equal(r.status, 409);
      assert.equal(r.body.scimType, 'uniqueness');
      const other = await k.call(
        'PATCH',
        `/Users/${b.id}`,
        patch({ op: 'replace', path: 'userName', value: 'taker@other.org' }),
      );
      assert.equal(other.status, 403);
      assert.equal((await k.call('GET', `/Users/${b.id}`)).body.userName, 'taker@example.org');
    });

    it('add and replace with an extension URN as the path and an object value; remove of the whole extension', async () => {
      const u = await create('exty');
      let r = await k.call(
        'PATCH',
        `/Users/${u.id}`,
        patch({ op: 'add', path: ENTERPRISE, value: { employeeNumber: 'E-7', department: 'Physics' } }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body[ENTERPRISE], { employeeNumber: 'E-7', department: 'Physics' });
      r = await k.call(
        'PATCH',
        `/Users/${u.id}`,
        patch({ op: 'replace', path: ENTERPRISE, value: { employeeNumber: 'E-8' } }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.equal(r.body[ENTERPRISE].employeeNumber, 'E-8');
      r = await k.call('PATCH', `/Users/${u.id}`, patch({ op: 'remove', path: ENTERPRISE }));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      // department is the user's organizational unit, which the education extension also carries
      assert.equal(r.body[ENTERPRISE]?.employeeNumber, undefined);
    });

    it('core attributes the service does not keep are accepted and ignored, never a 400', async () => {
      const u = await create('nick', {
        nickName: 'Nicky',
        preferredLanguage: 'nb-NO',
        phoneNumbers: [{ value: '+47 22 00 00 00', type: 'work' }],
        addresses: [{ type: 'work', streetAddress: 'Street 1', locality: 'Oslo' }],
        name: { givenName: 'Nick', familyName: 'Tester', middleName: 'M' },
      });
      for (const op of [
        { op: 'replace', path: 'nickName', value: 'N' },
        { op: 'add', path: 'userType', value: 'Employee' },
        { op: 'replace', path: 'name.middleName', value: 'Q' },
        { op: 'replace', path: 'phoneNumbers[type eq "work"].value', value: '+47 1' },
        { op: 'replace', path: 'addresses[type eq "work"].streetAddress', value: 'Street 2' },
        { op: 'replace', path: `${ENTERPRISE}:manager`, value: { value: 'someone' } },
        { op: 'remove', path: 'locale' },
        { op: 'replace', value: { nickName: 'X', title: 'Dr' } },
      ]) {
        const r = await k.call('PATCH', `/Users/${u.id}`, patch(op));
        assert.equal(r.status, 200, `${JSON.stringify(op)}: ${JSON.stringify(r.body)}`);
      }
      const now = await k.call('GET', `/Users/${u.id}`);
      assert.equal(now.body.title, 'Dr');
      assert.equal(now.body.nickName, undefined);
      assert.equal(
        (await k.call('PATCH', `/Users/${u.id}`, patch({ op: 'replace', path: 'shoeSize', value: 1 }))).status,
        400,
      );
    });

    it('memberRoles changes by PATCH are answered and kept; removing the extension resets them', async () => {
      const [a, b] = [await create('rolea'), await create('roleb')];
      const g = await k.call('POST', '/Groups', {
        schemas: [GROUP, EDU_GROUP],
        displayName: 'Roles',
        members: [{ value: a.id }, { value: b.id }],
        [EDU_GROUP]: { type: 'class' },
      });
      const id = g.body.id;
      let r = await k.call(
        'PATCH',
        `/Groups/${id}`,
        patch({ op: 'add', path: `${EDU_GROUP}:memberRoles`, value: [{ value: a.id, role: 'teacher' }] }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body[EDU_GROUP].memberRoles, [{ value: a.id, role: 'teacher' }]);
      r = await k.call(
        'PATCH',
        `/Groups/${id}`,
        patch({ op: 'replace', path: EDU_GROUP, value: { memberRoles: [{ value: b.id, role: 'student' }] } }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body[EDU_GROUP].memberRoles, [{ value: b.id, role: 'student' }]);
      assert.equal(r.body[EDU_GROUP].type, 'class');
      r = await k.call(
        'PATCH',
        `/Groups/${id}`,
        patch({ op: 'replace', path: `${EDU_GROUP}:memberRoles[value eq "${a.id}"].role`, value: 'assistant' }),
      );
      assert.deepEqual(r.body[EDU_GROUP].memberRoles.map((m: any) => m.role).sort(), ['assistant', 'student']);
      assert.deepEqual((await k.call('GET', `/Groups/${id}`)).body[EDU_GROUP], r.body[EDU_GROUP]);
      r = await k.call('PATCH', `/Groups/${id}`, patch({ op: 'remove', path: EDU_GROUP }));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body[EDU_GROUP], { type: 'other' });
      assert.equal(r.body.members.length, 2);
    });

    it('a changed e-mail address is no longer verified; an unchanged one stays verified', async () => {
      const u = await create('mailer');
      await setUserAttributes(k.ctx.store, 'mailer@example.org', { emailVerified: true });
      let r = await k.call('PATCH', `/Users/${u.id}`, patch({ op: 'replace', path: 'title', value: 'Keeps' }));
      assert.equal(r.status, 200);
      assert.equal((await findUserBySub(k.ctx.store.db, u.id))?.email_verified, 1);
      r = await k.call(
        'PATCH',
        `/Users/${u.id}`,
        patch({ op: 'replace', path: 'emails[type eq "work"].value', value: 'attacker@example.net' }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const after = await findUserBySub(k.ctx.store.db, u.id);
      assert.equal(after?.email, 'attacker@example.net');
      assert.equal(after?.email_verified, 0);
    });

    it('emails[].primary is returned as sent: false stays false, through POST, PUT and PATCH', async () => {
      const mail = (value: string, primary: unknown) => [{ value, type: 'work', primary }];
      const u = await create('prim', { emails: mail('prim@example.org', false) });
      assert.deepEqual(u.emails, mail('prim@example.org', false));
      assert.deepEqual((await k.call('GET', `/Users/${u.id}`)).body.emails, mail('prim@example.org', false));
      let r = await k.call('PUT', `/Users/${u.id}`, newUser('prim', { emails: mail('prim@example.org', true) }));
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.emails, mail('prim@example.org', true));
      // Entra ID's form: the sub-attribute by a value filter, booleans as strings
      r = await k.call(
        'PATCH',
        `/Users/${u.id}`,
        patch({ op: 'Replace', path: 'emails[type eq "work"].primary', value: 'False' }),
      );
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.emails, mail('prim@example.org', false));
      // a changed address keeps what the same request says of it
      r = await k.call(
        'PATCH',
        `/Users/${u.id}`,
        patch({ op: 'replace', path: 'emails[type eq "work"].value', value: 'prim2@example.org' }),
      );
      assert.deepEqual(r.body.emails, mail('prim2@example.org', false));
      // of several, the one called primary is kept; none called primary: the first, as said of it
      r = await k.call(
        'PUT',
        `/Users/${u.id}`,
        newUser('prim', {
          emails: [
            { value: 'a@example.org', type: 'home', primary: false },
            { value: 'b@example.org', type: 'work', primary: true },
          ],
        }),
      );
      assert.deepEqual(r.body.emails, mail('b@example.org', true));
      r = await k.call(
        'PUT',
        `/Users/${u.id}`,
        newUser('prim', { emails: [{ value: 'c@example.org', primary: false }, { value: 'd@example.org' }] }),
      );
      assert.deepEqual(r.body.emails, mail('c@example.org', false));
      r = await k.call('PATCH', `/Users/${u.id}`, patch({ op: 'remove', path: 'emails' }));
      assert.equal(r.body.emails, undefined);
      assert.equal((await findUserBySub(k.ctx.store.db, u.id))?.email_primary, null);
    });

    it('users the directory never said it of are primary; an address changed elsewhere is primary again', async () => {
      const cli = await addUser(k.ctx.store, { orgId: 1, eppn: 'clia@example.org', name: 'Cli A', email: 'cli@x.org' });
      const read = async () => (await k.call('GET', `/Users/${cli.sub}`)).body.emails;
      assert.deepEqual(await read(), [{ value: 'cli@x.org', type: 'work', primary: true }]);
      const setFalse = () =>
        k.call(
          'PATCH',
          `/Users/${cli.sub}`,
          patch({ op: 'replace', path: 'emails[type eq "work"].primary', value: false }),
        );
      assert.equal((await setFalse()).status, 200);
      assert.deepEqual(await read(), [{ value: 'cli@x.org', type: 'work', primary: false }]);
      // the CLI and the console change the address without saying: what was said of the old one goes
      await setUserAttributes(k.ctx.store, 'clia@example.org', { email: 'cli2@x.org' });
      assert.deepEqual(await read(), [{ value: 'cli2@x.org', type: 'work', primary: true }]);
      // an unchanged address keeps it (the CLI changed the name only)
      await setFalse();
      await setUserAttributes(k.ctx.store, 'clia@example.org', { name: 'Cli B' });
      assert.deepEqual(await read(), [{ value: 'cli2@x.org', type: 'work', primary: false }]);
      // so does the import
      const path = join(mkdtempSync(join(tmpdir(), 'idp-scim-')), 'users.jsonl');
      writeFileSync(path, JSON.stringify({ eppn: 'clia@example.org', name: 'Cli B', email: 'cli3@x.org' }) + '\n');
      const summary = await importUsers(k.ctx.store, { orgId: 1, file: path });
      assert.equal(summary.updated, 1, JSON.stringify(summary));
      assert.deepEqual(await read(), [{ value: 'cli3@x.org', type: 'work', primary: true }]);
    });
  });
}
