// The extended userinfo (/userinfo/v1/userinfo), the user lookup (/userinfo/v1/lookup/<id>) and
// the groups API (/groups/...) as clients see them: release per attribute group and scope, the
// organization grant, group visibility, members, group types and the token errors.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import {
  dialects,
  startTestApp,
  seedOrg,
  seedUser,
  seedClient,
  clientToken,
  PUBLIC_URL,
  type TestContext,
} from '../helpers.ts';
import { exchangeCode, mintUserToken } from './fixtures.ts';
import { grantOrganizations } from '../../src/clients/index.ts';

const REDIRECT = 'https://rp.example.com/callback';

interface Seeded {
  id: number;
  sub: string;
}

async function directoryUser(ctx: TestContext, orgId: number, eppn: string, name: string): Promise<Seeded> {
  const user = await seedUser(ctx, orgId, eppn, { name, email: eppn, nin: '01017012345' });
  await ctx.store.db
    .updateTable('users')
    .set({
      given_name: name.split(' ')[0]!,
      family_name: name.split(' ')[1]!,
      affiliation: 'employee faculty member',
      primary_affiliation: 'faculty',
      org_unit: 'Department of Mathematics',
      title: 'Lecturer',
      employee_number: '035016',
      entitlement: 'urn:mace:example.org:library urn:mace:example.org:lab',
    })
    .where('id', '=', user.id)
    .execute();
  return { id: user.id, sub: user.sub };
}

async function group(ctx: TestContext, orgId: number, type: string, name: string, members: [Seeded, string][]) {
  const uid = randomUUID();
  const now = Date.now();
  await ctx.store.db
    .insertInto('groups')
    .values({ uid, org_id: orgId, external_id: null, display_name: name, type, created_at: now, updated_at: now })
    .execute();
  const row = await ctx.store.db.selectFrom('groups').select('id').where('uid', '=', uid).executeTakeFirstOrThrow();
  for (const [user, role] of members)
    await ctx.store.db.insertInto('group_members').values({ group_id: row.id, user_id: user.id, role }).execute();
  return uid;
}

