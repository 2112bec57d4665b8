// FIDO Metadata Service: importing a signed blob (and every reason to refuse one, each changing
// nothing), what the imported metadata says about an authenticator model, and finding and deleting
// passkeys of revoked or compromised models. On both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  dialects,
  migratedDatabase,
  cli,
  coseP256PublicKey,
  seedOrg,
  seedUser,
  type TestDatabase,
} from '../helpers.ts';
import { openStore, type Store } from '../../src/store/index.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import {
  authenticatorVerdict,
  compromisedPasskeys,
  importMetadataBlob,
  loadMetadataStatements,
  REFUSED_STATUSES,
  rootFromPem,
} from '../../src/webauthn/mds.ts';
import { webauthnServer } from '../../src/webauthn/library.ts';
import { day, makePki, makeRoot, payload, signBlob, type TestEntry } from './mds-fixtures.ts';

const tmp = mkdtempSync(join(tmpdir(), 'idp-mds-'));
const pki = makePki(tmp);
const foreignRoot = makeRoot(tmp, 'other-root');
after(() => rmSync(tmp, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const path = join(tmp, name);
  writeFileSync(path, content);
  return path;
}

const KEY_A = 'a1a1a1a1-0000-4000-8000-00000000000a';
const KEY_B = 'b2b2b2b2-0000-4000-8000-00000000000b';
const KEY_C = 'c3c3c3c3-0000-4000-8000-00000000000c';
const UNKNOWN = 'd4d4d4d4-0000-4000-8000-00000000000d';
const ICON =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

const FIRST: TestEntry[] = [
  {
    aaguid: KEY_A,
    description: 'Key A',
    icon: ICON,
    statuses: [{ status: 'FIDO_CERTIFIED_L1', effectiveDate: '2023-05-01' }],
  },
  {
    aaguid: KEY_B,
    description: 'Key B',
    statuses: [
      { status: 'FIDO_CERTIFIED', effectiveDate: '2021-01-01' },
      { status: 'UPDATE_AVAILABLE', effectiveDate: '2022-06-01' },
    ],
  },
  {
    // Listed newest first: the status is the latest by effectiveDate, not the last listed.
    aaguid: KEY_C.toUpperCase(),
    description: 'Key C',
    statuses: [
      { status: 'USER_KEY_REMOTE_COMPROMISE', effectiveDate: '2024-03-01' },
      { status: 'FIDO_CERTIFIED_L2', effectiveDate: '2022-01-01' },
    ],
  },
];

const SECOND: TestEntry[] = [
  {
    aaguid: KEY_A,
    description: 'Key A',
    icon: ICON,
    statuses: [
      { status: 'FIDO_CERTIFIED_L1', effectiveDate: '2023-05-01' },
      { status: 'REVOKED', effectiveDate: '2024-09-01' },
    ],
  },
  ...FIRST.slice(1),
];

for (const dialect of dialects()) {
  describe(`FIDO metadata service (${dialect})`, () => {
    let db: TestDatabase;
    let store: Store;
    const run = (args: string[]) => cli(db.url, args);
    const count = async (table: 'mds_authenticators' | 'mds_imports' | 'audit_events' | 'passkeys') =>
      Number(
        (
          await store.db
            .selectFrom(table)
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const counts = async () => ({
      authenticators: await count('mds_authenticators'),
      imports: await count('mds_imports'),
      audit: await count('audit_events'),
    });
    const statusOf = async (aaguid: string) =>
      (await store.db.selectFrom('mds_authenticators').selectAll().where('aaguid', '=', aaguid).executeTakeFirst())
        ?.status;
    let ids: number[] = [];

    before(async () => {
      db = await migratedDatabase(dialect);
      store = await openStore(db.url);
      await seedOrg({ store }, 1, 'example.org', 'Example University');
      await seedOrg({ store }, 2, 'other.org', 'Other');
      await seedUser({ store }, 1, 'alice@example.org');
      await seedUser({ store }, 2, 'bob@other.org');
      const key = (await coseP256PublicKey()).toString('base64url');
      const entry = (n: number, eppn: string, aaguid: string) => ({
        eppn,
        label: `Key ${n}`,
        credential_id: Buffer.alloc(32, n).toString('base64url'),
        public_key: key,
        aaguid,
        sign_count: 0,
        transports: ['usb'],
        created_at: '2024-01-15T10:30:00+00:00',
        last_used_at: null,
        mfa_verified: true,
      });
      const passkeys = [
        entry(1, 'alice@example.org', KEY_A),
        entry(2, 'alice@example.org', KEY_B),
        entry(3, 'bob@other.org', KEY_C),
        entry(4, 'alice@example.org', UNKNOWN),
      ];
      const r = await run([
        'passkey',
        'import',
        '--file',
        file(`passkeys-${dialect}.json`, JSON.stringify(passkeys)),
        '--json',
      ]);
      assert.equal(r.code, 0, r.err);
      ids = JSON.parse(r.out).ids;
    });
    after(async () => {
      await store.close();
      await db.drop();
    });

    it('knows nothing before an import', async () => {
      assert.deepEqual(await authenticatorVerdict(store.db, KEY_A), { refused: false, known: false });
      assert.deepEqual(await compromisedPasskeys(store.db), []);
      assert.equal(await loadMetadataStatements(store.db), 0);
    });

    it('imports a valid blob: entries, statuses, icon, the import and its audit record', async () => {
      const blob = file(`first-${dialect}.jwt`, await signBlob(pki, payload(10, day(30), FIRST)));
      const r = await run(['mds', 'import', blob, '--root', pki.rootPath, '--json']);
      assert.equal(r.code, 0, r.err);
      const summary = JSON.parse(r.out);
      assert.deepEqual(
        { ...summary, imported_at: typeof summary.imported_at },
        { serial: 10, next_update: day(30), entries: 3, refused: 1, skipped: 1, imported_at: 'string' },
      );
      assert.equal(await count('mds_authenticators'), 3, 'the U2F entry without an aaguid is skipped');
      const a = await store.db
        .selectFrom('mds_authenticators')
        .selectAll()
        .where('aaguid', '=', KEY_A)
        .executeTakeFirstOrThrow();
      assert.equal(a.description, 'Key A');
      assert.equal(a.status, 'FIDO_CERTIFIED_L1');
      assert.equal(a.status_date, '2023-05-01');
      assert.equal(a.icon, ICON);
      assert.equal(JSON.parse(a.statement).description, 'Key A');
      assert.equal(await statusOf(KEY_B), 'UPDATE_AVAILABLE');
      assert.equal(await statusOf(KEY_C), 'USER_KEY_REMOTE_COMPROMISE', 'stored lower case, latest report');
      const imports = await store.db.selectFrom('mds_imports').selectAll().execute();
      assert.deepEqual(
        imports.map((i) => [i.serial, i.next_update, i.entries]),
        [[10, day(30), 3]],
      );
      const [audit] = await listAuditEvents(store.db, { action: 'mds.import' });
      assert.equal(audit!.actor_type, 'operator');
      assert.match(audit!.actor!, /^cli/);
      assert.equal(JSON.parse(audit!.details).serial, 10);
    });

    it('mds status shows one entry', async () => {
      const r = await run(['mds', 'status', KEY_A]);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, /^aaguid\s+a1a1a1a1-0000-4000-8000-00000000000a$/m);
      assert.match(r.out, /^description\s+Key A$/m);
      assert.match(r.out, /^status\s+FIDO_CERTIFIED_L1$/m);
      assert.match(r.out, /^refused\s+false$/m);
      assert.match(r.out, /^icon\s+data:image\/png;base64 \(\d+ characters\)$/m);
      const json = JSON.parse((await run(['mds', 'status', KEY_C.toUpperCase(), '--json'])).out);
      assert.equal(json.status, 'USER_KEY_REMOTE_COMPROMISE');
      assert.equal(json.refused, true);
      assert.equal(json.statement.description, 'Key C');
      assert.match((await run(['mds', 'status', UNKNOWN])).err, /^error: no imported metadata for aaguid d4d4/);
      assert.match((await run(['mds', 'status', 'not-a-uuid'])).err, /^error: aaguid must be a UUID/);
    });

    it('gives the verdict registration asks for: refused, known, unknown', async () => {
      assert.deepEqual(await authenticatorVerdict(store.db, KEY_A), {
        refused: false,
        known: true,
        description: 'Key A',
        icon: ICON,
      });
      assert.deepEqual(await authenticatorVerdict(store.db, KEY_B.toUpperCase()), {
        refused: false,
        known: true,
        description: 'Key B',
      });
      assert.deepEqual(await authenticatorVerdict(store.db, KEY_C), {
        refused: true,
        status: 'USER_KEY_REMOTE_COMPROMISE',
        description: 'Key C',
      });
      assert.deepEqual(await authenticatorVerdict(store.db, UNKNOWN), { refused: false, known: false });
      assert.deepEqual([...REFUSED_STATUSES].sort(), [
        'ATTESTATION_KEY_COMPROMISE',
        'REVOKED',
        'USER_KEY_PHYSICAL_COMPROMISE',
        'USER_KEY_REMOTE_COMPROMISE',
        'USER_VERIFICATION_BYPASS',
      ]);
    });

    it('hands the statements to the library', async () => {
      assert.equal(await loadMetadataStatements(store.db), 3);
      const { MetadataService } = await webauthnServer();
      assert.equal((await MetadataService.getStatement(KEY_B))?.description, 'Key B');
      assert.equal((await MetadataService.getStatement(KEY_C))?.aaguid, KEY_C);
      assert.equal(await MetadataService.getStatement(UNKNOWN), undefined, 'permissive: unknown AAGUIDs pass');
    });

    it('refuses a blob and changes nothing, whatever is wrong with it', async () => {
      const good = await signBlob(pki, payload(11, day(30), SECOND));
      const [header, body, signature] = good.split('.');
      const tampered = Buffer.from(JSON.stringify(payload(11, day(30), FIRST))).toString('base64url');
      const cases: [string, string[], RegExp][] = [
        ['a bad signature', [file('tampered.jwt', `${header}.${tampered}.${signature}`)], /signature does not verify/],
        [
          'a foreign root',
          [file('foreign.jwt', good), '--root', foreignRoot],
          /does not lead to the trusted root \(O=Test, CN=other-root\)/,
        ],
        [
          'the default root (not ours)',
          [file('default.jwt', good)],
          /does not lead to the trusted root \(.*GlobalSign Root CA - R3/,
        ],
        [
          'an expired blob',
          [file('stale.jwt', await signBlob(pki, payload(11, day(-1), SECOND)))],
          /out of date: its nextUpdate .* has passed/,
        ],
        [
          'the same serial',
          [file('same.jwt', await signBlob(pki, payload(10, day(30), SECOND)))],
          /serial 10 is not greater than the last imported serial 10/,
        ],
        [
          'a lower serial',
          [file('lower.jwt', await signBlob(pki, payload(9, day(30), SECOND)))],
          /serial 9 is not greater than the last imported serial 10/,
        ],
        [
          'a malformed payload',
          [file('malformed.jwt', await signBlob(pki, { no: 12, nextUpdate: day(30), entries: {} }))],
          /payload is malformed: entries must be an array/,
        ],
        [
          'a bad aaguid',
          [file('aaguid.jwt', await signBlob(pki, payload(12, day(30), [{ ...FIRST[0]!, aaguid: 'nope' }])))],
          /entry 1: aaguid is not a UUID/,
        ],
        ['not a JWT', [file('text.jwt', 'hello, world\n')], /not an MDS blob/],
        ['a header that is not JSON', [file('header.jwt', `aGVsbG8.${body}.${signature}`)], /not an MDS blob/],
        ['a missing file', [join(tmp, 'missing.jwt')], /missing\.jwt: no such file/],
        [
          'a root that is not a certificate',
          [file('x.jwt', good), '--root', file('root.txt', 'nothing')],
          /not a PEM certificate/,
        ],
      ];
      const before = await counts();
      for (const [what, args, message] of cases) {
        const r = await run([
          'mds',
          'import',
          ...args,
          ...(args.includes('--root') || what.includes('default') ? [] : ['--root', pki.rootPath]),
        ]);
        assert.equal(r.code, 1, `${what}: ${r.out}`);
        assert.match(r.err, message, what);
        assert.equal(r.err.split('\n').length, 1, `${what}: one line`);
        assert.deepEqual(await counts(), before, `${what}: nothing changed`);
      }
      assert.equal(await statusOf(KEY_A), 'FIDO_CERTIFIED_L1');
      // Certificates out of their validity: the same blob seen 90 days on.
      await assert.rejects(
        importMetadataBlob(store, good, { root: rootFromPem(pki.rootPem), now: Date.now() + 90 * 86_400_000 }),
        /expired on/,
      );
      assert.deepEqual(await counts(), before);
    });

    it('a newer blob updates a status to REVOKED', async () => {
      const blob = file(`second-${dialect}.jwt`, await signBlob(pki, payload(11, day(30), SECOND)));
      const r = await run(['mds', 'import', blob, '--root', pki.rootPath]);
      assert.equal(r.code, 0, r.err);
      assert.equal(
        r.out,
        `imported FIDO metadata blob 11: 3 authenticators (2 with a refused status)\nskipped 1 entries without an AAGUID; next update due ${day(30)}`,
      );
      assert.equal(await statusOf(KEY_A), 'REVOKED');
      assert.equal(await count('mds_authenticators'), 3);
      assert.equal(await count('mds_imports'), 2);
      assert.match((await run(['mds', 'status', KEY_A])).out, /^status\s+REVOKED$/m);
      assert.deepEqual(await authenticatorVerdict(store.db, KEY_A), {
        refused: true,
        status: 'REVOKED',
        description: 'Key A',
      });
    });

    it('reports passkeys of refused authenticator models', async () => {
      const all = JSON.parse((await run(['mds', 'report', '--json'])).out);
      assert.deepEqual(all, [
        { id: ids[0], org_id: 1, eppn: 'alice@example.org', aaguid: KEY_A, description: 'Key A', status: 'REVOKED' },
        {
          id: ids[2],
          org_id: 2,
          eppn: 'bob@other.org',
          aaguid: KEY_C,
          description: 'Key C',
          status: 'USER_KEY_REMOTE_COMPROMISE',
        },
      ]);
      const one = JSON.parse((await run(['mds', 'report', '--org', '1', '--json'])).out);
      assert.deepEqual(
        one.map((p: { id: number }) => p.id),
        [ids[0]],
      );
      const text = (await run(['mds', 'report'])).out;
      assert.match(text, /^id\s+org_id\s+eppn\s+aaguid\s+description\s+status$/m);
      assert.match(text, /alice@example\.org\s+a1a1a1a1-\S+\s+Key A\s+REVOKED/);
      assert.match((await run(['mds', 'report', '--org', '9'])).err, /organization 9 does not exist/);
    });

    it('deletes them with --delete, audited like the passkey API', async () => {
      assert.match((await run(['mds', 'report', '--delete'])).err, /--reason is required with --delete/);
      assert.match((await run(['mds', 'report', '--reason', 'x'])).err, /--reason goes with --delete/);
      assert.equal(await count('passkeys'), 4);
      const org2 = await run(['mds', 'report', '--delete', '--reason', 'FIDO: key compromised', '--org', '2']);
      assert.deepEqual([org2.code, org2.out], [0, 'deleted 1 passkeys']);
      const rest = JSON.parse((await run(['mds', 'report', '--delete', '--reason', 'revoked model', '--json'])).out);
      assert.deepEqual(rest, { deleted: 1, ids: [ids[0]] });
      assert.equal(await count('passkeys'), 2);
      assert.deepEqual(JSON.parse((await run(['mds', 'report', '--json'])).out), []);
      const records = await listAuditEvents(store.db, { action: 'passkey.delete' });
      const reasons = records.map((a) => (JSON.parse(a.details) as { reason?: string }).reason);
      assert.deepEqual(
        records.map((a, i) => [a.eppn, a.org_id, JSON.parse(a.passkey_ids), reasons[i], a.client_id]).reverse(),
        [
          ['bob@other.org', 2, [ids[2]], 'FIDO: key compromised', null],
          ['alice@example.org', 1, [ids[0]], 'revoked model', null],
        ],
      );
      assert.ok(records.every((a) => a.actor_type === 'operator' && a.actor?.startsWith('cli')));
      const events = await store.db
        .selectFrom('events')
        .select(['type', 'subject'])
        .where('type', '=', 'passkey.deleted')
        .execute();
      assert.deepEqual(events.map((e) => e.subject).sort(), ['alice@example.org', 'bob@other.org']);
      const nothing = await run(['mds', 'report', '--delete', '--reason', 'again']);
      assert.equal(nothing.out, 'deleted 0 passkeys');
    });

    it("takes the blob's quirks: a statement's own aaguid differing, an aaguid listed twice", async () => {
      const KEY_E = 'e5e5e5e5-0000-4000-8000-00000000000e';
      const entries: TestEntry[] = [
        {
          aaguid: KEY_B,
          description: 'Key B',
          statuses: [{ status: 'ATTESTATION_KEY_COMPROMISE', effectiveDate: '2025-01-01' }],
        },
        { aaguid: KEY_B, description: 'Key B', statuses: [{ status: 'FIDO_CERTIFIED', effectiveDate: '2025-02-01' }] },
        { aaguid: KEY_E, statementAaguid: UNKNOWN, description: 'Key E', statuses: [] },
      ];
      const blob = file(`third-${dialect}.jwt`, await signBlob(pki, payload(12, day(1), entries)));
      const r = await run(['mds', 'import', blob, '--root', pki.rootPath, '--json']);
      assert.equal(r.code, 0, r.err);
      assert.equal(JSON.parse(r.out).entries, 2);
      assert.equal(await statusOf(KEY_B), 'ATTESTATION_KEY_COMPROMISE', 'a refused status is not overridden');
      assert.equal(await statusOf(KEY_E), 'NO_STATUS_REPORT');
      assert.equal(await statusOf(UNKNOWN), undefined);
      assert.equal(await statusOf(KEY_A), 'REVOKED', 'models the blob no longer lists are kept');
      assert.deepEqual(
        (await compromisedPasskeys(store.db)).map((p) => [p.id, p.status]),
        [[ids[1], 'ATTESTATION_KEY_COMPROMISE']],
      );
      assert.equal(await loadMetadataStatements(store.db), 4);
      const { MetadataService } = await webauthnServer();
      assert.equal((await MetadataService.getStatement(KEY_E))?.description, 'Key E');
    });
  });
}
