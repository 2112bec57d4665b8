// Concurrent SCIM writes over real HTTP on both databases: parallel PATCHes of one group or user
// lose no acknowledged change, If-Match is checked with the write (one of N conditional writes
// wins, a user's DELETE included), and removing a user while a PATCH adds them to a group is never a 500.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { coseP256PublicKey, dialects, spawnService } from '../helpers.ts';
import { EDU_USER, GROUP, PATCH_OP, newUser, scimKit, type ScimKit } from './scim-kit.ts';
import { findUserBySub } from '../../src/store/directory.ts';
import { insertPasskeys, listUserCredentials } from '../../src/store/passkeys.ts';

const patch = (...Operations: unknown[]) => ({ schemas: [PATCH_OP], Operations });

for (const dialect of dialects()) {
  describe(`SCIM concurrent writes (${dialect})`, () => {
    let k: ScimKit;
    const users: string[] = [];
    before(async () => {
      k = await scimKit(dialect);
      for (let i = 0; i < 20; i++) {
        const r = await k.call('POST', '/Users', newUser(`par${i}`));
        assert.equal(r.status, 201, JSON.stringify(r.body));
        users.push(r.body.id);
      }
    });
    after(() => k.close());

    const newGroup = async (name: string, members: string[] = []) => {
      const r = await k.call('POST', '/Groups', {
        schemas: [GROUP],
        displayName: name,
        members: members.map((value) => ({ value })),
      });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      return r.body.id as string;
    };
    const membersOf = async (id: string) =>
      ((await k.call('GET', `/Groups/${id}`)).body.members ?? []).map((m: any) => m.value).sort();

    it('ten parallel add-member PATCHes: every acknowledged member is there', async () => {
      const id = await newGroup('Parallel adds');
      const added = users.slice(0, 10);
      const answers = await Promise.all(
        added.map((value) =>
          k.call('PATCH', `/Groups/${id}`, patch({ op: 'add', path: 'members', value: [{ value }] })),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.status),
        added.map(() => 200),
      );
      assert.deepEqual(await membersOf(id), [...added].sort());
    });

    it('adds and removals interleaved: each answered change holds, none is undone', async () => {
      const id = await newGroup('Interleaved', users.slice(0, 5));
      const removed = users.slice(0, 5);
      const added = users.slice(5, 10);
      const answers = await Promise.all([
        ...removed.map((value) =>
          k.call('PATCH', `/Groups/${id}`, patch({ op: 'remove', path: `members[value eq "${value}"]` })),
        ),
        ...added.map((value) =>
          k.call('PATCH', `/Groups/${id}`, patch({ op: 'add', path: 'members', value: [{ value }] })),
        ),
      ]);
      assert.ok(
        answers.every((a) => a.status === 200),
        JSON.stringify(answers.map((a) => a.status)),
      );
      assert.deepEqual(await membersOf(id), [...added].sort());
    });

    it('If-Match on a group: exactly one of eight parallel conditional PATCHes wins, the others are 412', async () => {
      const id = await newGroup('Conditional');
      const etag = (await k.call('GET', `/Groups/${id}`)).headers.get('etag')!;
      const answers = await Promise.all(
        users
          .slice(0, 8)
          .map((value, i) =>
            k.call(
              'PATCH',
              `/Groups/${id}`,
              patch(
                { op: 'replace', path: 'displayName', value: `Winner ${i}` },
                { op: 'add', path: 'members', value: [{ value }] },
              ),
              { 'if-match': etag },
            ),
          ),
      );
      const statuses = answers.map((a) => a.status).sort();
      assert.deepEqual(statuses, [200, 412, 412, 412, 412, 412, 412, 412]);
      const winner = answers.find((a) => a.status === 200)!;
      const now = await k.call('GET', `/Groups/${id}`);
      assert.equal(now.body.displayName, winner.body.displayName);
      assert.equal(now.body.members.length, 1);
      assert.equal(now.headers.get('etag'), winner.headers.get('etag'));
    });

    it('If-Match on a user: one of eight parallel conditional PATCHes and PUTs wins', async () => {
      const id = users[10]!;
      const etag = (await k.call('GET', `/Users/${id}`)).headers.get('etag')!;
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          i % 2
            ? k.call('PATCH', `/Users/${id}`, patch({ op: 'replace', path: 'title', value: `T${i}` }), {
                'if-match': etag,
              })
            : k.call('PUT', `/Users/${id}`, newUser('par10', { title: `T${i}` }), { 'if-match': etag }),
        ),
      );
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 412, 412, 412, 412, 412, 412, 412]);
      const winner = answers.find((a) => a.status === 200)!;
      assert.equal((await k.call('GET', `/Users/${id}`)).body.title, winner.body.title);
    });

    it('parallel PATCHes adding values to one user keep every value', async () => {
      const id = users[11]!;
      const values = Array.from({ length: 8 }, (_, i) => `urn:example:entitlement:${i}`);
      const answers = await Promise.all(
        values.map((value) =>
          k.call('PATCH', `/Users/${id}`, patch({ op: 'add', path: `${EDU_USER}:entitlement`, value: [value] })),
        ),
      );
      assert.ok(
        answers.every((a) => a.status === 200),
        JSON.stringify(answers.map((a) => [a.status, a.body?.detail])),
      );
      const now = await k.call('GET', `/Users/${id}`);
      assert.deepEqual([...now.body[EDU_USER].entitlement].sort(), values);
    });

    it('a user removed while PATCHes add them to a group: no 500, and no member left behind', async () => {
      const group = await newGroup('Removal race');
      for (let round = 0; round < 6; round++) {
        const created = await k.call('POST', '/Users', newUser(`gone${round}`));
        const id = created.body.id as string;
        const answers = await Promise.all([
          k.call('PATCH', `/Groups/${group}`, patch({ op: 'add', path: 'members', value: [{ value: id }] })),
          k.call('DELETE', `/Users/${id}`),
          k.call('PATCH', `/Groups/${group}`, patch({ op: 'add', path: 'members', value: [{ value: id }] })),
        ]);
        for (const a of answers) assert.ok(a.status < 500, JSON.stringify(a.body));
        assert.equal(answers[1]!.status, 204);
        for (const a of [answers[0]!, answers[2]!])
          if (a.status !== 200) assert.equal(a.status, 400, JSON.stringify(a.body));
        assert.ok(!(await membersOf(group)).includes(id));
      }
    });

    it("If-Match on a user's DELETE: of parallel DELETEs and PATCHes with one version on two instances, one wins, nothing half-done", async () => {
      const db = k.ctx.store.db;
      // a second instance on the same database (SQLite: another process on the file, as cluster workers are)
      const other = await spawnService({ DATABASE_URL: k.ctx.config.databaseUrl }, undefined, { stdout: true });
      const callOther = async (method: string, path: string, body: unknown, etag: string) => {
        const res = await fetch(`${other.url}/scim/v2${path}`, {
          method,
          headers: { authorization: `Bearer ${k.token}`, 'content-type': 'application/scim+json', 'if-match': etag },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : undefined };
      };
      try {
        const group = await newGroup('Conditional removal');
        for (let round = 0; round < 8; round++) {
          const local = `cond${round}`;
          const created = await k.call('POST', '/Users', newUser(local));
          const id = created.body.id as string;
          const user = (await findUserBySub(db, id))!;
          await insertPasskeys(db, [
            {
              user_id: user.id,
              org_id: 1,
              credential_id: Buffer.from(`cond-${round}`),
              public_key: await coseP256PublicKey(),
              sign_count: 0,
              transports: '[]',
              label: 'Key',
              aaguid: '00000000-0000-0000-0000-000000000000',
              backup_eligible: 0,
              backup_state: 0,
              mfa_verified: 1,
              created_at: Date.now(),
              last_used_at: null,
            },
          ]);
          const add = patch({ op: 'add', path: 'members', value: [{ value: id }] });
          assert.equal((await k.call('PATCH', `/Groups/${group}`, add)).status, 200);
          const etag = (await k.call('GET', `/Users/${id}`)).headers.get('etag')!;
          // each instance gets DELETEs and PATCHes; which kind is sent first changes from round to round
          const answers = await Promise.all(
            Array.from({ length: 8 }, (_, i) => {
              const [method, body] =
                (Math.floor(i / 2) + round) % 2
                  ? ['DELETE', undefined]
                  : ['PATCH', patch({ op: 'replace', path: 'title', value: `T${i}` })];
              return i % 2
                ? callOther(method, `/Users/${id}`, body, etag)
                : k.call(method, `/Users/${id}`, body, { 'if-match': etag });
            }),
          );
          // the answers, and the other instance's log (where a 500 would say why)
          const told = () => `round ${round}: ${JSON.stringify(answers.map((a) => a.status))}\n${other.stdout()}`;
          const won = answers.filter((a) => a.status === 200 || a.status === 204);
          assert.equal(won.length, 1, told());
          const deleted = won[0]!.status === 204;
          for (const a of answers)
            if (a !== won[0]) assert.ok(a.status === 412 || (deleted && a.status === 404), told());
          const removals = await db
            .selectFrom('audit_events')
            .select('id')
            .where('kind', '=', 'user.remove')
            .where('eppn', '=', `${local}@example.org`)
            .execute();
          const stored = await findUserBySub(db, id);
          const members = ((await k.call('GET', `/Groups/${group}`)).body.members ?? []).map((m: any) => m.value);
          if (deleted) {
            assert.equal(stored, undefined);
            assert.equal(removals.length, 1);
            assert.equal((await listUserCredentials(db, user.id)).length, 0);
            assert.ok(!members.includes(id));
          } else {
            assert.equal(stored?.title, won[0]!.body.title);
            assert.equal(removals.length, 0);
            assert.equal((await listUserCredentials(db, user.id)).length, 1);
            assert.ok(members.includes(id));
          }
        }
      } finally {
        await other.stop();
      }
    });
  });
}
