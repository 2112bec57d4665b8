// Storage for oidc-provider's artifacts (sessions, codes, grants, interactions, ...).
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { publish, type Topic } from './invalidation.ts';
import { prepare } from './prepared.ts';
import { endConsoleSessions } from './directory.ts';
import { deleteSessionSpsOfAccount } from './saml-sso.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Runs a change with its invalidations in one transaction (the caller's, if it is in one). */
function withInvalidations<T>(db: Q, change: (trx: Q) => Promise<T>, ...topics: [Topic, string][]): Promise<T> {
  const run = async (trx: Q) => {
    const result = await change(trx);
    for (const [topic, key] of topics) await publish(trx, topic, key);
    return result;
  };
  return db.isTransaction ? run(db) : db.transaction().execute(run);
}

/** The caches keyed by an artifact: access tokens (userinfo's claims) and grants. */
const ARTIFACT_TOPICS: Record<string, Topic> = { AccessToken: 'token', Grant: 'grant' };

export interface PayloadRow {
  payload: string;
  expires_at: number | null;
  consumed_at: number | null;
}

export async function upsertPayload(
  db: Q,
  row: {
    type: string;
    id: string;
    payload: string;
    grant_id: string | null;
    user_code: string | null;
    uid: string | null;
    expires_at: number | null;
    account_id?: string | null;
  },
): Promise<void> {
  // A grant saved again (a new consent, scopes changed) may release other claims to its tokens.
  if (row.type === 'Grant') return withInvalidations(db, (q) => upsertRow(q, row), ['grant', row.id]);
  await upsertRow(db, row);
}

type UpsertArgs = {
  type: string;
  id: string;
  payload: string;
  grant_id: string | null;
  user_code: string | null;
  uid: string | null;
  expires_at: number | null;
  account_id: string | null;
};

// every artifact the authorization server saves (interactions, sessions, grants, codes, tokens): prepared
const upsertPrepared = prepare<UpsertArgs, never>((db, p) =>
  db
    .insertInto('oidc_payloads')
    .values({
      type: p.type,
      id: p.id,
      payload: p.payload,
      grant_id: p.grant_id,
      user_code: p.user_code,
      uid: p.uid,
      expires_at: p.expires_at,
      account_id: p.account_id,
      consumed_at: null,
    })
    .onConflict((oc) =>
      oc.columns(['type', 'id']).doUpdateSet({
        payload: p.payload,
        grant_id: p.grant_id,
        user_code: p.user_code,
        uid: p.uid,
        expires_at: p.expires_at,
        account_id: p.account_id,
      }),
    ),
);

async function upsertRow(db: Q, row: Parameters<typeof upsertPayload>[1]): Promise<void> {
  await upsertPrepared(db, {
    type: row.type,
    id: row.id,
    payload: row.payload,
    grant_id: row.grant_id,
    user_code: row.user_code,
    uid: row.uid,
    expires_at: row.expires_at,
    account_id: row.account_id ?? null,
  });
}

type PayloadKey = 'id' | 'uid' | 'user_code';

// every token, code and session lookup of the authorization server: prepared, one per key column
const payloadBy = (column: PayloadKey) =>
  prepare<{ type: string; value: string }, PayloadRow>((db, p) =>
    db
      .selectFrom('oidc_payloads')
      .select(['payload', 'expires_at', 'consumed_at'])
      .where('type', '=', p.type)
      .where(column, '=', p.value),
  );
const payloadLookups = { id: payloadBy('id'), uid: payloadBy('uid'), user_code: payloadBy('user_code') };

export async function findPayload(
  db: Q,
  type: string,
  column: PayloadKey,
  value: string,
): Promise<PayloadRow | undefined> {
  const [row] = await payloadLookups[column](db, { type, value });
  return row;
}

/**
 * Marks a one-time artifact (authorization code, rotating refresh token, ...) used. One conditional
 * update: of concurrent callers exactly one sees a row change and gets true; the others, and any
 * caller after it, get false.
 */
