// Staff act only on users whose roles are weaker than their own, on every surface and for every
// action: a helpdesk on users without a role, an org-admin also on helpdesk staff, an API client
// as an org-admin, provisioning (SCIM) on everyone but an operator, an operator's account only with
// the admin CLI. Each refusal is a 403 with a message that says why, changes nothing, and leaves an
// `access.refused` record in the audit trail. On both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  clientToken,
  dialects,
  seedClient,
  seedOrg,
  seedUser,
  startTestApp,
  type TestContext,
  type TestCredential,
} from '../helpers.ts';
import { listUserCredentials } from '../../src/store/passkeys.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findUserByEppn, type User } from '../../src/store/directory.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { createScimToken } from '../../src/directory/provisioning.ts';
import { disableUser, enableUser } from '../../src/oauth/account-lifecycle.ts';
import { createRecoveryLink } from '../../src/webauthn/recovery-links.ts';
import { operator } from '../../src/audit/index.ts';
import { addKey, csrfOf, signIn, type Browser } from './console-browser.ts';

const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

for (const dialect of dialects()) {
  describe(`acting only on weaker roles (${dialect})`, () => {
    let ctx: TestContext;
    // helen and hugo: helpdesk; olga and oscar: org-admins; opal: operator; ada: no role
    let helen: User, hugo: User, olga: User, oscar: User, opal: User, ada: User;
    const keys: Record<string, TestCredential> = {};
    const tokens = { recovery: '', passkeys: '', scim: '' };

    const links = async (user: User) =>
      (await ctx.store.db.selectFrom('recovery_links').select('id').where('user_id', '=', user.id).execute()).length;
    const passkeys = async (user: User) => (await listUserCredentials(ctx.store.db, user.id)).length;

    /** The newest refusal in the trail: who was refused what, on whom. */
    async function lastRefusal() {
      const [record] = await listAuditEvents(ctx.store.db, { action: 'access.refused', limit: 1 });
      assert.ok(record, 'a refusal is recorded');
      return {
        id: record.id,
        actor: `${record.actor_type}:${record.actor}`,
        eppn: record.eppn,
        org: record.org_id,
        refused: (JSON.parse(record.details) as { refused: string }).refused,
      };
    }
    const refusals = async () =>
      (await listAuditEvents(ctx.store.db, { action: 'access.refused', limit: 1000 })).length;

    before(async () => {
      ctx = await startTestApp(dialect);
      await seedOrg(ctx, 1, 'example.org', 'Example University');
      const seed = (name: string) => seedUser(ctx, 1, `${name}@example.org`);
      helen = await seed('helen');
      hugo = await seed('hugo');
      olga = await seed('olga');
      oscar = await seed('oscar');
      opal = await seed('opal');
      ada = await seed('ada');
      for (const [user, role] of [
        [helen, 'helpdesk'],
        [hugo, 'helpdesk'],
        [olga, 'org-admin'],
        [oscar, 'org-admin'],
      ] as const)
        await grantRole(ctx.store, { eppn: user.eppn, role, orgId: 1 });
      await grantRole(ctx.store, { eppn: opal.eppn, role: 'operator' });
      for (const user of [helen, hugo, olga, oscar, opal, ada]) {
        keys[user.eppn] = (await addKey(ctx, user, 'First')).key;
        await addKey(ctx, user, 'Second');
      }
      const recovery = await seedClient(ctx, { scopes: ['recovery.manage'], orgs: [1] });
      const deleter = await seedClient(ctx, { scopes: ['passkey.delete'], orgs: [1] });
      tokens.recovery = await clientToken(ctx, recovery.clientId, recovery.secret, 'recovery.manage');
      tokens.passkeys = await clientToken(ctx, deleter.clientId, deleter.secret, 'passkey.delete');
      tokens.scim = (await createScimToken(ctx.store, 1, 'Directory')).token;
    });
    after(() => ctx.close());

    /** The three console actions on one user's page; each answers, and the page says why when refused. */
    async function consoleActions(b: Browser, target: User) {
      const page = await b.get(`/console/org/1/users/${target.eppn}`);
      assert.equal(page.statusCode, 200);
      const _csrf = csrfOf(page.body);
      const [first] = await listUserCredentials(ctx.store.db, target.id);
      const base = `/console/org/1/users/${target.eppn}`;
      return {
        link: () => b.post(`${base}/recovery-links`, { _csrf, ttl: '3600' }),
        deleteOne: () => b.post(`${base}/passkeys/${first!.id}/delete`, { _csrf, reason: 'Lost phone' }),
        deleteAll: () => b.post(`${base}/delete-all`, { _csrf, reason: 'Lost bag' }),
      };
    }

    async function expectConsoleRefusals(b: Browser, staff: User, target: User, why: RegExp) {
      const actions = await consoleActions(b, target);
      const before = { links: await links(target), passkeys: await passkeys(target) };
      for (const [name, action, audited] of [
        ['recovery link', actions.link, 'recovery_link.create'],
        ['delete one', actions.deleteOne, 'passkey.delete'],
        ['delete all', actions.deleteAll, 'passkey.delete_user'],
      ] as const) {
        const res = await action();
        assert.equal(res.statusCode, 403, `${staff.eppn} ${name} ${target.eppn}`);
        assert.match(res.headers['content-type'] as string, /^text\/html/);
        assert.match(res.body, why, name);
        assert.deepEqual(await lastRefusal().then(({ id: _, ...r }) => r), {
          actor: `user:${staff.eppn}`,
          eppn: target.eppn,
          org: 1,
          refused: audited,
        });
      }
      assert.deepEqual({ links: await links(target), passkeys: await passkeys(target) }, before, 'nothing changed');
    }

    /** What a user's page offers: each action's control, and the line saying why none is offered. */
    async function offered(b: Browser, target: User) {
      const base = `/console/org/1/users/${encodeURIComponent(target.eppn)}`;
      const page = await b.get(base);
      assert.equal(page.statusCode, 200);
      const [first] = await listUserCredentials(ctx.store.db, target.id);
      const confirm = await b.get(`${base}/passkeys/${first!.id}/delete`);
      const confirmAll = await b.get(`${base}/delete-all`);
      return {
        link: page.body.includes(`action="${base}/recovery-links"`),
        deleteOne: page.body.includes(`action="${base}/passkeys/${first!.id}/delete"`),
        deleteAll: page.body.includes(`action="${base}/delete-all"`),
        why: page.body.includes('id="user-stronger"'),
        confirmations: [confirm.statusCode, confirmAll.statusCode],
      };
    }
    const all = { link: true, deleteOne: true, deleteAll: true, why: false, confirmations: [200, 200] };
    const none = { link: false, deleteOne: false, deleteAll: false, why: true, confirmations: [403, 403] };

    it("a user's page offers only the actions the staff member may take, and says why it offers none", async () => {
      const before = await refusals();
      const helpdesk = await signIn(ctx, helen, keys[helen.eppn]!);
      assert.deepEqual(await offered(helpdesk.b, ada), all);
      for (const target of [hugo, olga, opal]) assert.deepEqual(await offered(helpdesk.b, target), none, target.eppn);
      const page = await helpdesk.b.get(`/console/org/1/users/${olga.eppn}`);
      assert.match(page.body, /This user has a role as strong as yours/);
      const admin = await signIn(ctx, olga, keys[olga.eppn]!);
      for (const target of [ada, hugo]) assert.deepEqual(await offered(admin.b, target), all, target.eppn);
      for (const target of [oscar, opal]) assert.deepEqual(await offered(admin.b, target), none, target.eppn);
      const op = await signIn(ctx, opal, keys[opal.eppn]!, '/console/org/1');
      assert.deepEqual(await offered(op.b, oscar), all);
      assert.deepEqual(await offered(op.b, opal), none);
      assert.equal(await refusals(), before, 'showing a page is not a refused action');
    });

    it('the offboarding preview offers no confirmation for a list with a user as strong as the staff member', async () => {
      const before = await refusals();
      const { b } = await signIn(ctx, olga, keys[olga.eppn]!);
      const preview = async (eppns: string) => {
        const form = await b.get('/console/org/1/offboard');
        const res = await b.post('/console/org/1/offboard/preview', { _csrf: csrfOf(form.body), eppns });
        assert.equal(res.statusCode, 200);
        return res.body;
      };
      const refusedList = await preview(`${ada.eppn}\n${oscar.eppn}\n${opal.eppn}`);
      assert.match(refusedList, /id="offboard-stronger"/);
      assert.match(
        refusedList,
        /2 listed users have a role as strong as yours[^<]*oscar@example.org, opal@example.org/,
      );
      assert.doesNotMatch(refusedList, /name="reason"/);
      const allowed = await preview(`${ada.eppn}\n${hugo.eppn}`);
      assert.doesNotMatch(allowed, /id="offboard-stronger"/);
      assert.match(allowed, /action="\/console\/org\/1\/offboard"[^>]*>[\s\S]*name="reason"/);
      assert.equal(await refusals(), before);
      assert.equal(await passkeys(ada), 2);
    });

    it('a helpdesk is refused on an org-admin, an operator and another helpdesk, in the console', async () => {
      const { b } = await signIn(ctx, helen, keys[helen.eppn]!);
      await expectConsoleRefusals(b, helen, olga, /&#39;olga@example.org&#39; has the org-admin role: staff may act/);
      await expectConsoleRefusals(b, helen, opal, /an operator&#39;s account is changed only with the admin CLI/);
      await expectConsoleRefusals(b, helen, hugo, /has the helpdesk role/);
    });

    it('an org-admin is refused on another org-admin and on an operator, in the console and when offboarding', async () => {
      const { b } = await signIn(ctx, olga, keys[olga.eppn]!);
      await expectConsoleRefusals(b, olga, oscar, /has the org-admin role/);
      await expectConsoleRefusals(b, olga, opal, /only with the admin CLI/);
      const form = await b.get('/console/org/1/offboard');
      const before = await refusals();
      const res = await b.post('/console/org/1/offboard', {
        _csrf: csrfOf(form.body),
        eppns: `${ada.eppn}\n${oscar.eppn}\n${opal.eppn}`,
        reason: 'Left',
      });
      assert.equal(res.statusCode, 403);
      assert.match(res.body, /2 listed user\(s\) refused, nothing was done/);
      assert.equal(await refusals(), before + 2);
      assert.equal(await passkeys(ada), 2, 'a refused list deletes nobody’s passkeys');
      assert.equal(await passkeys(oscar), 2);
    });

    it('what staff may do still works: a helpdesk on a user without a role, an org-admin on helpdesk staff', async () => {
      const helpdesk = await signIn(ctx, helen, keys[helen.eppn]!);
      const onAda = await consoleActions(helpdesk.b, ada);
      assert.equal((await onAda.link()).statusCode, 200);
      assert.equal((await onAda.deleteOne()).statusCode, 303);
      assert.equal(await passkeys(ada), 1);
      const admin = await signIn(ctx, olga, keys[olga.eppn]!);
      const onHugo = await consoleActions(admin.b, hugo);
      assert.equal((await onHugo.link()).statusCode, 200);
      assert.equal((await onHugo.deleteAll()).statusCode, 303);
      assert.equal(await passkeys(hugo), 0);
      const form = await admin.b.get('/console/org/1/offboard');
      const res = await admin.b.post('/console/org/1/offboard', {
        _csrf: csrfOf(form.body),
        eppns: `${ada.eppn}\n${hugo.eppn}`,
        reason: 'Left',
      });
      assert.equal(res.statusCode, 200);
      assert.equal(await passkeys(ada), 0);
      // An operator in the console acts on org-admins, never on an operator.
      const op = await signIn(ctx, opal, keys[opal.eppn]!, '/console/org/1');
      const onOscar = await consoleActions(op.b, oscar);
      assert.equal((await onOscar.link()).statusCode, 200);
      await expectConsoleRefusals(op.b, opal, opal, /only with the admin CLI/);
    });

    const api = (method: 'POST' | 'DELETE', url: string, token: string, body?: unknown) =>
      ctx.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });

    it('an API client acts as an org-admin: refused on org-admins and operators in every API, allowed on helpdesk staff', async () => {
      const expectRefused = async (res: Awaited<ReturnType<typeof api>>, target: User, refused: string) => {
        assert.equal(res.statusCode, 403, res.body);
        assert.equal(res.json().code, 403);
        assert.match(res.json().message, new RegExp(`'${target.eppn}' (has the org-admin role|is an operator)`));
        const last = await lastRefusal();
        assert.match(last.actor, /^client:/);
        assert.equal(last.eppn, target.eppn);
        assert.equal(last.refused, refused);
      };
      for (const target of [oscar, opal]) {
        const before = { links: await links(target), passkeys: await passkeys(target) };
        const [first] = await listUserCredentials(ctx.store.db, target.id);
        await expectRefused(
          await api('POST', '/2/recovery-link/1', tokens.recovery, { eppn: target.eppn }),
          target,
          'recovery_link.create',
        );
        await expectRefused(
          await api('DELETE', `/2/passkey/1?eppn=${target.eppn}`, tokens.passkeys),
          target,
          'passkey.delete_user',
        );
        await expectRefused(
          await api('DELETE', `/2/passkey/1/${first!.id}`, tokens.passkeys),
          target,
          'passkey.delete',
        );
        await expectRefused(
          await api('POST', '/2/offboard/1', tokens.passkeys, { eppns: [target.eppn], reason: 'Left' }),
          target,
          'passkey.delete_user',
        );
        assert.deepEqual({ links: await links(target), passkeys: await passkeys(target) }, before, 'nothing changed');
      }
      const helpdesk = await seedUser(ctx, 1, 'hanna@example.org');
      await grantRole(ctx.store, { eppn: helpdesk.eppn, role: 'helpdesk', orgId: 1 });
      const { id } = await addKey(ctx, helpdesk);
      await addKey(ctx, helpdesk);
      assert.equal((await api('POST', '/2/recovery-link/1', tokens.recovery, { eppn: helpdesk.eppn })).statusCode, 201);
      assert.equal((await api('DELETE', `/2/passkey/1/${id}`, tokens.passkeys)).statusCode, 200);
      assert.equal((await api('DELETE', `/2/passkey/1?eppn=${helpdesk.eppn}`, tokens.passkeys)).statusCode, 200);
      assert.equal(await passkeys(helpdesk), 0);
    });

    it("an organization's SCIM token cannot disable, change or remove an operator's account; it keeps its org-admins", async () => {
      const scim = (method: string, body?: unknown) => (target: User) =>
        ctx.app.inject({
          method,
          url: `/scim/v2/Users/${target.sub}`,
          headers: {
            authorization: `Bearer ${tokens.scim}`,
            ...(body === undefined ? {} : { 'content-type': 'application/scim+json' }),
          },
          ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        });
      const disable = scim('PATCH', {
        schemas: [PATCH_OP],
        Operations: [{ op: 'replace', path: 'active', value: false }],
      });
      const rename = scim('PUT', {
        schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
        userName: opal.eppn,
        name: { formatted: 'Someone Else' },
        active: false,
      });
      const remove = scim('DELETE');
      for (const [request, audited] of [
        [disable, 'user.update'],
        [rename, 'user.update'],
        [remove, 'user.remove'],
      ] as const) {
        const res = await request(opal);
        assert.equal(res.statusCode, 403, res.body);
        assert.equal(res.json().status, '403');
        assert.match(res.json().detail, /is an operator: an operator's account is changed only with the admin CLI/);
        const last = await lastRefusal();
        assert.equal(last.eppn, opal.eppn);
        assert.equal(last.refused, audited);
        assert.match(last.actor, /^provisioning:scim-token:/);
      }
      const after = await findUserByEppn(ctx.store.db, opal.eppn);
      assert.equal(after?.disabled_at, null, 'the operator is not disabled');
      assert.equal(after?.name, opal.name);
      // The organization's directory still disables (and enables) its own administrators.
      assert.equal((await disable(oscar)).statusCode, 200);
      assert.notEqual((await findUserByEppn(ctx.store.db, oscar.eppn))?.disabled_at, null);
      await enableUser(ctx.store, oscar.eppn);
    });

    it("an operator's account is handled with the admin CLI", async () => {
      const cli = { actor: operator({ USER: 'root' }) };
      const link = await createRecoveryLink(ctx.store, ctx.config.publicUrl, { eppn: opal.eppn }, cli);
      assert.ok(link.url);
      assert.equal((await disableUser(ctx.store, opal.eppn, cli)).changed, true);
      assert.equal((await enableUser(ctx.store, opal.eppn, cli)).changed, true);
    });
  });
}
