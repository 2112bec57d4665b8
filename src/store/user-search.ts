// User search for the staff console: the users of one organization whose eppn, name, display name
// or e-mail address starts with what was typed, case-insensitively.
//
// Each column is searched as a range on an index of migration 010 (`x >= q and x < q || U+10FFFF`),
// never with LIKE: the range has no wildcards to escape, both databases read it as an index range
// scan, and it gives the same answer on both. U+10FFFF is the highest code point, so every string
// that starts with q sorts inside the range, save one with U+10FFFF (a noncharacter) right after q.
// Both databases compare in code point order here: SQLite's BINARY collation, and PostgreSQL the
// "C" collation of the indexes and of the comparisons below, whatever the database's own collation
// (under en_US, say, a range is not a prefix: punctuation is ignored).
//
// Case: eppn and e-mail addresses are stored in lower case (src/directory/index.ts), so the query
// is lowered in JavaScript for them. Names are compared as lower(name) against lower(query), both
// lowered by the database: on PostgreSQL that is the database's own case mapping (Unicode under a
// UTF-8 locale); SQLite's lower() folds ASCII letters only, so on SQLite 'Ø' and 'ø' in a name are
// different letters ('ola' finds 'Ola Østby', 'øst' does not find 'Østby', 'Øst' does).
import { PostgresAdapter, sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { DB } from './schema.ts';

type Q = Kysely<DB> | Transaction<DB>;

export interface UserHit {
  id: number;
  sub: string;
  eppn: string;
  name: string;
  display_name: string | null;
  email: string | null;
  disabled_at: number | null;
  passkeys: number;
}

/** Above every other code point: `q + TOP` bounds the strings that start with q. */
const TOP = '\u{10FFFF}';

function isPostgres(db: Q): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** One searchable column as its index of migration 010 has it, and its query bounds. */
interface Prefix {
  column: RawBuilder<string>;
  from: RawBuilder<string>;
  to: RawBuilder<string>;
}

/** eppn, email, name and display_name, in that order. */
function prefixes(query: string, postgres: boolean): [Prefix, Prefix, Prefix, Prefix] {
  // On PostgreSQL, in code point order (the indexes are on the same expressions).
  const c = (e: RawBuilder<string>) => (postgres ? sql<string>`(${e} collate "C")` : e);
  const lowered = query.toLowerCase();
  const stored = (column: string): Prefix => ({
    column: c(sql.ref(column)),
    from: sql.val(lowered),
    to: sql.val(lowered + TOP),
  });
  const named = (column: string): Prefix => ({
    column: c(sql<string>`lower(${sql.ref(column)})`),
    from: sql<string>`lower(cast(${query} as text))`,
    to: sql<string>`lower(cast(${query + TOP} as text))`,
  });
  return [stored('eppn'), stored('email'), named('name'), named('display_name')];
}

/** Users of the organization whose eppn, name (or display_name) or email starts with `query`, case-insensitively; sorted by eppn; at most `limit`. An empty or blank query gives []. */
export async function searchUsers(db: Q, orgId: number, query: string, limit: number): Promise<UserHit[]> {
  const q = query.trim();
  // PostgreSQL text cannot hold NUL, so no stored value contains one: nothing to find on either.
  if (q === '' || q.includes('\u0000') || !(limit >= 1)) return [];
  const n = Math.floor(limit);
  const postgres = isPostgres(db);
  const inEppnOrder = (column: string) => (postgres ? sql`${sql.ref(column)} collate "C"` : sql.ref(column));
  const [eppn, email, name, displayName] = prefixes(q, postgres);
  const inRange = (p: Prefix) =>
    db
      .selectFrom('users')
      .select(['users.id', 'users.eppn'])
      .where('users.org_id', '=', orgId)
      .where(sql<boolean>`${p.column} >= ${p.from}`)
      .where(sql<boolean>`${p.column} < ${p.to}`);
  // The answer is the first n by eppn of the union of each column's first n. The eppn index gives
  // its matches in that order (n rows read). The other columns' matches are read from their
  // indexes (a range, however they fall in eppn order) and sorted: materialized, so the planner
  // cannot instead walk the eppn index hoping to meet them soon, which takes the whole
  // organization when they cluster late in eppn order (names and eppns are related).
  const rows = await db
    .with(
      (w) => w('by_email').materialized(),
      () => inRange(email),
    )
    .with(
      (w) => w('by_name').materialized(),
      () => inRange(name),
    )
    .with(
      (w) => w('by_display_name').materialized(),
      () => inRange(displayName),
    )
    .selectFrom('users')
    .select([
      'users.id',
      'users.sub',
      'users.eppn',
      'users.name',
      'users.display_name',
      'users.email',
      'users.disabled_at',
      'users.passkey_count as passkeys',
    ])
    .where('users.id', 'in', (eb) => {
      const firstOf = (table: 'by_email' | 'by_name' | 'by_display_name') =>
        eb
          .selectFrom((sub) =>
            sub
              .selectFrom(table)
              .select('id')
              .orderBy(inEppnOrder(`${table}.eppn`))
              .limit(n)
              .as('first'),
          )
          .select('first.id');
      return eb
        .selectFrom(inRange(eppn).orderBy(inEppnOrder('users.eppn')).limit(n).as('first'))
        .select('first.id')
        .union(firstOf('by_email'))
        .union(firstOf('by_name'))
        .union(firstOf('by_display_name'));
    })
    .orderBy(inEppnOrder('users.eppn'))
    .limit(n)
    .execute();
  return rows.map((r) => ({ ...r, passkeys: Number(r.passkeys) }));
}
