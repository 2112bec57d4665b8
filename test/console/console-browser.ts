// Staff in the console through HTTP, as the console tests drive it: a passkey added to a user, and
// a sign-in through the ordinary sign-in pages (the console's relying party) with that passkey.
import assert from 'node:assert/strict';
import { cookieBrowser, p256Credential, PUBLIC_URL, type TestContext, type TestCredential } from '../helpers.ts';
import { assertion } from '../authenticator.ts';
import { insertPasskeys } from '../../src/store/passkeys.ts';
import type { User } from '../../src/store/directory.ts';
import { ZERO_AAGUID } from '../../src/webauthn/formats.ts';

export type Browser = ReturnType<typeof cookieBrowser>;

export const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
export const local = (location: unknown) => String(location).replace(PUBLIC_URL, '');

export async function addKey(
  ctx: TestContext,
  user: User,
  label = 'Key',
  opts: { uv?: boolean; synced?: boolean } = {},
) {
  const key = p256Credential();
  const [id] = await insertPasskeys(ctx.store.db, [
    {
      user_id: user.id,
      org_id: user.org_id,
      credential_id: key.id,
      public_key: key.cose,
      sign_count: 0,
      transports: '[]',
      label,
      aaguid: ZERO_AAGUID,
      backup_eligible: opts.synced === false ? 0 : 1,
      backup_state: opts.synced === false ? 0 : 1,
      mfa_verified: opts.uv === false ? 0 : 1,
      created_at: Date.now() - 86_400_000,
      last_used_at: null,
    },
  ]);
  return { key, id: id! };
}

/** Follows redirects from url until a page answers (or the next hop leaves the service). */
export async function follow(b: Browser, url: string) {
  let res = await b.get(url);
  for (let hops = 0; (res.statusCode === 302 || res.statusCode === 303) && hops < 10; hops++) {
    const next = String(res.headers.location);
    if (!next.startsWith('/') && !next.startsWith(PUBLIC_URL)) break;
    res = await b.get(local(next));
  }
  return res;
}

let counter = 0;

/** Signs staff in to the console with their passkey; returns the browser and the page reached. */
export async function signIn(ctx: TestContext, staff: User, key: TestCredential, start = '/console') {
  const b = cookieBrowser(ctx.app);
  const page = await follow(b, start);
  assert.equal(page.statusCode, 200, page.body.slice(0, 300));
  const uid = /\/interaction\/([^/"]+)\/passkey"/.exec(page.body)![1]!;
  const options = await b.post(`/interaction/${uid}/passkey/options`, {}, { 'x-csrf-token': csrfOf(page.body) });
  const response = assertion(key, options.json().challenge, ++counter, { userHandle: staff.sub, flags: 0x05 });
  const signedIn = await b.post(`/interaction/${uid}/passkey`, {
    _csrf: csrfOf(page.body),
    response: JSON.stringify(response),
  });
  assert.equal(signedIn.statusCode, 303, signedIn.body.slice(0, 300));
  const landed = await follow(b, local(signedIn.headers.location));
  return { b, landed };
}
