// Queries behind the user-existence checks. Each lookup is a single query whose shape does not
// depend on whether the user exists, so "exists" and "does not exist" cost the same. A client
// checking more organizations than one statement can name runs one query per chunk of them, every
// chunk whatever an earlier one found, for the same reason.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { chunks } from './chunks.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Whether the lookup finds a user in any chunk of the organizations; every chunk is asked. */
async function inAnyChunk(orgIds: number[], lookup: (chunk: number[]) => Promise<boolean>): Promise<boolean> {
  let found = false;
  for (const chunk of chunks(orgIds)) found = (await lookup(chunk)) || found;
  return found;
}

/**
 * The id of the organization owning realm, when clientId is configured to check it. An unknown
 * realm and a realm the client may not check give the same undefined, from the same query.
 */
export async function checkableOrganizationByRealm(
  db: Q,
  clientId: string,
  realm: string,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('organizations')
    .innerJoin('client_orgs', 'client_orgs.org_id', 'organizations.id')
    .select('organizations.id')
    .where('organizations.realm', '=', realm)
    .where('client_orgs.client_id', '=', clientId)
    .where('client_orgs.kind', '=', 'checkuser')
    .executeTakeFirst();
  return row?.id;
}

/**
 * Only the eppn is a condition (the organization is checked on the one row the unique eppn index
 * finds): with `org_id in (...)` beside it and no statistics yet, PostgreSQL read every user of the
 * organization by an org_id index to filter them by eppn.
 */
export async function eppnExists(db: Q, orgIds: number[], eppn: string): Promise<boolean> {
  return inAnyChunk(orgIds, async (chunk) => {
    const row = await db
      .selectFrom('users')
      .select((eb) => eb.case().when('org_id', 'in', chunk).then(1).else(0).end().as('in_orgs'))
      .where('eppn', '=', eppn)
      .executeTakeFirst();
    return Number(row?.in_orgs) === 1;
  });
}

export async function ninExists(db: Q, orgIds: number[], nin: string): Promise<boolean> {
  return inAnyChunk(orgIds, async (chunk) => {
    const row = await db
      .selectFrom('users')
      .select('id')
      .where('nin', '=', nin)
      .where('org_id', 'in', chunk)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  });
}

export async function namespacedIdExists(
  db: Q,
  orgIds: number[],
  namespace: string,
  identifier: string,
): Promise<boolean> {
  return inAnyChunk(orgIds, async (chunk) => {
    const row = await db
      .selectFrom('user_ids')
      .innerJoin('users', 'users.id', 'user_ids.user_id')
      .select('users.id')
      .where('user_ids.namespace', '=', namespace)
      .where('user_ids.identifier', '=', identifier)
      .where('users.org_id', 'in', chunk)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  });
}

/** Mail addresses are stored lower-cased (normalizeEmail); the caller passes the lower-cased form. */
export async function emailExists(db: Q, orgIds: number[], email: string): Promise<boolean> {
  return inAnyChunk(orgIds, async (chunk) => {
    const row = await db
      .selectFrom('users')
      .select('id')
      .where('email', '=', email)
      .where('org_id', 'in', chunk)
      .limit(1)
      .executeTakeFirst();
    return row !== undefined;
  });
}
