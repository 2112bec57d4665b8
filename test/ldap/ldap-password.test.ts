// Signing in with the directory's password over real HTTP: a user provided by a real OpenLDAP
// (Debian slapd) who has no password of their own signs in on the usual password form with the
// directory's, and is offered a passkey after; the password is never stored. Refused: a wrong
// password, an empty one (no bind reaches the directory), a username that would widen the search
// filter (escaped: it matches no one), and attempts over the rate limit (no bind either). A
// directory that is down, or that takes the connection and never answers, is the usual error in
// bounded time. A user of a disabled organization is refused after the directory's check, as a disabled user is.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, createHash } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import { dialects, pickFreePort, startTestApp, type TestContext } from '../helpers.ts';
import { addOrganization, setOrganizationDisabled } from '../../src/directory/index.ts';
import { createClient } from '../../src/clients/index.ts';
import {
  addLdapDirectory,
  checkPasswordWithDirectory,
  directorySettings,
  loadLdapDirectory,
} from '../../src/directory/ldap-directories.ts';
import { checkDirectoryPassword, findLoginEntry, serviceConnection, close } from '../../src/directory/ldap-client.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { findUserByEppn } from '../../src/store/directory.ts';
import { grantRole } from '../../src/directory/roles.ts';
import { cookieJar, exchange, follow, type Target } from '../../bench/signin-flow.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

const REDIRECT = 'https://rp.example.test/callback';
const csrfOf = (page: string) => /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';

/** A server that takes connections and never answers: a directory that hangs. */
async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((s) => sockets.push(s));
  const port = await pickFreePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `ldap://127.0.0.1:${port}`,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