for (const dialect of dialects()) {
  describe(`directory attributes and groups API (${dialect})`, () => {
    let ctx: TestContext;
    let alice: Seeded;
    let bob: Seeded;
    let olga: Seeded;
    let math: string;
    let unit: string;
    let club: string;
    let otherClass: string;

    const get = (url: string, token?: string) =>
      ctx.app.inject({ method: 'GET', url, headers: token ? { authorization: `Bearer ${token}` } : {} });

    /** A sign-in client holding `groups`, and a user token granted `scope`, through the token endpoint. */
    async function userToken(user: Seeded, groups: string[], scope: string): Promise<string> {
      const c = await seedClient(ctx, { groups, redirectUris: [REDIRECT] });
      const answer = await exchangeCode(ctx, {
        accountId: user.sub,
        clientId: c.clientId,
        secret: c.secret,
        scope,
        redirectUri: REDIRECT,
      });
      return answer.access_token;
    }

    async function lookupToken(groups: string[], orgs: number[], scope = 'system-all-users'): Promise<string> {
      const c = await seedClient(ctx, { groups, scopes: ['system-all-users', 'passkey.read'] });
      if (orgs.length) await grantOrganizations(ctx.store, c.clientId, orgs, 'admin');
      return clientToken(ctx, c.clientId, c.secret, scope);
    }

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx);
      await seedOrg(ctx, 2, 'other.example.net', 'Other College');
      alice = await directoryUser(ctx, 1, 'alice@example.org', 'Alice Example');
      bob = await directoryUser(ctx, 1, 'bob@example.org', 'Bob Example');
      olga = await directoryUser(ctx, 2, 'olga@other.example.net', 'Olga Other');
      math = await group(ctx, 1, 'teaching-group', 'Mathematics 1A', [
        [alice, 'teacher'],
        [bob, 'student'],
      ]);
      unit = await group(ctx, 1, 'org-unit', 'Department of Mathematics', [[alice, 'member']]);
      club = await group(ctx, 1, 'other', 'Chess club', [[alice, 'owner']]);
      otherClass = await group(ctx, 1, 'class', 'Class 3B', [[bob, 'student']]);
    });
    after(() => ctx.close());

    describe('GET /userinfo/v1/userinfo', () => {
      it('releases the attributes of the groups the client holds and the token was granted', async () => {
        const token = await userToken(
          alice,
          ['userinfo-name', 'userid-idp', 'userinfo-affiliation', 'email'],
          'openid profile userid-idp userinfo-affiliation',
        );
        const res = await get('/userinfo/v1/userinfo', token);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['cache-control'], 'no-store');
        assert.deepEqual(res.json(), {
          cn: ['Alice Example'],
          displayName: 'Alice Example',
          givenName: ['Alice'],
          sn: ['Example'],
          eduPersonPrincipalName: 'alice@example.org',
          uid: ['alice'],
          eduPersonAffiliation: ['employee', 'faculty', 'member'],
          eduPersonPrimaryAffiliation: 'faculty',
          'eduPersonOrgUnitDN:ou': ['Department of Mathematics'],
          title: ['Lecturer'],
        });
      });

      it('never releases a group the client does not hold, whatever the scope', async () => {
        // email was not granted; userid-nin, entitlements and numbers are not the client's
        const token = await userToken(alice, ['userinfo-name', 'email'], 'openid profile');
        const body = (await get('/userinfo/v1/userinfo', token)).json();
        assert.deepEqual(Object.keys(body).sort(), ['cn', 'displayName', 'givenName', 'sn']);
      });

      it('releases entitlements, numbers and the national identity number only with their groups', async () => {
        const token = await userToken(
          alice,
          ['userinfo-entitlement', 'userinfo-numbers', 'userid-nin'],
          'openid userinfo-entitlement userinfo-numbers userid-nin',
        );
        assert.deepEqual((await get('/userinfo/v1/userinfo', token)).json(), {
          norEduPersonNIN: '01017012345',
          eduPersonEntitlement: ['urn:mace:example.org:library', 'urn:mace:example.org:lab'],
          norEduPersonLIN: ['example.org:employee:035016'],
        });
      });

      it('answers 401 with a challenge without a token, with a bad one and with an expired one', async () => {
        const none = await get('/userinfo/v1/userinfo');
        assert.equal(none.statusCode, 401);
        assert.equal(none.headers['www-authenticate'], `Bearer realm="${PUBLIC_URL}"`);
        const bad = await get('/userinfo/v1/userinfo', 'not-a-token');
        assert.equal(bad.statusCode, 401);
        assert.match(String(bad.headers['www-authenticate']), /error="invalid_token"/);
        assert.deepEqual(Object.keys(bad.json()).sort(), ['code', 'message']);
        const c = await seedClient(ctx, { groups: ['userinfo-name'], redirectUris: [REDIRECT] });
        const expired = await mintUserToken(ctx, {
          accountId: alice.sub,
          clientId: c.clientId,
          scope: 'openid profile',
          expiresIn: -10,
        });
        assert.equal((await get('/userinfo/v1/userinfo', expired)).statusCode, 401);
      });

      it("answers browsers from the client's origins only, after a preflight", async () => {
        const token = await userToken(alice, ['userinfo-name'], 'openid profile');
        const pre = await ctx.app.inject({
          method: 'OPTIONS',
          url: '/userinfo/v1/userinfo',
          headers: { origin: 'https://rp.example.com', 'access-control-request-method': 'GET' },
        });
        assert.equal(pre.statusCode, 204);
        assert.equal(pre.headers['access-control-allow-origin'], 'https://rp.example.com');
        assert.equal(pre.headers['access-control-allow-headers'], 'Authorization');
        const call = (origin: string) =>
          ctx.app.inject({
            method: 'GET',
            url: '/userinfo/v1/userinfo',
            headers: { authorization: `Bearer ${token}`, origin },
          });
        const allowed = await call('https://rp.example.com');
        assert.equal(allowed.statusCode, 200);
        assert.equal(allowed.headers['access-control-allow-origin'], 'https://rp.example.com');
        const other = await call('https://evil.example');
        assert.equal(other.statusCode, 400);
        assert.equal(other.headers['access-control-allow-origin'], undefined);
        assert.match(String(other.headers['www-authenticate']), /invalid_request/);
        const lookupPreflight = await ctx.app.inject({ method: 'OPTIONS', url: '/userinfo/v1/lookup/x' });
        assert.equal(lookupPreflight.statusCode, 405);
      });

      it('refuses a client-credentials token with 403', async () => {
        const token = await lookupToken(['userinfo-name'], [1]);
        const res = await get('/userinfo/v1/userinfo', token);
        assert.equal(res.statusCode, 403);
        assert.match(String(res.headers['www-authenticate']), /insufficient_scope/);
      });
    });

    describe('GET /userinfo/v1/lookup/<eppn or sub>', () => {
      it('finds a user of a granted organization by eppn and by sub, released per the client groups', async () => {
        const token = await lookupToken(['userinfo-name', 'userinfo-affiliation'], [1]);
        const byEppn = await get('/userinfo/v1/lookup/bob%40example.org', token);
        assert.equal(byEppn.statusCode, 200);
        assert.equal(byEppn.headers['cache-control'], 'no-store');
        const body = byEppn.json();
        assert.equal(body.displayName, 'Bob Example');
        assert.deepEqual(body.eduPersonAffiliation, ['employee', 'faculty', 'member']);
        assert.equal(body.mail, undefined);
        assert.equal(body.eduPersonPrincipalName, undefined);
        const bySub = await get(`/userinfo/v1/lookup/${bob.sub}`, token);
        assert.equal(bySub.statusCode, 200);
        assert.deepEqual(bySub.json(), body);
      });

      it("answers another organization's user and an unknown one with the same 404", async () => {
        const token = await lookupToken(['userinfo-name'], [1]);
        const other = await get('/userinfo/v1/lookup/olga%40other.example.net', token);
        const otherSub = await get(`/userinfo/v1/lookup/${olga.sub}`, token);
        const unknown = await get('/userinfo/v1/lookup/nobody%40example.org', token);
        const junk = await get('/userinfo/v1/lookup/not-an-eppn', token);
        for (const res of [other, otherSub, unknown, junk]) {
          assert.equal(res.statusCode, 404);
          assert.deepEqual(res.json(), { code: 404, message: 'User does not exist' });
        }
        const carol = await directoryUser(ctx, 1, 'carol@example.org', 'Carol Example');
        await ctx.store.db.updateTable('users').set({ disabled_at: Date.now() }).where('id', '=', carol.id).execute();
        assert.equal((await get('/userinfo/v1/lookup/carol%40example.org', token)).statusCode, 404);
        const ungranted = await lookupToken(['userinfo-name'], []);
        assert.equal((await get('/userinfo/v1/lookup/bob%40example.org', ungranted)).statusCode, 404);
      });

      it('refuses a token without system-all-users (403) and a user token (401)', async () => {
        const token = await lookupToken(['userinfo-name'], [1], 'passkey.read');
        const res = await get('/userinfo/v1/lookup/bob%40example.org', token);
        assert.equal(res.statusCode, 403);
        assert.deepEqual(res.json(), { code: 403, message: 'Token must have all required scopes' });
        const user = await userToken(alice, ['userinfo-name'], 'openid profile');
        const byUser = await get('/userinfo/v1/lookup/bob%40example.org', user);
        assert.equal(byUser.statusCode, 401);
        assert.match(String(byUser.headers['www-authenticate']), /invalid_token/);
        assert.equal((await get('/userinfo/v1/lookup/bob%40example.org')).statusCode, 401);
      });
    });

    describe('groups API', () => {
      const all = ['groups-org', 'groups-edu', 'groups-other'];

      it("lists the user's groups, each kind with its attribute group, the organization first", async () => {
        const token = await userToken(alice, all, 'openid groups-org groups-edu groups-other');
        const res = await get('/groups/me/groups', token);
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['cache-control'], 'no-store');
        const groups = res.json();
        assert.deepEqual(groups[0], {
          id: 'fc:org:example.org',
          type: 'fc:org',
          displayName: 'Example University',
          membership: {
            basic: 'member',
            affiliation: ['employee', 'faculty', 'member'],
            primaryAffiliation: 'faculty',
          },
        });
        assert.deepEqual(
          groups.slice(1).map((g: { id: string }) => g.id),
          [`voot:default:example.org:${club}`, `fc:org:example.org:unit:${unit}`, `fc:gogroup:example.org:${math}`],
        );
        const teaching = groups.find((g: { type: string }) => g.type === 'fc:gogroup');
        assert.deepEqual(teaching, {
          id: `fc:gogroup:example.org:${math}`,
          type: 'fc:gogroup',
          displayName: 'Mathematics 1A',
          parent: 'fc:org:example.org',
          membership: { basic: 'admin', displayName: 'Teacher' },
        });
      });

      it('shows only the kinds whose attribute group is released', async () => {
        const edu = await userToken(alice, ['groups-edu', 'groups-other'], 'openid groups-edu');
        const groups = (await get('/groups/me/groups', edu)).json();
        assert.deepEqual(
          groups.map((g: { type: string }) => g.type),
          ['fc:gogroup'],
        );
        const none = await userToken(alice, ['userinfo-name'], 'openid profile');
        assert.deepEqual((await get('/groups/me/groups', none)).json(), []);
        // a group of a kind not released is as unknown as any other
        assert.equal((await get(`/groups/groups/voot:default:example.org:${club}`, edu)).statusCode, 404);
      });

      it('answers one membership, one group and its members to a member', async () => {
        const token = await userToken(bob, all, 'openid groups-org groups-edu groups-other');
        const id = `fc:gogroup:example.org:${math}`;
        const mine = await get(`/groups/me/groups/${encodeURIComponent(id)}`, token);
        assert.equal(mine.statusCode, 200);
        assert.deepEqual(mine.json(), { basic: 'member', displayName: 'Student' });
        const details = await get(`/groups/groups/${id}`, token);
        assert.deepEqual(details.json(), {
          id,
          type: 'fc:gogroup',
          displayName: 'Mathematics 1A',
          parent: 'fc:org:example.org',
        });
        const members = await get(`/groups/groups/${id}/members`, token);
        assert.equal(members.statusCode, 200);
        assert.deepEqual(members.json(), [
          { name: 'Alice Example', membership: { basic: 'admin', displayName: 'Teacher' } },
          { name: 'Bob Example', membership: { basic: 'member', displayName: 'Student' } },
        ]);
        const org = await get('/groups/me/groups/fc:org:example.org', token);
        assert.equal(org.json().basic, 'member');
      });

      it('hides a group from a user who is not a member (404), and unknown ids alike', async () => {
        const token = await userToken(alice, all, 'openid groups-org groups-edu groups-other');
        const notMine = `fc:basisgroup:example.org:${otherClass}`;
        for (const url of [
          `/groups/groups/${notMine}`,
          `/groups/groups/${notMine}/members`,
          `/groups/me/groups/${notMine}`,
          `/groups/groups/fc:gogroup:example.org:${randomUUID()}`,
          `/groups/groups/fc:basisgroup:example.org:${math}`,
          '/groups/groups/fc:org:other.example.net',
          '/groups/groups/nonsense',
        ]) {
          const res = await get(url, token);
          assert.equal(res.statusCode, 404, url);
          assert.deepEqual(res.json(), { code: 404, message: 'Group does not exist' });
        }
      });

      it('does not list the members of organization groups', async () => {
        const token = await userToken(alice, all, 'openid groups-org');
        const res = await get(`/groups/groups/fc:org:example.org:unit:${unit}/members`, token);
        assert.equal(res.statusCode, 403);
        assert.equal((await get('/groups/groups/fc:org:example.org/members', token)).statusCode, 403);
      });

      it('lists the group types', async () => {
        const token = await userToken(alice, ['groups-edu'], 'openid groups-edu');
        const res = await get('/groups/grouptypes', token);
        assert.equal(res.statusCode, 200);
        assert.deepEqual(
          res.json().map((t: { id: string }) => t.id),
          ['fc:org', 'fc:basisgroup', 'fc:gogroup', 'voot:default'],
        );
      });

      it('refuses a client token with 403 and bad or missing tokens with 401', async () => {
        const client = await lookupToken(all, [1]);
        const res = await get('/groups/me/groups', client);
        assert.equal(res.statusCode, 403);
        assert.deepEqual(res.json(), { code: 403, message: 'The access token is not bound to a user' });
        assert.equal((await get('/groups/me/groups')).statusCode, 401);
        const c = await seedClient(ctx, { groups: all, redirectUris: [REDIRECT] });
        const expired = await mintUserToken(ctx, {
          accountId: alice.sub,
          clientId: c.clientId,
          scope: 'openid groups-edu',
          expiresIn: -10,
        });
        const res2 = await get('/groups/me/groups', expired);
        assert.equal(res2.statusCode, 401);
        assert.match(String(res2.headers['www-authenticate']), /invalid_token/);
        const bad = await get('/groups/grouptypes', 'x'.repeat(40));
        assert.equal(bad.statusCode, 401);
        assert.match(String(bad.headers['www-authenticate']), /invalid_token/);
        assert.equal((await ctx.app.inject({ method: 'POST', url: '/groups/me/groups' })).statusCode, 405);
      });
    });
  });
}
