import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { sql } from 'kysely';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, dialects, migratedDatabase, seedOrg, seedUser, type TestDatabase } from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { IMPORT_BATCH } from '../../src/directory/user-import.ts';

const tmp = mkdtempSync(join(tmpdir(), 'idp-import-'));
let files = 0;
function file(ext: 'csv' | 'jsonl', content: string | Buffer): string {
  const path = join(tmp, `users-${++files}.${ext}`);
  writeFileSync(path, content);
  return path;
}

const HEADER = 'eppn,given_name,family_name,email,affiliation,primary_affiliation,external_id';

interface Summary {
  created: number;
  updated: number;
  unchanged: number;
  rejected: number;
  rejections: { line: number; error: string }[];
}

for (const dialect of dialects()) {
  describe(`user import (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    let org = 0;
    /** a fresh organization per test, so tests do not see each other's users */
    const newOrg = async () => {
      org++;
      await seedOrg({ store }, org, `org${org}.example.org`, `Org ${org}`);
      return { id: String(org), realm: `org${org}.example.org` };
    };
    const run = async (args: string[]) => {
      const r = await cli(db.url, ['user', 'import', ...args]);
      return { ...r, summary: r.out.startsWith('{') ? (JSON.parse(r.out) as Summary) : undefined };
    };
    const counts = (s: Summary | undefined) => s && [s.created, s.updated, s.unchanged, s.rejected];
    const count = async (orgId: string) =>
      Number(
        (
          await store.db
            .selectFrom('users')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('org_id', '=', Number(orgId))
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

    it('imports a CSV, then finds every line unchanged on a second run; the JSON summary has the documented shape', async () => {
      const o = await newOrg();
      const path = file(
        'csv',
        [
          HEADER,
          `ada@${o.realm},Ada,Lovelace,Ada@Example.org,staff;member,staff,e-1`,
          `bob@${o.realm},Bob,Builder,,student,student,`,
        ].join('\n'),
      );
      const first = await run(['--org', o.id, '--json', path]);
      assert.equal(first.code, 0, first.err);
      assert.deepEqual(Object.keys(first.summary!).slice(0, 5), [
        'created',
        'updated',
        'unchanged',
        'rejected',
        'rejections',
      ]);
      assert.deepEqual(counts(first.summary), [2, 0, 0, 0]);
      assert.deepEqual(first.summary!.rejections, []);
      const ada = (await findUserByEppn(store.db, `ada@${o.realm}`))!;
      assert.equal(ada.name, 'Ada Lovelace');
      assert.equal(ada.email, 'ada@example.org');
      assert.equal(ada.affiliation, 'staff member');
      assert.equal(ada.primary_affiliation, 'staff');
      assert.equal(ada.external_id, 'e-1');
      const again = await run(['--org', o.id, '--json', path]);
      assert.equal(again.code, 0);
      assert.deepEqual(counts(again.summary), [0, 0, 2, 0]);
      const audit = await store.db
        .selectFrom('audit_events')
        .selectAll()
        .where('kind', '=', 'user.import')
        .where('org_id', '=', Number(o.id))
        .execute();
      assert.equal(audit.length, 2, 'one audit record per run');
      assert.equal(JSON.parse(audit[0]!.details).created, 2);
    });

    it('reads JSON lines with lists, and detects updates', async () => {
      const o = await newOrg();
      await seedUser({ store }, Number(o.id), `cy@${o.realm}`, { name: 'Cy' });
      const path = file(
        'jsonl',
        [
          JSON.stringify({ eppn: `cy@${o.realm}`, name: 'Cy Twombly', affiliation: ['faculty', 'member'] }),
          '',
          JSON.stringify({
            eppn: `di@${o.realm}`,
            given_name: 'Di',
            family_name: 'Fossey',
            entitlement: ['urn:mace:dir:entitlement:common-lib-terms'],
            employee_number: 42,
          }),
        ].join('\n') + '\n',
      );
      const r = await run(['--org', o.id, '--json', path]);
      assert.equal(r.code, 0, r.err);
      assert.deepEqual(counts(r.summary), [1, 1, 0, 0]);
      const cy = (await findUserByEppn(store.db, `cy@${o.realm}`))!;
      assert.equal(cy.name, 'Cy Twombly');
      const published = await sql<{
        topic: string;
        key: string;
      }>`select topic, key from invalidations where key = ${cy.sub}`.execute(store.db);
      assert.deepEqual(
        published.rows.map((r) => ({ ...r })),
        [{ topic: 'user', key: cy.sub }],
        'the changed user is invalidated',
      );
      assert.equal(cy.affiliation, 'faculty member');
      const di = (await findUserByEppn(store.db, `di@${o.realm}`))!;
      assert.equal(di.name, 'Di Fossey');
      assert.equal(di.employee_number, '42');
      assert.deepEqual(counts((await run(['--org', o.id, '--json', path])).summary), [0, 0, 2, 0]);
    });

    it('parses quoted fields, embedded commas and line ends, a BOM and CRLF, and keeps the file line numbers', async () => {
      const o = await newOrg();
      const text =
        '\ufeff' +
        [
          'eppn,name,title,email',
          `ed@${o.realm},"Ed, the ""first""","Head of ""IT""",`,
          `fay@${o.realm},Fay,"two\r\nlines",`,
          '',
          `gus@${o.realm},Gus,,not-an-address`,
        ].join('\r\n') +
        '\r\n';
      const r = await run(['--org', o.id, '--json', file('csv', text)]);
      assert.equal(r.code, 1);
      assert.deepEqual(counts(r.summary), [1, 0, 0, 2]);
      assert.equal((await findUserByEppn(store.db, `ed@${o.realm}`))!.name, 'Ed, the "first"');
      assert.equal((await findUserByEppn(store.db, `ed@${o.realm}`))!.title, 'Head of "IT"');
      assert.deepEqual(
        r.summary!.rejections.map((x) => x.line),
        [3, 6],
      );
      assert.match(r.summary!.rejections[0]!.error, /title must be at most 200 characters, one line/);
      assert.match(r.summary!.rejections[1]!.error, /email 'not-an-address' is not a valid address/);
    });

    it('rejects bad lines with their line numbers and writes the good ones (exit 1)', async () => {
      const o = await newOrg();
      const lines = [
        HEADER, // 1
        `ok@${o.realm},Ok,User,,,,`, // 2
        `not-an-eppn,A,B,,,,`, // 3
        `x@other.example.org,A,B,,,,`, // 4
        `em@${o.realm},A,B,bad@,,,`, // 5
        `af@${o.realm},A,B,,wizard,,`, // 6
        `pr@${o.realm},A,B,,student,staff,`, // 7
        `ok@${o.realm},Ok,Again,,,,`, // 8
        `short@${o.realm},A`, // 9
        `nn@${o.realm},,,,,,`, // 10
      ];
      const bytes = Buffer.concat([
        Buffer.from(`${lines.join('\n')}\n`),
        Buffer.from([0x75, 0xff, 0xfe, 0x40]),
        Buffer.from(`${o.realm},A,B,,,,\n`), // 11
      ]);
      const r = await run(['--org', o.id, '--json', file('csv', bytes)]);
      assert.equal(r.code, 1);
      assert.deepEqual(counts(r.summary), [1, 0, 0, 9]);
      const errors = Object.fromEntries(r.summary!.rejections.map((x) => [x.line, x.error]));
      assert.deepEqual(Object.keys(errors).map(Number), [3, 4, 5, 6, 7, 8, 9, 10, 11]);
      assert.match(errors[3]!, /eppn 'not-an-eppn' must contain '@'/);
      assert.match(errors[4]!, /realm 'other.example.org' is not the organization's/);
      assert.match(errors[5]!, /email 'bad@' is not a valid address/);
      assert.match(errors[6]!, /affiliation 'wizard' is not one of/);
      assert.match(errors[7]!, /primaryAffiliation 'staff' must also be one of the affiliations/);
      assert.match(errors[8]!, /is also on line 2/);
      assert.match(errors[9]!, /has 2 field\(s\); the header has 7/);
      assert.match(errors[10]!, /needs a name/);
      assert.match(errors[11]!, /not valid UTF-8/);
      assert.equal(await count(o.id), 1);
      const text = await run(['--org', o.id, file('csv', `${HEADER}\nbad,A,B,,,,\n`)]);
      assert.equal(text.code, 1);
      assert.match(text.out, /^created 0, updated 0, unchanged 0, rejected 1\nline 2: eppn 'bad' must contain '@'$/);
    });

    it('a dry run writes nothing and reports what would happen', async () => {
      const o = await newOrg();
      const path = file('csv', `${HEADER}\nhal@${o.realm},Hal,Nine,,,,\n`);
      const r = await run(['--org', o.id, '--json', '--dry-run', path]);
      assert.equal(r.code, 0);
      assert.deepEqual(counts(r.summary), [1, 0, 0, 0]);
      assert.equal(await count(o.id), 0);
      const audit = await store.db
        .selectFrom('audit_events')
        .select('id')
        .where('kind', '=', 'user.import')
        .where('org_id', '=', Number(o.id))
        .execute();
      assert.equal(audit.length, 0);
    });

    it('transactional: one bad line and nothing is written (exit 1); all good and everything is', async () => {
      const o = await newOrg();
      const good = Array.from({ length: 6000 }, (_, i) => `u${i}@${o.realm},U,${i},,,,`);
      const bad = file('csv', [HEADER, ...good, `bad@${o.realm},U,X,,alien,,`].join('\n'));
      const r = await run(['--org', o.id, '--json', '--transactional', bad]);
      assert.equal(r.code, 1);
      assert.deepEqual(counts(r.summary), [6000, 0, 0, 1]);
      assert.deepEqual(r.summary!.rejections, [
        {
          line: 6002,
          error:
            "affiliation 'alien' is not one of student, faculty, staff, employee, member, affiliate, alum, library-walk-in",
        },
      ]);
      assert.equal(await count(o.id), 0);
      const ok = await run(['--org', o.id, '--json', '--transactional', file('csv', [HEADER, ...good].join('\n'))]);
      assert.equal(ok.code, 0);
      assert.equal(await count(o.id), 6000);
    });

    it('upserts by external_id: a changed eppn renames the user; an external_id of another user is refused', async () => {
      const o = await newOrg();
      await run(['--org', o.id, file('csv', `${HEADER}\nivy@${o.realm},Ivy,Old,,,,x-1\njo@${o.realm},Jo,J,,,,x-2\n`)]);
      const ivy = (await findUserByEppn(store.db, `ivy@${o.realm}`))!;
      const r = await run([
        '--org',
        o.id,
        '--json',
        file('csv', `${HEADER}\nivy.new@${o.realm},Ivy,New,,,,x-1\njo@${o.realm},Jo,J,,,,x-1\n`),
      ]);
      assert.equal(r.code, 1);
      assert.deepEqual(counts(r.summary), [0, 1, 0, 1]);
      assert.equal(r.summary!.rejections[0]!.line, 3);
      assert.match(r.summary!.rejections[0]!.error, /external_id 'x-1' is also on line 2/);
      const renamed = (await findUserByEppn(store.db, `ivy.new@${o.realm}`))!;
      assert.equal(renamed.sub, ivy.sub);
      assert.equal(renamed.name, 'Ivy New');
      assert.equal(await findUserByEppn(store.db, `ivy@${o.realm}`), undefined);
      const taken = await run(['--org', o.id, '--json', file('csv', `${HEADER}\njo@${o.realm},Jo,J,,,,x-1\n`)]);
      assert.equal(taken.code, 1);
      assert.match(taken.summary!.rejections[0]!.error, /external_id 'x-1' belongs to 'ivy.new@/);
    });

    it('external ids with quotes, backslashes, braces, commas, NULL and non-ASCII are matched as they are', async () => {
      const o = await newOrg();
      const ids = ['a"b\\c,{d}', 'NULL', 'ø日本 x'];
      const csvField = (v: string) => `"${v.replaceAll('"', '""')}"`;
      const lines = (prefix: string) =>
        ids.map((id, i) => `${prefix}${i}@${o.realm},G,F${i},,,,${csvField(id)}`).join('\n');
      assert.deepEqual(
        counts((await run(['--org', o.id, '--json', file('csv', `${HEADER}\n${lines('w')}\n`)])).summary),
        [3, 0, 0, 0],
      );
      const again = await run(['--org', o.id, '--json', file('csv', `${HEADER}\n${lines('w')}\n`)]);
      assert.deepEqual(counts(again.summary), [0, 0, 3, 0]);
      const renamed = await run(['--org', o.id, '--json', file('csv', `${HEADER}\n${lines('v')}\n`)]);
      assert.deepEqual(counts(renamed.summary), [0, 3, 0, 0]);
      for (const [i, id] of ids.entries())
        assert.equal((await findUserByEppn(store.db, `v${i}@${o.realm}`))?.external_id, id);
      assert.equal(await count(o.id), 3);
    });

    it('a user taken or renamed by an earlier batch is still the same user in a later one', async () => {
      const o = await newOrg();
      await run(['--org', o.id, file('csv', `${HEADER}\nkim@${o.realm},Kim,K,,,,k-1\nlee@${o.realm},Lee,L,,,,l-1\n`)]);
      const filler = Array.from({ length: IMPORT_BATCH }, (_, i) => `f${i}@${o.realm},F,${i},,,,\n`).join('');
      const later = IMPORT_BATCH + 4;
      const r = await run([
        '--org',
        o.id,
        '--json',
        file(
          'csv',
          `${HEADER}\nkim.new@${o.realm},Kim,K,,,,k-1\nlee@${o.realm},Lee,L,,,,\n${filler}` +
            `kim@${o.realm},Kim,Again,,,,\nlee.other@${o.realm},Lee,L,,,,l-1\n`,
        ),
      ]);
      assert.equal(r.code, 1);
      assert.deepEqual(counts(r.summary), [IMPORT_BATCH, 1, 1, 2]);
      assert.deepEqual(r.summary!.rejections, [
        { line: later, error: 'the same user as line 2' },
        { line: later + 1, error: 'the same user as line 3' },
      ]);
      assert.equal(await findUserByEppn(store.db, `kim@${o.realm}`), undefined, 'no second user');
      assert.equal(await findUserByEppn(store.db, `lee.other@${o.realm}`), undefined);
    });

    it('refuses a file it cannot use, before anything is written', async () => {
      const o = await newOrg();
      const unknown = await run(['--org', o.id, file('csv', `eppn,colour\na@${o.realm},red\n`)]);
      assert.equal(unknown.code, 1);
      assert.match(unknown.err, /^error: line 1: unknown column 'colour'/);
      const missing = await run(['--org', o.id, join(tmp, 'nothing.csv')]);
      assert.match(missing.err, /^error: cannot read/);
      const kind = await run(['--org', o.id, join(tmp, 'users.txt')]);
      assert.match(kind.err, /must be a \.csv or a \.jsonl file/);
      const noOrg = await run(['--org', '999', file('csv', `${HEADER}\n`)]);
      assert.match(noOrg.err, /organization 999 does not exist/);
      assert.equal(await count(o.id), 0);
    });

    it('user list --json shows active', async () => {
      const o = await newOrg();
      await seedUser({ store }, Number(o.id), `kim@${o.realm}`);
      await cli(db.url, ['user', 'disable', `kim@${o.realm}`]);
      await seedUser({ store }, Number(o.id), `lee@${o.realm}`);
      const list = JSON.parse((await cli(db.url, ['user', 'list', '--org', o.id, '--json'])).out) as {
        eppn: string;
        active: boolean;
        status: string;
      }[];
      assert.deepEqual(
        list.map((u) => [u.eppn, u.active, u.status]),
        [
          [`kim@${o.realm}`, false, 'disabled'],
          [`lee@${o.realm}`, true, 'active'],
        ],
      );
    });
  });
}
