// SCIM 2.0 compliance, RFC 7643 / RFC 7644 section by section, against a listening server on both
// databases. Every User and Group the server returns is checked against SCIMMY's core schemas.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects } from '../helpers.ts';
import {
  EDU_GROUP,
  EDU_USER,
  ENTERPRISE,
  GROUP,
  LIST,
  PASSWORD_USER,
  PATCH_OP,
  USER,
  newUser,
  scimKit,
  type ScimKit,
} from './scim-kit.ts';

const q = (filter: string) => `/Users?filter=${encodeURIComponent(filter)}`;
const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });

for (const dialect of dialects()) {
  describe(`SCIM compliance (${dialect})`, () => {
    let k: ScimKit;
    const ids: Record<string, string> = {};
    before(async () => {
      k = await scimKit(dialect);
      for (const [local, extra] of [
        ['ada', { title: 'Lecturer' }],
        ['bea', { [ENTERPRISE]: { employeeNumber: 'E-2', department: 'Physics' } }],
        [
          'cara',
          { [EDU_USER]: { affiliation: ['student', 'member'], primaryAffiliation: 'student', studentNumber: 'S-3' } },
        ],
        ['dan', { emails: [] }],
      ] as const) {
        const r = await k.call('POST', '/Users', newUser(local, extra));
        assert.equal(r.status, 201, JSON.stringify(r.body));
        ids[local] = r.body.id;
      }
    });
    after(() => k.close());

    describe('RFC 7644 section 4: discovery', () => {
      it('ServiceProviderConfig says patch, filter and etag are supported, bulk and sort not', async () => {
        const r = await k.call('GET', '/ServiceProviderConfig');
        assert.equal(r.status, 200);
        assert.match(r.headers.get('content-type')!, /^application\/scim\+json/);
        assert.equal(r.body.patch.supported, true);
        assert.equal(r.body.filter.supported, true);
        assert.equal(r.body.etag.supported, true);
        assert.equal(r.body.bulk.supported, false);
        assert.equal(r.body.authenticationSchemes[0].type, 'oauthbearertoken');
      });
      it('ResourceTypes lists User with its three extensions and Group with its own', async () => {
        const r = await k.call('GET', '/ResourceTypes');
        assert.deepEqual(r.body.schemas, [LIST]);
        const user = r.body.Resources.find((t: any) => t.id === 'User');
        assert.deepEqual(
          user.schemaExtensions.map((e: any) => e.schema),
          [ENTERPRISE, EDU_USER, PASSWORD_USER],
        );
        assert.equal(user.endpoint, '/Users');
        assert.equal((await k.call('GET', '/ResourceTypes/Group')).body.schema, GROUP);
        assert.equal((await k.call('GET', '/ResourceTypes/Nope')).status, 404);
      });
      it('Schemas lists the core schemas and the extensions, each readable by its URN', async () => {
        const r = await k.call('GET', '/Schemas');
        assert.deepEqual(
          r.body.Resources.map((s: any) => s.id).sort(),
          [USER, GROUP, ENTERPRISE, EDU_USER, PASSWORD_USER, EDU_GROUP].sort(),
        );
        const edu = await k.call('GET', `/Schemas/${EDU_USER}`);
        assert.deepEqual(
          edu.body.attributes.map((a: any) => a.name),
          ['affiliation', 'primaryAffiliation', 'orgUnit', 'studentNumber', 'entitlement'],
        );
      });
    });

    describe('RFC 7644 3.3: creating resources', () => {
      it('answers 201 with Location, ETag and the resource; id is the sub, userName the eppn', async () => {
        const r = await k.call('POST', '/Users', newUser('erik', { userName: 'Erik@Example.org' }));
        assert.equal(r.status, 201);
        assert.equal(r.headers.get('location'), r.body.meta.location);
        assert.equal(r.headers.get('etag'), r.body.meta.version);
        assert.equal(r.body.userName, 'erik@example.org');
        assert.match(r.body.id, /^[0-9a-f-]{36}$/);
        ids.erik = r.body.id;
      });
      it('keeps the extensions: enterprise and education attributes come back', async () => {
        const bea = await k.call('GET', `/Users/${ids.bea}`);
        assert.deepEqual(bea.body[ENTERPRISE], { employeeNumber: 'E-2', department: 'Physics' });
        assert.equal(bea.body[EDU_USER].orgUnit, 'Physics');
        const cara = await k.call('GET', `/Users/${ids.cara}`);
        assert.deepEqual(cara.body[EDU_USER], {
          affiliation: ['student', 'member'],
          primaryAffiliation: 'student',
          studentNumber: 'S-3',
        });
        assert.ok(cara.body.schemas.includes(EDU_USER));
      });
    });

    describe('RFC 7644 3.4.2.2: filters', () => {
      const names = async (filter: string) => {
        const r = await k.call('GET', q(filter));
        assert.equal(r.status, 200, JSON.stringify(r.body));
        return r.body.Resources.map((u: any) => u.userName.split('@')[0]).sort();
      };
      it('eq (userName case-insensitively), ne', async () => {
        assert.deepEqual(await names('userName eq "ADA@example.org"'), ['ada']);
        assert.deepEqual(await names('externalId eq "ext-bea"'), ['bea']);
        assert.deepEqual(await names('externalId eq "EXT-BEA"'), []);
        assert.deepEqual(await names('userName ne "ada@example.org"'), ['bea', 'cara', 'dan', 'erik']);
      });
      it('co, sw, ew', async () => {
        assert.deepEqual(await names('userName co "ar"'), ['cara']);
        assert.deepEqual(await names('name.givenName sw "b"'), ['bea']);
        assert.deepEqual(await names('emails.value ew "a@example.org"'), ['ada', 'bea', 'cara']);
        assert.deepEqual(await names('userName co "%"'), [], 'LIKE wildcards are literal');
      });
      it('pr, and, or, not, parentheses, value paths, extensions', async () => {
        assert.deepEqual(await names('title pr'), ['ada']);
        assert.deepEqual(await names('emails pr and not (userName eq "ada@example.org")'), ['bea', 'cara', 'erik']);
        assert.deepEqual(await names('userName eq "ada@example.org" or (displayName eq "bea T." and active eq true)'), [
          'ada',
          'bea',
        ]);
        assert.deepEqual(await names('emails[type eq "work" and value co "cara"]'), ['cara']);
        assert.deepEqual(await names(`${ENTERPRISE}:employeeNumber eq "E-2"`), ['bea']);
        assert.deepEqual(await names('name.familyName eq "tester" and meta.lastModified gt "2000-01-01T00:00:00Z"'), [
          'ada',
          'bea',
          'cara',
          'dan',
          'erik',
        ]);
      });
      it('a malformed filter or an attribute that cannot be filtered on is 400 invalidFilter', async () => {
        for (const bad of [
          'userName eq',
          'userName xx "a"',
          '(userName eq "a"',
          'userName eq "a" and',
          'nosuch eq "a"',
          'userName eq "unterminated',
        ]) {
          const r = await k.call('GET', q(bad));
          assert.equal(r.status, 400, bad);
          assert.equal(r.body.scimType, 'invalidFilter', bad);
        }
      });
    });

    describe('RFC 7644 3.4.2.4: pagination', () => {
      it('startIndex is 1-based; count limits; totalResults counts every match', async () => {
        const r = await k.call('GET', '/Users?startIndex=2&count=2');
        assert.equal(r.body.totalResults, 5);
        assert.equal(r.body.startIndex, 2);
        assert.equal(r.body.itemsPerPage, 2);
        assert.deepEqual(
          r.body.Resources.map((u: any) => u.userName),
          ['bea@example.org', 'cara@example.org'],
        );
        const zero = await k.call('GET', '/Users?count=0');
        assert.equal(zero.body.totalResults, 5);
        assert.deepEqual(zero.body.Resources, []);
        const low = await k.call('GET', '/Users?startIndex=0&count=1');
        assert.equal(low.body.startIndex, 1);
      });
    });

    describe('RFC 7644 3.9: attributes and excludedAttributes', () => {
      it('attributes returns those asked for, id and schemas always', async () => {
        const r = await k.call(
          'GET',
          `/Users/${ids.bea}?attributes=userName,name.givenName,${ENTERPRISE}:employeeNumber`,
        );
        assert.deepEqual(Object.keys(r.body).sort(), [ENTERPRISE, 'id', 'meta', 'name', 'schemas', 'userName'].sort());
        assert.deepEqual(r.body.name, { givenName: 'Bea' });
        assert.deepEqual(r.body[ENTERPRISE], { employeeNumber: 'E-2' });
      });
      it('excludedAttributes leaves them out, never id', async () => {
        const r = await k.call(
          'GET',
          `/Users?filter=${encodeURIComponent('userName eq "ada@example.org"')}&excludedAttributes=emails,name,id`,
        );
        const ada = r.body.Resources[0];
        assert.equal(ada.emails, undefined);
        assert.equal(ada.name, undefined);
        assert.equal(ada.id, ids.ada);
      });
    });

    describe('RFC 7644 3.5.1: replacing with PUT', () => {
      it('replaces the attributes; what is left out is cleared', async () => {
        const r = await k.call('PUT', `/Users/${ids.ada}`, {
          schemas: [USER],
          userName: 'ada@example.org',
          name: { formatted: 'Ada Lovelace' },
          active: true,
        });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.title, undefined);
        assert.equal(r.body.emails, undefined);
        assert.equal(r.body.externalId, undefined);
        assert.deepEqual(r.body.name, { formatted: 'Ada Lovelace' });
      });
      it("a userName in another organization's realm is refused (403)", async () => {
        const r = await k.call('PUT', `/Users/${ids.ada}`, { schemas: [USER], userName: 'ada@other.org' });
        assert.equal(r.status, 403);
      });
    });

    describe('RFC 7644 3.5.2: PATCH', () => {
      it('add, replace and remove with paths; sub-attributes; extension paths', async () => {
        const r = await k.call(
          'PATCH',
          `/Users/${ids.dan}`,
          patch(
            { op: 'add', path: 'title', value: 'Teacher' },
            { op: 'replace', path: 'name.givenName', value: 'Daniel' },
            { op: 'add', path: `${EDU_USER}:affiliation`, value: ['faculty'] },
            { op: 'replace', path: `${ENTERPRISE}:department`, value: 'Maths' },
            { op: 'remove', path: 'displayName' },
          ),
        );
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.title, 'Teacher');
        assert.equal(r.body.name.givenName, 'Daniel');
        assert.equal(r.body.displayName, undefined);
        assert.deepEqual(r.body[EDU_USER].affiliation, ['faculty']);
        assert.equal(r.body[ENTERPRISE].department, 'Maths');
      });
      it('value paths: emails[type eq "work"].value replaced, then the value removed by filter', async () => {
        let r = await k.call(
          'PATCH',
          `/Users/${ids.dan}`,
          patch({ op: 'replace', path: 'emails[type eq "work"].value', value: 'dan@example.org' }),
        );
        assert.deepEqual(r.body.emails, [{ value: 'dan@example.org', type: 'work', primary: true }]);
        r = await k.call(
          'PATCH',
          `/Users/${ids.dan}`,
          patch({ op: 'remove', path: 'emails[value eq "dan@example.org"]' }),
        );
        assert.equal(r.body.emails, undefined);
      });
      it('Replace without a path with an object; "False" as a string; Add in any case', async () => {
        let r = await k.call(
          'PATCH',
          `/Users/${ids.erik}`,
          patch({ op: 'Replace', value: { active: 'False', displayName: 'E.', 'name.familyName': 'Olsen' } }),
        );
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.equal(r.body.active, false);
        assert.equal(r.body.name.familyName, 'Olsen');
        r = await k.call('PATCH', `/Users/${ids.erik}`, patch({ op: 'Add', value: { active: true, title: 'Dr' } }));
        assert.equal(r.body.active, true);
        assert.equal(r.body.title, 'Dr');
      });
      it('unknown paths are invalidPath; read-only ones mutability; remove without a path noTarget', async () => {
        const cases: [unknown, string][] = [
          [{ op: 'replace', path: 'nosuch', value: 'x' }, 'invalidPath'],
          [{ op: 'replace', path: 'name.middle', value: 'x' }, 'invalidPath'],
          [{ op: 'replace', path: 'urn:example:unknown:attr', value: 'x' }, 'invalidPath'],
          [{ op: 'replace', path: 'groups', value: [] }, 'mutability'],
          [{ op: 'remove' }, 'noTarget'],
          [{ op: 'replace', path: 'emails[type eq "home"', value: 'x' }, 'invalidPath'],
          [{ op: 'move', path: 'title', value: 'x' }, 'invalidSyntax'],
        ];
        for (const [op, scimType] of cases) {
          const r = await k.call('PATCH', `/Users/${ids.erik}`, patch(op));
          assert.equal(r.status, 400, JSON.stringify(op));
          assert.equal(r.body.scimType, scimType, JSON.stringify(op));
        }
        const noSchema = await k.call('PATCH', `/Users/${ids.erik}`, {
          Operations: [{ op: 'add', path: 'title', value: 'x' }],
        });
        assert.equal(noSchema.body.scimType, 'invalidSyntax');
      });
    });

    describe('RFC 7644 3.14: versions', () => {
      it('ETag changes with every change; If-Match with an old version is 412, with the current one applies', async () => {
        const before = await k.call('GET', `/Users/${ids.cara}`);
        const etag = before.headers.get('etag')!;
        assert.equal(etag, before.body.meta.version);
        const changed = await k.call(
          'PATCH',
          `/Users/${ids.cara}`,
          patch({ op: 'replace', path: 'title', value: 'TA' }),
          { 'if-match': etag },
        );
        assert.equal(changed.status, 200);
        assert.notEqual(changed.headers.get('etag'), etag);
        const stale = await k.call('PATCH', `/Users/${ids.cara}`, patch({ op: 'replace', path: 'title', value: 'X' }), {
          'if-match': etag,
        });
        assert.equal(stale.status, 412);
        const stalePut = await k.call('PUT', `/Users/${ids.cara}`, newUser('cara'), { 'if-match': etag });
        assert.equal(stalePut.status, 412);
        const staleDelete = await k.call('DELETE', `/Users/${ids.cara}`, undefined, { 'if-match': etag });
        assert.equal(staleDelete.status, 412);
        assert.equal((await k.call('GET', `/Users/${ids.cara}`)).body.title, 'TA');
      });
    });

    describe('RFC 7644 3.14: conditional reads', () => {
      it('GET with If-None-Match of the current version is 304 with the ETag and no body; after a change, 200', async () => {
        const group = await k.call('POST', '/Groups', { schemas: [GROUP], displayName: 'Conditional readers' });
        assert.equal(group.status, 201);
        for (const path of [`/Users/${ids.cara}`, `/Groups/${group.body.id}`]) {
          const first = await k.call('GET', path);
          const etag = first.headers.get('etag')!;
          const same = await k.call('GET', path, undefined, { 'if-none-match': etag });
          assert.equal(same.status, 304, path);
          assert.equal(same.headers.get('etag'), etag);
          assert.equal(same.body, undefined);
          const listed = await k.call('GET', path, undefined, { 'if-none-match': `W/"1", ${etag}` });
          assert.equal(listed.status, 304, 'one of several tags');
          assert.equal(
            (await k.call('GET', path, undefined, { 'if-none-match': 'W/"1"' })).status,
            200,
            'another version',
          );
          const changed = await k.call(
            'PATCH',
            path,
            patch({ op: 'replace', path: 'displayName', value: `Changed ${Date.now()}` }),
          );
          assert.equal(changed.status, 200);
          const after = await k.call('GET', path, undefined, { 'if-none-match': etag });
          assert.equal(after.status, 200, 'a stale version gets the resource');
          assert.notEqual(after.headers.get('etag'), etag);
        }
      });
    });

    describe('RFC 7644 3.6: deleting', () => {
      it('DELETE answers 204; the user is gone (404)', async () => {
        const r = await k.call('DELETE', `/Users/${ids.erik}`);
        assert.equal(r.status, 204);
        const gone = await k.call('GET', `/Users/${ids.erik}`);
        assert.equal(gone.status, 404);
      });
    });

    describe('Groups', () => {
      it('create with members and the education type; filter by displayName and member; members by PATCH value paths', async () => {
        const created = await k.call('POST', '/Groups', {
          schemas: [GROUP, EDU_GROUP],
          displayName: 'Class 1A',
          externalId: 'g-1a',
          members: [{ value: ids.ada }, { value: ids.bea }],
          [EDU_GROUP]: { type: 'class', memberRoles: [{ value: ids.ada, role: 'teacher' }] },
        });
        assert.equal(created.status, 201, JSON.stringify(created.body));
        const id = created.body.id;
        assert.equal(created.body[EDU_GROUP].type, 'class');
        assert.deepEqual(created.body[EDU_GROUP].memberRoles, [{ value: ids.ada, role: 'teacher' }]);
        const found = await k.call(
          'GET',
          `/Groups?filter=${encodeURIComponent(`displayName eq "class 1a" and members[value eq "${ids.bea}"]`)}&excludedAttributes=members`,
        );
        assert.equal(found.body.totalResults, 1);
        assert.equal(found.body.Resources[0].members, undefined);
        let r = await k.call(
          'PATCH',
          `/Groups/${id}`,
          patch(
            { op: 'remove', path: `members[value eq "${ids.bea}"]` },
            { op: 'add', path: 'members', value: [{ value: ids.dan }] },
          ),
        );
        assert.equal(r.status, 200, JSON.stringify(r.body));
        assert.deepEqual(r.body.members.map((m: any) => m.value).sort(), [ids.ada, ids.dan].sort());
        const user = await k.call('GET', `/Users/${ids.dan}`);
        assert.deepEqual(
          user.body.groups.map((g: any) => g.value),
          [id],
        );
        r = await k.call('PATCH', `/Groups/${id}`, patch({ op: 'replace', path: 'displayName', value: 'Class 1B' }));
        assert.equal(r.body.displayName, 'Class 1B');
        assert.equal((await k.call('DELETE', `/Groups/${id}`)).status, 204);
        assert.equal((await k.call('GET', `/Groups/${id}`)).status, 404);
      });
    });

    describe('RFC 7644 3.12: errors', () => {
      it('an unknown resource is 404; an unknown path below /scim/v2 too; a wrong method 405', async () => {
        assert.equal((await k.call('GET', '/Users/00000000-0000-0000-0000-000000000000')).status, 404);
        assert.equal((await k.call('GET', '/Nothing')).status, 404);
        const r = await fetch(`${k.base}/Users`, { method: 'DELETE', headers: { authorization: `Bearer ${k.token}` } });
        assert.equal(r.status, 405);
      });
      it('no token or a wrong one is 401 with a challenge', async () => {
        const r = await k.call('GET', '/Users', undefined, {}, 'scim_wrong');
        assert.equal(r.status, 401);
        assert.match(r.headers.get('www-authenticate')!, /^Bearer realm=/);
        const none = await fetch(`${k.base}/Users`);
        assert.equal(none.status, 401);
      });
    });
  });
}
