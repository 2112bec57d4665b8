// Fixtures for the passkey administration tests: passkeys in bulk, tokens signed with the
// service's own key (for expired, wrong issuer or wrong audience cases), an app with a clock.
import { randomBytes, randomUUID } from 'node:crypto';
import { importJWK, SignJWT, type JWK } from 'jose';
import type { Insertable } from 'kysely';
import type { Store } from '../../src/store/index.ts';
import type { PasskeysTable } from '../../src/store/schema.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import { openStore } from '../../src/store/index.ts';
import { buildApp } from '../../src/app.ts';
import { keyring } from '../../src/crypto.ts';
import { TEST_SECRET, type TestContext } from '../helpers.ts';

export const ZERO_AAGUID = '00000000-0000-0000-0000-000000000000';
// A valid-looking COSE EC2 key is not needed: the admin API never reads public_key.
const PUBLIC_KEY = new Uint8Array(randomBytes(77));

export interface PasskeySpec {
  label?: string;
  aaguid?: string;
  createdAt?: number;
  lastUsedAt?: number | null;
  mfaVerified?: boolean;
}

export function passkeyRow(userId: number, orgId: number, spec: PasskeySpec = {}): Insertable<PasskeysTable> {
  return {
    user_id: userId,
    org_id: orgId,
    credential_id: new Uint8Array(randomBytes(16)),
    public_key: PUBLIC_KEY,
    sign_count: 0,
    transports: '["internal"]',
    label: spec.label ?? 'Passkey',
    aaguid: spec.aaguid ?? ZERO_AAGUID,
    backup_eligible: 0,
    backup_state: 0,
    mfa_verified: spec.mfaVerified === false ? 0 : 1,
    created_at: spec.createdAt ?? Date.UTC(2024, 0, 15, 10, 30),
    last_used_at: spec.lastUsedAt ?? null,
  };
}

/** count passkeys for the given users (round robin), inserted in multi-row batches; returns ids in order. */
export async function seedPasskeys(
  store: Store,
  orgId: number,
  userIds: number[],
  count: number,
  batch = 500,
): Promise<number[]> {
  const ids: number[] = [];
  await store.db.transaction().execute(async (trx) => {
    for (let start = 0; start < count; start += batch) {
      const rows = [];
      for (let i = start; i < Math.min(count, start + batch); i++)
        rows.push(passkeyRow(userIds[i % userIds.length]!, orgId, { label: `key ${i}` }));
      ids.push(...(await insertPasskeys(trx, rows)));
    }
  });
  return ids;
}

export interface TokenClaims {
  clientId: string;
  scope?: string;
  iss?: string;
  aud?: string;
  typ?: string;
  iat?: number;
  exp?: number;
}

/** A token signed with the service's active ES256 key, with claims of our choosing. */
export async function signedToken(ctx: TestContext, claims: TokenClaims): Promise<string> {
  const keySet = ctx.keyManager.current();
  const jwk = keySet.providerJwks.find((k) => k.kid === keySet.active.ES256) as JWK;
  const key = await importJWK(jwk, 'ES256');
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: claims.clientId, scope: claims.scope ?? 'passkey.read passkey.delete' })
    .setProtectedHeader({ alg: 'ES256', kid: jwk.kid!, typ: claims.typ ?? 'at+jwt' })
    .setIssuer(claims.iss ?? ctx.config.publicUrl)
    .setAudience(claims.aud ?? `${ctx.config.publicUrl}/2/passkey`)
    .setSubject(claims.clientId)
    .setJti(randomUUID())
    .setIssuedAt(claims.iat ?? now)
    .setExpirationTime(claims.exp ?? now + 300)
    .sign(key);
}

export interface ExtraApp {
  app: Awaited<ReturnType<typeof buildApp>>['app'];
  close(): Promise<void>;
}

/**
 * A second instance on the same database: its own connection, its own keyring derived from the
 * same secret, and a clock the test moves.
 */
export async function secondInstance(ctx: TestContext, now: () => number = Date.now): Promise<ExtraApp> {
  const store = await openStore(ctx.config.databaseUrl);
  const built = await buildApp({ config: ctx.config, store, keys: keyring(TEST_SECRET), now });
  await built.app.ready();
  return {
    app: built.app,
    async close() {
      await built.app.close();
      await store.close();
    },
  };
}

/** The URL of rel="next" in a Link header, as a path + query for inject(), or undefined. */
export function nextLink(link: string | string[] | undefined, publicUrl: string): string | undefined {
  if (link === undefined) return undefined;
  const value = Array.isArray(link) ? link.join(', ') : link;
  const m = /^<([^>]+)>; rel="next"$/.exec(value);
  if (!m) throw new Error(`unexpected Link header: ${value}`);
  if (!m[1]!.startsWith(`${publicUrl}/`)) throw new Error(`Link does not start with PUBLIC_URL: ${m[1]}`);
  return m[1]!.slice(publicUrl.length);
}

export { randomUUID };
