// WebAuthn challenges: single-use, expiring, kept server-side. They share the oidc_payloads
// table (typed rows with an expiry) so no extra table or cleanup job is needed.
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';
import { prepare } from './prepared.ts';

type Q = Kysely<DB> | Transaction<DB>;
const TYPE = 'WebAuthnChallenge';

// every passkey sign-in and registration writes one challenge and takes it back: prepared
const insert = prepare<{ challenge: string; payload: string; expiresAt: number }, never>((db, p) =>
  db.insertInto('oidc_payloads').values({
    type: TYPE,
    id: p.challenge,
    payload: p.payload,
    grant_id: null,
    user_code: null,
    uid: null,
    expires_at: p.expiresAt,
    consumed_at: null,
  }),
);

const take = prepare<{ challenge: string }, { payload: string; expires_at: number | null }>((db, p) =>
  db
    .deleteFrom('oidc_payloads')
    .where('type', '=', TYPE)
    .where('id', '=', p.challenge)
    .returning(['payload', 'expires_at']),
);

export async function insertChallenge(db: Q, challenge: string, payload: string, expiresAt: number): Promise<void> {
  await insert(db, { challenge, payload, expiresAt });
}

/** Removes the challenge and returns its payload if it existed and had not expired; a second
 * call for the same challenge finds nothing, so a response can be verified at most once. */
export async function takeChallenge(db: Q, challenge: string, now: number): Promise<string | undefined> {
  const [row] = await take(db, { challenge });
  if (!row || row.expires_at === null || row.expires_at <= now) return undefined;
  return row.payload;
}
