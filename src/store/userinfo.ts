// What claim release needs about one user and one client, in one round trip: userinfo is the
// hottest authenticated endpoint, and each query is a large share of its cost.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import type { User } from './directory.ts';
import { prepare } from './prepared.ts';

type Q = Kysely<DB> | Transaction<DB>;

export interface ReleaseClient {
  groups: string;
  userinfo_signed_response_alg: string | null;
}

export interface ReleaseSubject {
  user: User;
  /** undefined when the client does not exist */
  client: ReleaseClient | undefined;
  secondary: { namespace: string; identifier: string }[];
}

/**
 * The user with its secondary ids and the client's release settings; neither when the user or their
 * organization is disabled. One row per secondary id
 * (at least one row): the client is a left join on a constant, the ids a left join on the user.
 */
type ReleaseRow = User & {
  c_id: string | null;
  c_groups: string | null;
  c_alg: string | null;
  i_ns: string | null;
  i_id: string | null;
};

const releaseSubject = prepare<{ sub: string; clientId: string }, ReleaseRow>((db, p) =>
  db
    .selectFrom('users')
    // a user of a disabled organization is disabled alike (accountDisabled in src/directory/)
    .innerJoin('organizations', (join) =>
      join.onRef('organizations.id', '=', 'users.org_id').on('organizations.disabled_at', 'is', null),
    )
    .leftJoin('clients', (join) => join.on('clients.client_id', '=', p.clientId).on('clients.disabled_at', 'is', null))
    .leftJoin('user_ids', 'user_ids.user_id', 'users.id')
    .selectAll('users')
    .select([
      'clients.client_id as c_id',
      'clients.groups as c_groups',
      'clients.userinfo_signed_response_alg as c_alg',
      'user_ids.namespace as i_ns',
      'user_ids.identifier as i_id',
    ])
    .where('users.sub', '=', p.sub)
    .where('users.disabled_at', 'is', null)
    .orderBy('user_ids.namespace')
    .orderBy('user_ids.identifier'),
);

export async function findReleaseSubject(db: Q, sub: string, clientId: string): Promise<ReleaseSubject | undefined> {
  const rows = await releaseSubject(db, { sub, clientId });
  const first = rows[0];
  if (!first) return undefined;
  const { c_id, c_groups, c_alg, i_ns: _ns, i_id: _id, ...user } = first;
  return {
    user: user,
    client: c_id === null ? undefined : { groups: c_groups ?? '', userinfo_signed_response_alg: c_alg },
    secondary: rows
      .filter((r) => r.i_ns !== null && r.i_id !== null)
      .map((r) => ({ namespace: r.i_ns as string, identifier: r.i_id as string })),
  };
}
