// npm run bench -- ldap [--users <n>] [--postgres]
// LDAP sync (docs/ldap.md): a real OpenLDAP (Debian slapd, started here on a free loopback port
// with its own configuration in a temp dir) loaded with <n> users (default 100,000), synced into a
// fresh database: the first (full) run, then an incremental run with nothing changed, against the
// goals (first run under 2 minutes, the unchanged incremental run under 5 seconds).
import { migratedDatabase, TEST_SECRET } from '../test/helpers.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers } from '../test/ldap/slapd.ts';
import { openStore } from '../src/store/index.ts';
import { keyring } from '../src/crypto.ts';
import { addOrganization } from '../src/directory/index.ts';
import { addLdapDirectory } from '../src/directory/ldap-directories.ts';
import { syncLdapDirectory } from '../src/ldap/sync.ts';

const GOALS = { first: 120_000, incremental: 5_000 };

export async function main(args: string[]): Promise<void> {
  const at = args.indexOf('--users');
  const users = at >= 0 ? Number(args[at + 1]) : 100_000;
  if (!Number.isSafeInteger(users) || users < 1) throw new Error('--users must be a positive number');
  const dialect = args.includes('--postgres') ? 'postgres' : 'sqlite';
  if (dialect === 'postgres') process.env.TEST_POSTGRES_URL ??= 'postgres://postgres@127.0.0.1:5432/postgres';
  const loading = Date.now();
  const slapd = await startSlapd({ users: testUsers(users) });
  console.log(`slapd loaded with ${users} users in ${((Date.now() - loading) / 1000).toFixed(1)} s`);
  const db = await migratedDatabase(dialect);
  const store = await openStore(db.url);
  const keys = keyring(TEST_SECRET);
  try {
    await addOrganization(store, { id: 1, realm: 'example.org', name: 'Example' });
    const d = await addLdapDirectory(store, keys, {
      orgId: 1,
      url: slapd.url,
      bindDn: SERVICE_DN,
      bindPassword: SERVICE_PASSWORD,
      baseDn: PEOPLE,
      filter: '(objectClass=inetOrgPerson)',
      map: ['affiliation=employeeType'],
    });
    for (const [run, goal] of [
      ['first', GOALS.first],
      ['incremental', GOALS.incremental],
    ] as const) {
      const s = await syncLdapDirectory(store, keys, d.id);
      const ok = s.duration_ms <= goal ? 'within' : 'OVER';
      console.log(
        `${dialect} ${run} (${s.mode}) sync of ${s.entries} entries: ${(s.duration_ms / 1000).toFixed(2)} s ` +
          `(goal ${goal / 1000} s, ${ok}); created ${s.created}, updated ${s.updated}, unchanged ${s.unchanged}, ` +
          `rejected ${s.rejected}; ${Math.round(s.entries / Math.max(s.duration_ms / 1000, 0.001))} entries/s`,
      );
    }
  } finally {
    await store.close();
    await db.drop();
    await slapd.stop();
  }
}
