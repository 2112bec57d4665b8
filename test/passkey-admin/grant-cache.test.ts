// The organization APIs keep the organization with the calling client's grant and state; every change
// to them is seen at the next request on the instance that made it and within a second on another
// instance on the same database and after an admin command (another process). Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  cli,
  clientToken,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
} from '../helpers.ts';
import { secondInstance, seedPasskeys, type ExtraApp } from './fixtures.ts';
import { grantOrganizations, revokeOrganizations, setClientEnabled, removeClient } from '../../src/clients/index.ts';
import { removeOrganization } from '../../src/oauth/account-lifecycle.ts';

type Inject = TestContext['app'];

interface Subject {
  orgId: number;
  eppn: string;
  clientId: string;
  token: string;
}

interface Path {
  name: string;
  /** makes the change through the function every surface (CLI, console, API) calls */
  change: (ctx: TestContext, s: Subject) => Promise<unknown>;
  /** the status of a user's passkey list once the change shows */
  status: number;
  /** the admin command making the same change */
  command: (s: Subject) => string[];
}

const PATHS: Path[] = [
  {
    name: 'grant revoked',
    change: (ctx, s) => revokeOrganizations(ctx.store, s.clientId, [s.orgId], 'admin'),
    status: 403,
    command: (s) => ['client', 'revoke-orgs', s.clientId, '--orgs', String(s.orgId)],
  },
  {
    name: 'client disabled',
    change: (ctx, s) => setClientEnabled(ctx.store, s.clientId, false),
    status: 401,
    command: (s) => ['client', 'disable', s.clientId],
  },
  {
    name: 'client removed',
    change: (ctx, s) => removeClient(ctx.store, s.clientId),
    status: 401,
    command: (s) => ['client', 'remove', s.clientId],
  },
  {
    name: 'organization removed',
    change: (ctx, s) => removeOrganization(ctx.store, s.orgId, { force: true }),
    status: 404,
    command: (s) => ['org', 'remove', String(s.orgId), '--force', '--yes'],
  },
];

const list = (app: Inject, s: Subject) =>
  app.inject({
    method: 'GET',
    url: `/2/passkey/${s.orgId}?eppn=${encodeURIComponent(s.eppn)}`,
    headers: { authorization: `Bearer ${s.token}` },
  });

/** Asks until the list answers `status`, for at most limitMs; the milliseconds it took (Infinity: never). */
async function shown(app: Inject, s: Subject, status: number, limitMs = 1000): Promise<number> {
  const start = performance.now();
  for (;;) {
    const elapsed = performance.now() - start;
    if ((await list(app, s)).statusCode === status) return elapsed;
    if (elapsed > limitMs) return Infinity;
    await new Promise((r) => setTimeout(r, 10));
  }
}

for (const dialect of dialects()) {
  describe(`organization grant cache (${dialect})`, () => {
    let ctx: TestContext;
    let other: ExtraApp;
    let nextOrg = 10;
    const timings: Record<string, number> = {};

    before(async () => {
      ctx = await startTestApp(dialect);
      other = await secondInstance(ctx);
    });
    after(async () => {
      await other?.close();
      await ctx?.close();
      console.log(`# ${dialect}: ms until the other instance showed each change: ${JSON.stringify(timings)}`);
    });

    /** An organization of its own with one user holding two passkeys, and a client granted it; both instances have it kept. */
    async function subject(): Promise<Subject> {
      const orgId = nextOrg++;
      const realm = `org${orgId}.example.org`;
      await seedOrg(ctx, orgId, realm, `Organization ${orgId}`);
      const eppn = `ada@${realm}`;
      const user = await seedUser(ctx, orgId, eppn);
      await seedPasskeys(ctx.store, orgId, [user.id], 2);
      const { clientId, secret } = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [orgId] });
      const s = { orgId, eppn, clientId, token: await clientToken(ctx, clientId, secret, 'passkey.read') };
      for (const app of [ctx.app, other.app, ctx.app]) {
        const res = await list(app, s);
        assert.equal(res.statusCode, 200, res.body);
        assert.equal(res.json().length, 2);
      }
      return s;
    }

    for (const path of PATHS) {
      it(`${path.name}: the next request on the same instance shows it`, async () => {
        const s = await subject();
        await path.change(ctx, s);
        const res = await list(ctx.app, s);
        assert.equal(res.statusCode, path.status, res.body);
      });

      it(`${path.name}: another instance on the database shows it within a second`, async () => {
        const s = await subject();
        await path.change(ctx, s);
        const ms = await shown(other.app, s, path.status);
        timings[path.name] = Math.round(ms);
        assert.ok(ms <= 1000, 'not shown within 1 s');
      });

      it(`${path.name}: the admin command reaches both instances within a second`, async () => {
        const s = await subject();
        const done = await cli(ctx.config.databaseUrl, path.command(s));
        assert.equal(done.code, 0, done.err);
        const [here, there] = await Promise.all([shown(ctx.app, s, path.status), shown(other.app, s, path.status)]);
        timings[`${path.name} (CLI)`] = Math.round(Math.max(here, there));
        assert.ok(here <= 1000 && there <= 1000, `${here} / ${there} ms`);
      });
    }

    it('a grant given back is seen again at once here and within a second there', async () => {
      const s = await subject();
      await revokeOrganizations(ctx.store, s.clientId, [s.orgId], 'admin');
      assert.equal((await list(ctx.app, s)).statusCode, 403);
      assert.ok((await shown(other.app, s, 403)) <= 1000);
      await grantOrganizations(ctx.store, s.clientId, [s.orgId], 'admin');
      assert.equal((await list(ctx.app, s)).statusCode, 200);
      assert.ok((await shown(other.app, s, 200)) <= 1000);
    });

    it("one client's change leaves another client's kept grant of the same organization alone", async () => {
      const s = await subject();
      const { clientId, secret } = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [s.orgId] });
      const second = { ...s, clientId, token: await clientToken(ctx, clientId, secret, 'passkey.read') };
      assert.equal((await list(ctx.app, second)).statusCode, 200);
      await revokeOrganizations(ctx.store, s.clientId, [s.orgId], 'admin');
      assert.equal((await list(ctx.app, s)).statusCode, 403);
      assert.equal((await list(ctx.app, second)).statusCode, 200);
    });
  });
}
