// RFC 7643/7644 as Entra ID speaks it, on both databases: a changed userName renames the user,
// an extension set or removed by its URN, memberRoles changes answered, core attributes the
// service does not keep accepted, and a changed e-mail address no longer verified.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import { EDU_GROUP, ENTERPRISE, GROUP, PATCH_OP, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { findUserBySub } from '../../src/store/directory.ts';
import { setUserAttributes } from '../../src/directory/index.ts';

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
  });
}
