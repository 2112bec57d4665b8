// Claim release through HTTP: every authorized-group set x granted-scope set, on /openid/userinfo
// (OIDC shape) and on the legacy /userinfo (legacy shape), against an expectation written out here.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { decodeJwt } from 'jose';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, PUBLIC_URL, type TestContext } from '../helpers.ts';
import { insertUserId } from '../../src/store/directory.ts';
import { setPhoto } from '../../src/directory/photos.ts';
import { exchangeCode, mintUserToken } from './fixtures.ts';

const NS = `${PUBLIC_URL}/claims`;
const GROUPS = [
  'userid-idp',
  'userid-nin',
  'userid-edugain',
  'userid-social',
  'eidas',
  'email',
  'userinfo-name',
  'userinfo-photo',
];

/** What each scope asks for (the documented mapping). */
const SCOPE_GROUPS: Record<string, string[]> = {
  openid: [],
  profile: ['userinfo-name', 'userinfo-photo'],
  ...Object.fromEntries(GROUPS.map((g) => [g, [g]])),
};

const EPPN = 'alice@example.org';
const NIN = '01017012345';
const EMAIL = 'alice@mail.example.org';
const NAME = 'Alice Example';

/** The namespaced ids each group releases for the seeded user. */
const IDS: Record<string, string[]> = {
  'userid-idp': [`idp:${EPPN}`],
  'userid-nin': [`nin:${NIN}`],
  'userid-edugain': ['edugain:alice@edugain.example'],
  'userid-social': ['facebook:10001234', 'google:998877'],
  eidas: ['eidas:NO/SE/7c3f'],
};

function released(authorized: string[], scopes: string[]): Set<string> {
  const asked = new Set(scopes.flatMap((s) => SCOPE_GROUPS[s] ?? []));
  return new Set(authorized.filter((g) => asked.has(g)));
}

function expectedOidc(sub: string, photo: string, groups: Set<string>): Record<string, unknown> {
  const out: Record<string, unknown> = { sub };
  const sec = [...groups].flatMap((g) => IDS[g] ?? []).sort();
  if (sec.length) {
    out[`${NS}/userid_sec`] = sec;
    out['idp-userid_sec'] = sec;
    out['connect-userid_sec'] = sec;
  }
  if (groups.has('userid-idp')) out[`${NS}/eduPersonPrincipalName`] = EPPN;
  if (groups.has('userid-nin')) out[`${NS}/nin`] = NIN;
  if (groups.has('email')) Object.assign(out, { email: EMAIL, email_verified: false });
  if (groups.has('userinfo-name')) out.name = NAME;
  if (groups.has('userinfo-photo')) out.picture = `${PUBLIC_URL}/userinfo/v1/user/media/${photo}`;
  return out;
}

function expectedLegacy(sub: string, photo: string, groups: Set<string>, clientId: string) {
  const user: Record<string, unknown> = { userid: sub };
  const sec = [...groups].flatMap((g) => IDS[g] ?? []).sort();
  if (sec.length) user.userid_sec = sec;
  if (groups.has('userinfo-name')) user.name = NAME;
  if (groups.has('email')) user.email = EMAIL;
  if (groups.has('userinfo-photo')) user.profilephoto = photo;
  return { user, audience: clientId };
}

/** Sorts the id arrays so the comparison does not depend on their order. */
function normalize(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body))
    out[k] = Array.isArray(v)
      ? [...v].sort()
      : v && typeof v === 'object'
        ? normalize(v as Record<string, unknown>)
        : v;
  return out;
}

const AUTHORIZED_SETS: [string, string[]][] = [
  ['no groups', []],
  ...GROUPS.map((g): [string, string[]] => [g, [g]]),
  ['all groups', GROUPS],
];
const SCOPE_SETS: string[][] = [
  ['openid'],
  ...[...GROUPS, 'profile'].map((s) => ['openid', s]),
  ['openid', 'profile', ...GROUPS],
];

