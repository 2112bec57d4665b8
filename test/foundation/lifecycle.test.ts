// User, client and organization lifecycle through the admin CLI, as an operator runs it, and what
// each change does to the tokens and endpoints that depend on it. Both databases.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { dialects, startTestApp, seedOrg, seedUser, seedClient, clientToken, cli } from '../helpers.ts';
import type { TestContext } from '../helpers.ts';
import { mintUserToken, exchangeCode } from '../userinfo/fixtures.ts';
import { seedPasskeys } from '../passkey-admin/fixtures.ts';
import { listAuditEvents } from '../../src/store/audit.ts';
import { findUserByEppn, findOrganization } from '../../src/store/directory.ts';
import { saveConsent, findConsent } from '../../src/store/consents.ts';
import { findClient } from '../../src/store/clients.ts';

const REDIRECT = 'https://app.example.test/cb';

/** Asks until the answer is the expected one, for at most limitMs; the last answer. */
async function within<T>(limitMs: number, ask: () => Promise<T>, expected: (answer: T) => boolean): Promise<T> {
  const start = performance.now();
  for (;;) {
    const answer = await ask();
    if (expected(answer) || performance.now() - start > limitMs) return answer;
    await new Promise((r) => setTimeout(r, 10));
  }
}

for (const dialect of dialects()) {
  describe(`lifecycle through the admin CLI (${dialect})`, () => {
    let ctx: TestContext;
    let rp: { clientId: string; secret: string };
    const run = (...args: string[]) => cli(ctx.config.databaseUrl, args);
    const runWith = (stdin: string, ...args: string[]) => cli(ctx.config.databaseUrl, args, stdin);
    const audit = (action: string) => listAuditEvents(ctx.store.db, { action, after: 0 });

    const userinfo = (token: string, url = '/openid/userinfo') =>
      ctx.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
    const tokenFor = (eppn: string) =>
      findUserByEppn(ctx.store.db, eppn).then((u) =>
        mintUserToken(ctx, { accountId: u!.sub, clientId: rp.clientId, scope: 'openid profile email' }),
      );

    before(async () => {
      ctx = await startTestApp(dialect, { USERINFO_CACHE_TTL: '0' });
      await seedOrg(ctx, 1, 'example.org');
      await seedOrg(ctx, 2, 'other.org', 'Other');
      rp = await seedClient(ctx, {
        redirectUris: [REDIRECT],
        groups: ['userinfo-name', 'email', 'userid-idp'],
      });
    });
    after(() => ctx.close());

    describe('user set', () => {
      it('changes the name seen by userinfo and new ID tokens, and audits the fields changed', async () => {
        const user = await seedUser(ctx, 1, 'sam@example.org', { name: 'Sam Old', email: 'sam@example.org' });
        const token = await tokenFor('sam@example.org');
        assert.equal((await userinfo(token)).json().name, 'Sam Old');
        const r = await run('user', 'set', 'sam@example.org', '--name', 'Sam New', '--display-name', 'Sammy', '--json');
        assert.equal(r.code, 0, r.err);
        assert.equal(JSON.parse(r.out).display_name, 'Sammy');
        assert.equal((await userinfo(token)).json().name, 'Sam New');
        const issued = await exchangeCode(ctx, {
          accountId: user.sub,
          clientId: rp.clientId,
          secret: rp.secret,
          scope: 'openid profile',
          redirectUri: REDIRECT,
          claims: { id_token: { name: null } },
        });
        const claims = JSON.parse(Buffer.from(issued.id_token.split('.')[1]!, 'base64url').toString());
        assert.equal(claims.name, 'Sam New');
        const [event] = (await audit('user.update')).filter((e) => e.eppn === 'sam@example.org');
        assert.deepEqual(JSON.parse(event!.details), { fields: ['name', 'display_name'] });
        assert.equal(event!.actor_type, 'operator');
        assert.match(event!.actor!, /^cli/);
      });

      it('marks an address verified; a new address is unverified again', async () => {
        await seedUser(ctx, 1, 'val@example.org', { email: 'val@example.org' });
        const token = await tokenFor('val@example.org');
        assert.equal((await userinfo(token)).json().email_verified, false);
        assert.equal((await run('user', 'set', 'val@example.org', '--email-verified')).code, 0);
        assert.equal((await userinfo(token)).json().email_verified, true);
        assert.equal((await run('user', 'set', 'val@example.org', '--email', 'VAL2@example.org')).code, 0);
        const body = (await userinfo(token)).json();
        assert.equal(body.email, 'val2@example.org');
        assert.equal(body.email_verified, false);
      });

      it('refuses nothing to change, bad values and unknown users, changing nothing', async () => {
        await seedUser(ctx, 1, 'ned@example.org', { name: 'Ned' });
        const cases: [string[], RegExp][] = [
          [['user', 'set', 'ned@example.org'], /nothing to change/],
          [['user', 'set', 'ned@example.org', '--email', 'not-an-address'], /not a valid address/],
          [['user', 'set', 'ned@example.org', '--name', ''], /name must be 1-200 characters/],
          [['user', 'set', 'ned@example.org', '--name', 'a\u0007b'], /name must be/],
          [['user', 'set', 'ned@example.org', '--email-verified'], /no email address/],
          [['user', 'set', 'nobody@example.org', '--name', 'X'], /does not exist/],
          [['user', 'set', '--name', 'X'], /eppn is required/],
        ];
        for (const [args, message] of cases) {
          const r = await run(...args);
          assert.equal(r.code, 1, args.join(' '));
          assert.match(r.err, message);
        }
        assert.equal((await findUserByEppn(ctx.store.db, 'ned@example.org'))!.name, 'Ned');
        assert.equal((await audit('user.update')).filter((e) => e.eppn === 'ned@example.org').length, 0);
      });
    });

    describe('user disable, enable, remove', () => {
      it('disabling revokes the tokens at once; enabling allows new ones; each change is one record', async () => {
        await seedUser(ctx, 1, 'dan@example.org', { name: 'Dan' });
        const token = await tokenFor('dan@example.org');
        assert.equal((await userinfo(token)).statusCode, 200);
        const r = await run('user', 'disable', 'dan@example.org', '--json');
        assert.equal(r.code, 0, r.err);
        assert.deepEqual(JSON.parse(r.out), {
          eppn: 'dan@example.org',
          disabled: true,
          changed: true,
          sessions_ended: 0,
        });
        assert.equal((await userinfo(token)).statusCode, 401);
        assert.equal((await userinfo(token, '/userinfo')).statusCode, 401);
        // a token minted for a disabled user (the provider knows no such account) is refused too
        assert.equal((await userinfo(await tokenFor('dan@example.org'))).statusCode, 401);
        const again = await run('user', 'disable', 'dan@example.org');
        assert.equal(again.code, 0);
        assert.match(again.out, /already disabled/);
        assert.equal((await audit('user.disable')).filter((e) => e.eppn === 'dan@example.org').length, 1);
        assert.match((await run('user', 'list', '--org', '1')).out, /dan@example\.org.*disabled/);

        assert.equal((await run('user', 'enable', 'dan@example.org')).code, 0);
        assert.equal((await userinfo(token)).statusCode, 401, 'the revoked token stays revoked');
        assert.equal((await userinfo(await tokenFor('dan@example.org'))).statusCode, 200);
        assert.equal((await audit('user.enable')).filter((e) => e.eppn === 'dan@example.org').length, 1);
      });

      it("removing deletes the user with passkeys, photo and consents; passkeys are audited like the API's", async () => {
        const user = await seedUser(ctx, 1, 'rex@example.org');
        const keys = await seedPasskeys(ctx.store, 1, [user.id], 2);
        await saveConsent(ctx.store.db, user.id, rp.clientId, ['openid'], Date.now());
        const token = await tokenFor('rex@example.org');
        const r = await run('user', 'remove', 'rex@example.org', '--json');
        assert.equal(r.code, 0, r.err);
        assert.deepEqual(JSON.parse(r.out), { eppn: 'rex@example.org', removed: true, passkeys_deleted: 2 });
        assert.equal(await findUserByEppn(ctx.store.db, 'rex@example.org'), undefined);
        assert.equal(await findConsent(ctx.store.db, user.id, rp.clientId), undefined);
        assert.equal((await userinfo(token)).statusCode, 401);
        const [deletion] = (await audit('passkey.delete_user')).filter((e) => e.eppn === 'rex@example.org');
        assert.deepEqual(JSON.parse(deletion!.passkey_ids), keys);
        assert.equal((await audit('user.remove')).filter((e) => e.eppn === 'rex@example.org').length, 1);
        assert.match((await run('user', 'remove', 'rex@example.org')).err, /does not exist/);
      });
    });

    describe('clients', () => {
      it('a disabled client gets no token and its tokens are refused; enabling restores it', async () => {
        const c = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
        const token = await clientToken(ctx, c.clientId, c.secret, 'passkey.read');
        const list = () =>
          ctx.app.inject({ method: 'GET', url: '/2/passkey/1', headers: { authorization: `Bearer ${token}` } });
        assert.equal((await list()).statusCode, 200);
        assert.equal((await run('client', 'disable', c.clientId)).code, 0);
        // the CLI is another process: the service hears of the change within a second (cache invalidation)
        const refused = await within(1000, list, (res) => res.statusCode === 401);
        assert.equal(refused.statusCode, 401);
        assert.match(String(refused.headers['www-authenticate']), /error="invalid_token"/);
        await new Promise((r) => setTimeout(r, 1100)); // the authorization server's client cache
        await assert.rejects(clientToken(ctx, c.clientId, c.secret, 'passkey.read'), /401/);
        assert.equal((await run('client', 'enable', c.clientId)).code, 0);
        assert.equal((await within(1000, list, (res) => res.statusCode === 200)).statusCode, 200);
        await new Promise((r) => setTimeout(r, 1100));
        assert.ok(await clientToken(ctx, c.clientId, c.secret, 'passkey.read'));
      });

      it('update changes redirect URIs and groups with the rules of client add', async () => {
        const c = await seedClient(ctx, { redirectUris: [REDIRECT], groups: ['email'] });
        const ok = await run(
          'client',
          'update',
          c.clientId,
          '--redirect-uri',
          'https://new.example.test/cb',
          '--groups',
          'userinfo-name email',
          '--json',
        );
        assert.equal(ok.code, 0, ok.err);
        const view = JSON.parse(ok.out);
        assert.deepEqual(view.redirect_uris, ['https://new.example.test/cb']);
        assert.deepEqual(view.groups, ['userinfo-name', 'email']);
        for (const [args, message] of [
          [['--redirect-uri', 'http://evil.example/cb'], /must use https/],
          [['--groups', 'nonsense'], /unknown attribute group/],
          [['--grant', 'client_credentials'], /redirect-uri is used only/],
          [[], /nothing to change/],
        ] as [string[], RegExp][]) {
          const r = await run('client', 'update', c.clientId, ...args);
          assert.equal(r.code, 1, args.join(' '));
          assert.match(r.err, message);
        }
        const row = await findClient(ctx.store.db, c.clientId);
        assert.deepEqual(JSON.parse(row!.redirect_uris), ['https://new.example.test/cb']);
        assert.equal((await audit('client.update')).filter((e) => e.subject === c.clientId).length, 1);
      });

      it('secret rotate prints the new secret and how long the old one works', async () => {
        const c = await seedClient(ctx, { scopes: ['passkey.read'], orgs: [1] });
        const r = await run('client', 'secret', 'rotate', c.clientId, '--overlap', '2h', '--json');
        assert.equal(r.code, 0, r.err);
        const out = JSON.parse(r.out);
        assert.match(out.client_secret, /^[\w-]{43}$/);
        const until = Date.parse(out.previous_secret_valid_until);
        assert.ok(Math.abs(until - Date.now() - 2 * 3600_000) < 60_000);
        const bad = await run('client', 'secret', 'rotate', c.clientId, '--overlap', 'soon');
        assert.equal(bad.code, 1);
        assert.match(bad.err, /--overlap must be a duration/);
        assert.equal((await run('client', 'secret', '--help')).code, 0);
      });

      it('remove deletes the client, its consents and grants; its tokens are refused', async () => {
        const c = await seedClient(ctx, { redirectUris: [REDIRECT], groups: ['userinfo-name'] });
        const user = await seedUser(ctx, 1, 'cora@example.org');
        await saveConsent(ctx.store.db, user.id, c.clientId, ['openid'], Date.now());
        const token = await mintUserToken(ctx, { accountId: user.sub, clientId: c.clientId, scope: 'openid profile' });
        assert.equal((await userinfo(token)).statusCode, 200);
        const r = await run('client', 'remove', c.clientId, '--json');
        assert.equal(r.code, 0, r.err);
        assert.equal(JSON.parse(r.out).removed, true);
        assert.equal(await findClient(ctx.store.db, c.clientId), undefined);
        assert.equal(await findConsent(ctx.store.db, user.id, c.clientId), undefined);
        assert.equal((await userinfo(token)).statusCode, 401);
        assert.match((await run('client', 'remove', c.clientId)).err, /does not exist/);
      });
    });

    describe('org remove', () => {
      it('refuses while the organization has users, and removes nothing', async () => {
        const r = await run('org', 'remove', '1');
        assert.equal(r.code, 1);
        assert.match(r.err, /has \d+ user\(s\); --force removes them/);
        assert.ok(await findOrganization(ctx.store.db, 1));
      });

      it('--force shows what would go and asks; a wrong answer removes nothing', async () => {
        const u = await seedUser(ctx, 2, 'olga@other.org');
        await seedPasskeys(ctx.store, 2, [u.id], 3);
        const no = await runWith('no\n', 'org', 'remove', '2', '--force');
        assert.equal(no.code, 1);
        assert.match(no.err, /would be removed with 1 user\(s\) and 3 passkey\(s\)/);
        assert.match(no.err, /not confirmed; nothing was removed/);
        assert.ok(await findUserByEppn(ctx.store.db, 'olga@other.org'));

        const yes = await runWith('2\n', 'org', 'remove', '2', '--force', '--json');
        assert.equal(yes.code, 0, yes.err);
        assert.deepEqual(JSON.parse(yes.out), { id: 2, removed: true, users_removed: 1, passkeys_deleted: 3 });
        assert.equal(await findOrganization(ctx.store.db, 2), undefined);
        assert.equal(await findUserByEppn(ctx.store.db, 'olga@other.org'), undefined);
        assert.equal((await audit('org.remove')).filter((e) => e.org_id === 2).length, 1);
      });

      it('--force --yes removes without asking; an empty organization goes without --force', async () => {
        await seedOrg(ctx, 3, 'third.org', 'Third');
        await seedUser(ctx, 3, 'tim@third.org');
        const r = await run('org', 'remove', '3', '--force', '--yes');
        assert.equal(r.code, 0, r.err);
        await seedOrg(ctx, 4, 'fourth.org', 'Fourth');
        assert.equal((await run('org', 'remove', '4')).code, 0);
        assert.match((await run('org', 'remove', '4')).err, /does not exist/);
      });
    });
  });
}