for (const dialect of dialects()) {
  describe(`signing in with an LDAP directory's password (${dialect})`, () => {
    let ctx: TestContext;
    let slapd: Slapd;
    let target: Target;
    let clientId: string;
    let directoryId: number;
    const users = testUsers(40);

    before(async () => {
      slapd = await startSlapd({ users });
      const port = await pickFreePort();
      const url = `http://127.0.0.1:${port}`;
      ctx = await startTestApp(dialect, { PUBLIC_URL: url, LOGIN_RATE_LIMIT_ACCOUNT: '4' }, { listen: port });
      target = { url, publicUrl: url };
      await addOrganization(ctx.store, { id: 1, realm: 'example.org', name: 'Example' });
      const made = await createClient(ctx.store, ctx.keys, {
        name: 'Portal',
        redirectUris: [REDIRECT],
        groups: ['userinfo-name'],
        firstParty: true,
      });
      clientId = made.client.clientId;
      const d = await addLdapDirectory(ctx.store, ctx.keys, {
        orgId: 1,
        url: slapd.url,
        bindDn: SERVICE_DN,
        bindPassword: SERVICE_PASSWORD,
        baseDn: PEOPLE,
        filter: '(objectClass=inetOrgPerson)',
        passwordCheck: true,
      });
      directoryId = d.id;
      await syncLdapDirectory(ctx.store, ctx.keys, directoryId);
    });
    after(async () => {
      await ctx?.close();
      await slapd?.stop();
    });

    /** The sign-in page of a fresh authorization request: its form's action and CSRF token. */
    async function signInPage(jar = cookieJar()) {
      const query = new URLSearchParams({
        client_id: clientId,
        redirect_uri: REDIRECT,
        response_type: 'code',
        scope: 'openid userinfo-name',
        state: randomBytes(8).toString('base64url'),
        code_challenge: createHash('sha256').update(randomBytes(32)).digest('base64url'),
        code_challenge_method: 'S256',
      });
      const page = await follow(target, jar, `/oauth/authorization?${query}`);
      assert.equal(page.status, 200, page.body.slice(0, 300));
      const action = /action="(\/interaction\/[^"]+\/login)"/.exec(page.body)?.[1];
      assert.ok(action, 'a password form');
      return { jar, action, csrf: csrfOf(page.body) };
    }

    async function post(username: string, password: string, extra: Record<string, string> = {}) {
      const { jar, action, csrf } = await signInPage();
      const res = await exchange(target, jar, action, { form: { _csrf: csrf, username, password, ...extra } });
      return { status: res.status, body: await res.text(), location: res.headers.get('location'), jar };
    }

    const bindsOf = (uid: string) => slapd.binds().filter((dn) => dn === `uid=${uid},${PEOPLE}`).length;

    it("signs a user in with the directory's password, offers a passkey, and stores no password", async () => {
      const res = await post('user00001@example.org', 'pw-user00001', { webauthn: '1' });
      assert.equal(res.status, 200, res.body.slice(0, 300));
      assert.match(res.body, /\/offer\/options/, 'the passkey offer follows, as after any password sign-in');
      const plain = await post('user00002@example.org', 'pw-user00002');
      assert.equal(plain.status, 303);
      const done = await follow(target, plain.jar, plain.location!, /^https:\/\/rp\.example\.test/);
      assert.match(done.location ?? '', /[?&]code=/);
      assert.equal((await findUserByEppn(ctx.store.db, 'user00001@example.org'))?.password_hash, null);
      assert.ok(bindsOf('user00001') >= 1);
    });

    it("never signs a staff account in with the directory's password", async () => {
      await grantRole(ctx.store, { eppn: 'user00002@example.org', role: 'helpdesk', orgId: 1 });
      const before = bindsOf('user00002');
      const res = await post('user00002@example.org', 'pw-user00002');
      assert.equal(res.status, 401, 'refused as a wrong password');
      assert.equal(bindsOf('user00002'), before, 'no bind as the staff account');
    });

    it('refuses a wrong password as any wrong password', async () => {
      const res = await post('user00003@example.org', 'not-the-password');
      assert.equal(res.status, 401);
    });

    it("refuses a disabled organization's user with the directory's password as a disabled user; enabling lets them in", async () => {
      await setOrganizationDisabled(ctx.store, 1, true);
      try {
        const res = await post('user00010@example.org', 'pw-user00010');
        assert.equal(res.status, 403);
        assert.match(res.body, /This account is disabled/);
        const wrong = await post('user00010@example.org', 'not-the-password');
        assert.equal(wrong.status, 401, 'a wrong password learns nothing');
      } finally {
        await setOrganizationDisabled(ctx.store, 1, false);
      }
      assert.equal((await post('user00010@example.org', 'pw-user00010')).status, 303);
    });

    it('refuses an empty password before any bind', async () => {
      const user = (await findUserByEppn(ctx.store.db, 'user00004@example.org'))!;
      const before = slapd.binds().length;
      assert.equal(await checkPasswordWithDirectory(ctx.store, ctx.keys, user, ''), 'invalid');
      const settings = directorySettings(ctx.keys, await loadLdapDirectory(ctx.store, directoryId));
      const verdict = await checkDirectoryPassword(settings, { eppn: user.eppn, externalId: user.external_id! }, '');
      assert.equal(verdict, 'invalid');
      const res = await post('user00004@example.org', '');
      assert.equal(res.status, 400);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(slapd.binds().length, before, 'nothing reached the directory');
      // The directory itself would have taken it: an empty password is an anonymous bind that succeeds.
      const anonymous = await serviceConnection({ ...settings, bindDn: `uid=user00004,${PEOPLE}`, bindPassword: '' });
      await close(anonymous);
    });

    it('escapes the username in the search filter: a wildcard matches no one', async () => {
      const settings = directorySettings(ctx.keys, await loadLdapDirectory(ctx.store, directoryId));
      const client = await serviceConnection(settings);
      try {
        assert.equal(await findLoginEntry(client, settings, 'user0000*1@example.org'), undefined);
        assert.equal(await findLoginEntry(client, settings, '*)(uid=*@example.org'), undefined);
        assert.equal((await findLoginEntry(client, settings, 'user00001@example.org'))?.dn, `uid=user00001,${PEOPLE}`);
      } finally {
        await close(client);
      }
      await new Promise((r) => setTimeout(r, 200));
      assert.match(slapd.log(), /\(uid=user0000\\2a1\)/i, 'the server received the * escaped');
      const first = await findUserByEppn(ctx.store.db, 'user00001@example.org');
      const verdict = await checkDirectoryPassword(
        settings,
        { eppn: 'user0000*1@example.org', externalId: first!.external_id! },
        'pw-user00001',
      );
      assert.equal(verdict, 'invalid');
      const res = await post('*)(uid=*', 'pw-user00001');
      assert.equal(res.status, 401);
    });

    it('counts directory sign-ins against the account limit; over it, nothing is sent to the directory', async () => {
      for (let i = 0; i < 4; i++) assert.equal((await post('user00005@example.org', `wrong-${i}`)).status, 401);
      await new Promise((r) => setTimeout(r, 200));
      const before = bindsOf('user00005');
      const res = await post('user00005@example.org', 'pw-user00005');
      assert.equal(res.status, 429);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(bindsOf('user00005'), before);
    });

    it('a directory that takes the connection and never answers: the usual error, within the timeout', async () => {
      const silent = await silentServer();
      try {
        await ctx.store.db
          .updateTable('ldap_directories')
          .set({ url: silent.url })
          .where('id', '=', directoryId)
          .execute();
        const started = Date.now();
        const res = await post('user00006@example.org', 'pw-user00006');
        assert.equal(res.status, 401);
        assert.ok(Date.now() - started < 8000, `answered in ${Date.now() - started} ms`);
        slapd.kill();
        await ctx.store.db
          .updateTable('ldap_directories')
          .set({ url: slapd.url })
          .where('id', '=', directoryId)
          .execute();
        const down = await post('user00006@example.org', 'pw-user00006');
        assert.equal(down.status, 401, 'a directory that is down: the usual error');
      } finally {
        await silent.close();
        await slapd.start();
      }
      assert.equal((await post('user00006@example.org', 'pw-user00006')).status, 303, 'and back once it is');
    });
  });
}