for (const dialect of dialects()) {
  describe(`claim release matrix (${dialect})`, () => {
    let ctx: TestContext;
    let sub: string;
    let photo: string;
    const clients = new Map<string, { clientId: string; secret: string }>();

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      const user = await seedUser(ctx, 1, EPPN, { name: NAME, email: EMAIL, nin: NIN });
      sub = user.sub;
      await insertUserId(ctx.store.db, user.id, 'edugain', 'alice@edugain.example');
      await insertUserId(ctx.store.db, user.id, 'facebook', '10001234');
      await insertUserId(ctx.store.db, user.id, 'google', '998877');
      await insertUserId(ctx.store.db, user.id, 'eidas', 'NO/SE/7c3f');
      // namespaces without a group are never released
      await insertUserId(ctx.store.db, user.id, 'unlisted', 'secret-id');
      const image = await sharp({ create: { width: 200, height: 200, channels: 3, background: '#3366cc' } })
        .png()
        .toBuffer();
      photo = (await setPhoto(ctx.store, user, image)).handle;
      for (const [label, groups] of AUTHORIZED_SETS) {
        clients.set(
          label,
          await seedClient(ctx, { name: label, groups, redirectUris: ['https://rp.example.com/callback'] }),
        );
      }
    });
    after(() => ctx.close());

    const get = (url: string, token: string) =>
      ctx.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });

    for (const [label, authorized] of AUTHORIZED_SETS) {
      it(`releases exactly the expected claims for a client with ${label}, for every granted scope set`, async () => {
        const { clientId } = clients.get(label)!;
        for (const scopes of SCOPE_SETS) {
          const token = await mintUserToken(ctx, { accountId: sub, clientId, scope: scopes.join(' ') });
          const groups = released(authorized, scopes);
          const what = `${label} x "${scopes.join(' ')}"`;

          const oidc = await get('/openid/userinfo', token);
          assert.equal(oidc.statusCode, 200, what);
          assert.match(oidc.headers['content-type'] as string, /^application\/json/, what);
          assert.deepEqual(normalize(oidc.json()), expectedOidc(sub, photo, groups), `OIDC ${what}`);
          // POST is answered by oidc-provider's own userinfo action: GET's short path must agree
          const viaProvider = await ctx.app.inject({
            method: 'POST',
            url: '/openid/userinfo',
            headers: { authorization: `Bearer ${token}` },
          });
          assert.equal(viaProvider.statusCode, 200, what);
          assert.deepEqual(viaProvider.json(), oidc.json(), `provider path ${what}`);

          const legacy = await get('/userinfo', token);
          assert.equal(legacy.statusCode, 200, what);
          assert.deepEqual(normalize(legacy.json()), expectedLegacy(sub, photo, groups, clientId), `legacy ${what}`);
        }
      });
    }

    it('releases only what both the groups and the scopes allow when both are partial', async () => {
      const c = await seedClient(ctx, {
        groups: ['userid-idp', 'userid-nin', 'email'],
        redirectUris: ['https://rp.example.com/callback'],
      });
      const token = await mintUserToken(ctx, {
        accountId: sub,
        clientId: c.clientId,
        scope: 'openid userid-idp profile userid-social',
      });
      const body = (await get('/openid/userinfo', token)).json();
      assert.deepEqual(normalize(body), expectedOidc(sub, photo, new Set(['userid-idp'])));
    });

    it('never releases ids of namespaces without a group, and sub is the opaque id', async () => {
      const { clientId } = clients.get('all groups')!;
      const token = await mintUserToken(ctx, {
        accountId: sub,
        clientId,
        scope: ['openid', 'profile', ...GROUPS].join(' '),
      });
      const body = (await get('/openid/userinfo', token)).json();
      assert.ok(!JSON.stringify(body).includes('secret-id'));
      assert.match(body.sub, /^[0-9a-f-]{36}$/);
      assert.ok(!body.sub.includes('alice'));
    });

    it('holds the contract example: groups photo, name, idp with "userinfo-photo userinfo-name" give userid, profilephoto and name', async () => {
      const c = await seedClient(ctx, {
        groups: ['userinfo-photo', 'userinfo-name', 'userid-idp'],
        redirectUris: ['https://rp.example.com/callback'],
      });
      const token = await mintUserToken(ctx, {
        accountId: sub,
        clientId: c.clientId,
        scope: 'userinfo-photo userinfo-name',
      });
      const res = await get('/userinfo', token);
      assert.equal(res.statusCode, 200);
      const body = res.json();
      assert.deepEqual(Object.keys(body.user).sort(), ['name', 'profilephoto', 'userid']);
      assert.equal(body.user.userid, sub);
      assert.equal(body.user.name, NAME);
      assert.equal(body.user.profilephoto, photo);
      assert.equal(body.audience, c.clientId);
    });

    it('legacy audience is the client the token was issued to, not any other', async () => {
      const a = clients.get('userinfo-name')!;
      const b = clients.get('email')!;
      const ta = await mintUserToken(ctx, { accountId: sub, clientId: a.clientId, scope: 'openid userinfo-name' });
      const tb = await mintUserToken(ctx, { accountId: sub, clientId: b.clientId, scope: 'openid email' });
      assert.equal((await get('/userinfo', ta)).json().audience, a.clientId);
      assert.equal((await get('/userinfo', tb)).json().audience, b.clientId);
    });

    it('omits claims the user has no value for (no email, no nin, no photo)', async () => {
      const bare = await seedUser(ctx, 1, 'bob@example.org', { name: 'Bob' });
      const { clientId } = clients.get('all groups')!;
      const token = await mintUserToken(ctx, {
        accountId: bare.sub,
        clientId,
        scope: ['openid', 'profile', ...GROUPS].join(' '),
      });
      const body = (await get('/openid/userinfo', token)).json();
      assert.deepEqual(body, {
        sub: bare.sub,
        name: 'Bob',
        [`${NS}/userid_sec`]: ['idp:bob@example.org'],
        'idp-userid_sec': ['idp:bob@example.org'],
        'connect-userid_sec': ['idp:bob@example.org'],
        [`${NS}/eduPersonPrincipalName`]: 'bob@example.org',
      });
      const legacy = (await get('/userinfo', token)).json();
      assert.deepEqual(legacy.user, { userid: bare.sub, userid_sec: ['idp:bob@example.org'], name: 'Bob' });
    });

    it('the ID token agrees with userinfo for every claim both carry', async () => {
      const c = clients.get('all groups')!;
      const scope = ['openid', 'profile', ...GROUPS].join(' ');
      const wanted = ['name', 'email', 'picture', `${NS}/userid_sec`, `${NS}/eduPersonPrincipalName`, `${NS}/nin`];
      const tokens = await exchangeCode(ctx, {
        accountId: sub,
        clientId: c.clientId,
        secret: c.secret,
        scope,
        redirectUri: 'https://rp.example.com/callback',
        claims: { id_token: Object.fromEntries(wanted.map((n) => [n, null])) },
      });
      const idToken = decodeJwt(tokens.id_token) as Record<string, unknown>;
      const userinfo = (await get('/openid/userinfo', tokens.access_token)).json();
      assert.equal(idToken.sub, userinfo.sub);
      for (const name of wanted) assert.deepEqual(idToken[name], userinfo[name], name);
      // the comparison above must not pass on two absent claims
      assert.equal(idToken.name, NAME);
      assert.equal(idToken[`${NS}/nin`], NIN);
      assert.equal((idToken[`${NS}/userid_sec`] as string[]).length, 6);
    });

    it('the ID token of a client without groups carries no user data beyond sub', async () => {
      const c = clients.get('no groups')!;
      const tokens = await exchangeCode(ctx, {
        accountId: sub,
        clientId: c.clientId,
        secret: c.secret,
        scope: 'openid',
        redirectUri: 'https://rp.example.com/callback',
        claims: { id_token: { name: null, email: null, [`${NS}/userid_sec`]: null } },
      });
      const idToken = decodeJwt(tokens.id_token) as Record<string, unknown>;
      assert.equal(idToken.sub, sub);
      for (const name of ['name', 'email', `${NS}/userid_sec`]) assert.equal(idToken[name], undefined, name);
    });

    it('discovery lists the claims and scopes that are served', async () => {
      const d = (await ctx.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
      for (const claim of [
        'sub',
        'name',
        'email',
        'email_verified',
        'picture',
        `${NS}/userid_sec`,
        'idp-userid_sec',
        'connect-userid_sec',
        `${NS}/eduPersonPrincipalName`,
        `${NS}/nin`,
      ]) {
        assert.ok(d.claims_supported.includes(claim), claim);
      }
      for (const scope of ['openid', 'profile', ...GROUPS]) assert.ok(d.scopes_supported.includes(scope), scope);
    });
  });
}
