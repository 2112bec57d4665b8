// What replacing the master secret touches in the database: every value sealed under it, read and
// written back in one transaction, and the keys kept across rotations (migration 028). Sealing and
// opening happen above this module; here are only the rows.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from './schema.ts';
import type { Store } from './index.ts';

type Q = Kysely<DB> | Transaction<DB>;

/** Where a sealed value lives: its table, the column, and the row's key. */
export type SealedPlace =
  | { table: 'signing_keys'; column: 'private_jwk'; id: string }
  | { table: 'saml_keys'; column: 'private_key'; id: string }
  | { table: 'webhooks'; column: 'secret' | 'previous_secret'; id: number }
  | { table: 'ssf_streams'; column: 'authorization_header'; id: string }
  | { table: 'ldap_directories'; column: 'bind_password'; id: number }
  | { table: 'upstream_providers'; column: 'oidc_client_secret' | 'oidc_private_jwk'; id: string }
  | { table: 'kept_keys'; column: 'sealed'; id: string };

export type SealedValue = SealedPlace & { value: string };

/** Every sealed value held in a column of its own. */
export async function listSealedValues(db: Q): Promise<SealedValue[]> {
  const out: SealedValue[] = [];
  for (const r of await db.selectFrom('signing_keys').select(['kid', 'private_jwk']).execute())
    out.push({ table: 'signing_keys', column: 'private_jwk', id: r.kid, value: r.private_jwk });
  for (const r of await db.selectFrom('saml_keys').select(['kid', 'private_key']).execute())
    out.push({ table: 'saml_keys', column: 'private_key', id: r.kid, value: r.private_key });
  for (const r of await db.selectFrom('webhooks').select(['id', 'secret', 'previous_secret']).execute()) {
    out.push({ table: 'webhooks', column: 'secret', id: Number(r.id), value: r.secret });
    if (r.previous_secret !== null)
      out.push({ table: 'webhooks', column: 'previous_secret', id: Number(r.id), value: r.previous_secret });
  }
  const streams = await db
    .selectFrom('ssf_streams')
    .select(['id', 'authorization_header'])
    .where('authorization_header', 'is not', null)
    .execute();
  for (const r of streams)
    out.push({ table: 'ssf_streams', column: 'authorization_header', id: r.id, value: r.authorization_header! });
  for (const r of await db.selectFrom('ldap_directories').select(['id', 'bind_password']).execute())
    out.push({ table: 'ldap_directories', column: 'bind_password', id: Number(r.id), value: r.bind_password });
  const upstreams = await db
    .selectFrom('upstream_providers')
    .select(['id', 'oidc_client_secret', 'oidc_private_jwk'])
    .execute();
  for (const r of upstreams) {
    if (r.oidc_client_secret !== null)
      out.push({ table: 'upstream_providers', column: 'oidc_client_secret', id: r.id, value: r.oidc_client_secret });
    if (r.oidc_private_jwk !== null)
      out.push({ table: 'upstream_providers', column: 'oidc_private_jwk', id: r.id, value: r.oidc_private_jwk });
  }
  for (const r of await db.selectFrom('kept_keys').select(['name', 'sealed']).execute())
    out.push({ table: 'kept_keys', column: 'sealed', id: r.name, value: r.sealed });
  return out;
}

export async function updateSealedValue(db: Q, place: SealedPlace, value: string): Promise<void> {
  switch (place.table) {
    case 'signing_keys':
      await db.updateTable('signing_keys').set({ private_jwk: value }).where('kid', '=', place.id).execute();
      return;
    case 'saml_keys':
      await db.updateTable('saml_keys').set({ private_key: value }).where('kid', '=', place.id).execute();
      return;
    case 'webhooks':
      await db
        .updateTable('webhooks')
        .set(place.column === 'secret' ? { secret: value } : { previous_secret: value })
        .where('id', '=', place.id)
        .execute();
      return;
    case 'ssf_streams':
      await db.updateTable('ssf_streams').set({ authorization_header: value }).where('id', '=', place.id).execute();
      return;
    case 'ldap_directories':
      await db.updateTable('ldap_directories').set({ bind_password: value }).where('id', '=', place.id).execute();
      return;
    case 'upstream_providers':
      await db
        .updateTable('upstream_providers')
        .set(place.column === 'oidc_client_secret' ? { oidc_client_secret: value } : { oidc_private_jwk: value })
        .where('id', '=', place.id)
        .execute();
      return;
    case 'kept_keys':
      await db.updateTable('kept_keys').set({ sealed: value }).where('name', '=', place.id).execute();
      return;
  }
}

/** Queued e-mail whose data carries a sealed recovery link (src/webauthn/mail-links.ts). */
export async function listMailWithLinks(db: Q): Promise<{ id: number; data: string }[]> {
  const rows = await db
    .selectFrom('events')
    .select(['id', 'data'])
    .where('type', 'in', ['mail.invitation', 'mail.reminder', 'mail.recovery'])
    .execute();
  return rows.map((r) => ({ id: Number(r.id), data: r.data }));
}

export async function updateEventData(db: Q, id: number, data: string): Promise<void> {
  await db.updateTable('events').set({ data }).where('id', '=', id).execute();
}

/** The kept keys, sealed (src/crypto.ts, KEPT_KEYS). */
export async function listKeptKeys(db: Q): Promise<{ name: string; sealed: string }[]> {
  return db.selectFrom('kept_keys').select(['name', 'sealed']).execute();
}

export async function insertKeptKey(db: Q, name: string, sealed: string, at: number): Promise<void> {
  await db.insertInto('kept_keys').values({ name, sealed, created_at: at }).execute();
}

/**
 * Runs fn holding the signing-key and SAML-key locks (src/store/keys.ts, saml.ts), so no instance
 * adds a key sealed under the old secret while the values are sealed again; SQLite serializes
 * writers by itself.
 */
export function inResealTransaction<T>(store: Store, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return store.db.transaction().execute(async (trx) => {
    if (store.dialect === 'postgres') {
      await sql`select pg_advisory_xact_lock(7301001)`.execute(trx);
      await sql`select pg_advisory_xact_lock(7301017)`.execute(trx);
    }
    return fn(trx);
  });
}