export async function consumePayload(db: Q, type: string, id: string, at: number): Promise<boolean> {
  const r = await db
    .updateTable('oidc_payloads')
    .set({ consumed_at: at })
    .where('type', '=', type)
    .where('id', '=', id)
    .where('consumed_at', 'is', null)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function payloadGrantId(db: Q, type: string, id: string): Promise<string | null | undefined> {
  const row = await db
    .selectFrom('oidc_payloads')
    .select('grant_id')
    .where('type', '=', type)
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.grant_id;
}

export async function destroyPayload(db: Q, type: string, id: string): Promise<void> {
  const remove = (q: Q) => q.deleteFrom('oidc_payloads').where('type', '=', type).where('id', '=', id).execute();
  const topic = ARTIFACT_TOPICS[type];
  if (!topic) return void (await remove(db));
  await withInvalidations(db, remove, [topic, id]);
}

export async function revokePayloadsByGrant(db: Q, grantId: string): Promise<void> {
  const remove = (q: Q) => q.deleteFrom('oidc_payloads').where('grant_id', '=', grantId).execute();
  await withInvalidations(db, remove, ['grant', grantId]);
}

/** Revokes a grant: the grant itself and everything issued under it (codes, tokens), in one statement. */
export async function revokeGrant(db: Q, grantId: string): Promise<void> {
  const remove = (q: Q) =>
    q
      .deleteFrom('oidc_payloads')
      .where((eb) => eb.or([eb('grant_id', '=', grantId), eb.and([eb('type', '=', 'Grant'), eb('id', '=', grantId)])]))
      .execute();
  await withInvalidations(db, remove, ['grant', grantId]);
}

export async function deleteExpiredPayloads(db: Q, now: number): Promise<number> {
  const r = await db.deleteFrom('oidc_payloads').where('expires_at', '<', now).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** The live sessions of an account (payload JSON), for ending them. */
export async function findSessionsByAccount(db: Q, accountId: string, now: number): Promise<string[]> {
  const rows = await db
    .selectFrom('oidc_payloads')
    .select('payload')
    .where('type', '=', 'Session')
    .where('account_id', '=', accountId)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .execute();
  return rows.map((r) => r.payload);
}

/**
 * Removes everything the authorization server holds for an account: its sessions, its grants and
 * all that was issued under them (codes, access and refresh tokens), in one statement; with the
 * sessions go the SAML SPs recorded in them (saml_session_sps).
 */
export async function deleteAccountArtifacts(db: Q, accountId: string): Promise<number> {
  const remove = async (q: Q) => {
    // the account's console sessions end with its other sessions, and so does what single logout
    // kept of the SAML sign-ins in them
    await endConsoleSessions(q, accountId);
    await deleteSessionSpsOfAccount(q, accountId);
    return deleteArtifactsOfAccount(q, accountId);
  };
  return withInvalidations(db, remove, ['user', accountId]);
}

async function deleteArtifactsOfAccount(db: Q, accountId: string): Promise<number> {
  const r = await db
    .deleteFrom('oidc_payloads')
    .where((eb) =>
      eb.or([
        eb('account_id', '=', accountId),
        eb(
          'grant_id',
          'in',
          eb
            .selectFrom('oidc_payloads as g')
            .select('g.id')
            .where('g.type', '=', 'Grant')
            .where('g.account_id', '=', accountId),
        ),
      ]),
    )
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * Removes every artifact issued to a client (grants, codes, access and refresh tokens, device codes)
 * when the client is removed. The client id sits inside the payload, so this reads the payloads:
 * an operator's rare action, not a request path.
 */
export async function deleteClientArtifacts(db: Q, clientId: string, dialect: 'sqlite' | 'postgres'): Promise<number> {
  const clientOf =
    dialect === 'postgres'
      ? sql<string>`(payload::json ->> 'clientId')`
      : sql<string>`json_extract(payload, '$.clientId')`;
  const remove = async (q: Q) => {
    const r = await q
      .deleteFrom('oidc_payloads')
      .where('type', '!=', 'Session')
      .where(clientOf, '=', clientId)
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  };
  return withInvalidations(db, remove, ['client', clientId]);
}

/** Deletes an account's grants for one client with everything issued under them; returns how many grants went. */
export async function deleteAccountGrantsOfClient(
  db: Q,
  accountId: string,
  clientId: string,
  dialect: 'sqlite' | 'postgres',
): Promise<number> {
  const clientOf =
    dialect === 'postgres'
      ? sql<string>`(payload::json ->> 'clientId')`
      : sql<string>`json_extract(payload, '$.clientId')`;
  const grants = await db
    .selectFrom('oidc_payloads')
    .select('id')
    .where('type', '=', 'Grant')
    .where('account_id', '=', accountId)
    .where(clientOf, '=', clientId)
    .execute();
  for (const { id } of grants) await revokeGrant(db, id);
  return grants.length;
}
