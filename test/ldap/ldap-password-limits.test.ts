// The bounds on signing in with an LDAP directory's password, with a real OpenLDAP (Debian slapd)
// behind a TCP relay the test controls: at most LDAP_PASSWORD_CHECK_CONCURRENCY checks at once per
// directory, LDAP_PASSWORD_CHECK_QUEUE more waiting (2 s at most), beyond that 503 with
// Retry-After and nothing counted; a directory that fails before the password's bind is sent gives
// the attempt back to the account (not to the address); one that takes the bind and never answers
// counts it like a wrong password. SQLite and PostgreSQL.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { cookieBrowser, dialects, pickFreePort, startTestApp, type TestContext } from '../helpers.ts';
import { addOrganization } from '../../src/directory/index.ts';
import { addLdapDirectory } from '../../src/directory/ldap-directories.ts';
import { syncLdapDirectory } from '../../src/ldap/sync.ts';
import { PEOPLE, SERVICE_DN, SERVICE_PASSWORD, startSlapd, testUsers, type Slapd } from './slapd.ts';

type Mode = 'relay' | 'hold-user-binds' | 'silent';

/**
 * A relay to slapd: `relay` passes everything; `hold-user-binds` passes the service account's
 * connection and search but swallows a bind as a person (its DN, `uid=...`, in the bytes) and
 * everything after it on that connection, so the bind is sent and never answered; `silent` takes
 * connections and passes nothing (the directory is never reached).
 */
async function relay(to: number): Promise<{ url: string; mode: Mode; readonly held: number; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const state = { mode: 'relay' as Mode, held: 0 };
  const server: Server = createServer((client) => {
    sockets.push(client);
    if (state.mode === 'silent') return;
    const upstream = connect(to, '127.0.0.1');
    sockets.push(upstream);
    let held = false;
    client.on('data', (chunk: Buffer) => {
      if (!held && state.mode === 'hold-user-binds' && chunk.includes('uid=user')) {
        held = true;
        state.held++;
      }
      if (!held) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  const port = await pickFreePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `ldap://127.0.0.1:${port}`,
    get mode() {
      return state.mode;
    },
    set mode(m: Mode) {
      state.mode = m;
    },
    /** the binds as a person held so far */
    get held() {
      return state.held;
    },
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

for (const dialect of dialects()) {
  describe(`bounds on LDAP directory password checks (${dialect})`, () => {
    let ctx: TestContext;
    let slapd: Slapd;
    let proxy: Awaited<ReturnType<typeof relay>>;

    before(async () => {
      slapd = await startSlapd({ users: testUsers(10) });
      proxy = await relay(Number(new URL(slapd.url).port));
      ctx = await startTestApp(dialect, {
        LDAP_PASSWORD_CHECK_CONCURRENCY: '1',
        LDAP_PASSWORD_CHECK_QUEUE: '1',
      });
      await addOrganization(ctx.store, { id: 1, realm: 'example.org', name: 'Example' });
      const d = await addLdapDirectory(ctx.store, ctx.keys, {
        orgId: 1,
        url: proxy.url,
        bindDn: SERVICE_DN,
        bindPassword: SERVICE_PASSWORD,
        baseDn: PEOPLE,
        filter: '(objectClass=inetOrgPerson)',
        passwordCheck: true,
      });
      await syncLdapDirectory(ctx.store, ctx.keys, d.id);
    });
    after(async () => {
      await ctx?.close();
      await proxy?.close();
      await slapd?.stop();
    });

    async function signIn(username: string, password: string, remoteAddress: string) {
      return (await signInForm(username, password, remoteAddress))();
    }

    /** The sign-in page fetched; the form's submission, to send when the caller chooses. */
    async function signInForm(username: string, password: string, remoteAddress: string) {
      const b = cookieBrowser(ctx.app);
      const page = await b.get('/account');
      return async () => {
        const started = Date.now();
        const res = await ctx.app.inject({
          method: 'POST',
          url: '/account/login',
          remoteAddress,
          headers: {
            cookie: page.cookies.map((c) => `${c.name}=${c.value}`).join('; '),
            'content-type': 'application/x-www-form-urlencoded',
          },
          payload: new URLSearchParams({ _csrf: csrfOf(page.body), username, password }).toString(),
        });
        return { status: res.statusCode, retryAfter: res.headers['retry-after'], ms: Date.now() - started };
      };
    }

    /** What a key has used of a limit: its events less its refunds in the window. */
    async function used(limit: 'login-account' | 'login-ip', key: string) {
      const count = async (k: string) =>
        Number(
          (await ctx.store.db.selectFrom('rate_limits').select('count').where('key', '=', k).executeTakeFirst())
            ?.count ?? 0,
        );
      return (await count(`${limit}:${key}`)) - (await count(`${limit}-refund:${key}`));
    }

    it('through the relay, the directory password signs in', async () => {
      proxy.mode = 'relay';
      assert.equal((await signIn('user00001@example.org', 'pw-user00001', '192.0.2.1')).status, 303);
    });

    it('a bind sent and never answered counts against the account and the address', async () => {
      proxy.mode = 'hold-user-binds';
      const r = await signIn('user00002@example.org', 'a guess', '192.0.2.2');
      assert.equal(r.status, 401);
      assert.equal(await used('login-account', 'user00002@example.org'), 1, 'the account pays for it');
      assert.equal(await used('login-ip', '192.0.2.2'), 1);
    });

    it('a directory never reached gives the attempt back to the account, not to the address', async () => {
      proxy.mode = 'silent';
      const r = await signIn('user00003@example.org', 'pw-user00003', '192.0.2.3');
      assert.equal(r.status, 401);
      assert.equal(await used('login-account', 'user00003@example.org'), 0, 'an outage locks no one out');
      assert.equal(await used('login-ip', '192.0.2.3'), 1, 'the address still pays');
    });

    it('one check at once and one waiting: beyond, 503 with Retry-After at once; a wait past 2 s too', async () => {
      proxy.mode = 'hold-user-binds';
      // the pages first, then the three submissions in order: the first holds the one place (its
      // bind reached the directory), the second waits for it, the third finds the line full
      const forms = await Promise.all([
        signInForm('user00004@example.org', 'guess 4', '192.0.2.4'),
        signInForm('user00005@example.org', 'guess 5', '192.0.2.5'),
        signInForm('user00006@example.org', 'guess 6', '192.0.2.6'),
      ]);
      const heldBefore = proxy.held;
      const first = forms[0]!();
      for (let i = 0; i < 200 && proxy.held === heldBefore; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(proxy.held, heldBefore + 1, 'the first bind reached the directory');
      const second = forms[1]!();
      await new Promise((r) => setTimeout(r, 500));
      const [held, waited, refused] = await Promise.all([first, second, forms[2]!()]);
      assert.equal(held.status, 401, 'the one running: its bind went unanswered');
      assert.equal(refused.status, 503, 'the line was full');
      assert.equal(refused.retryAfter, '1');
      assert.equal(waited.status, 503, 'waited 2 s without a place');
      assert.equal(waited.retryAfter, '1');
      assert.ok(waited.ms >= 1_900, `it waited for its place (${waited.ms} ms)`);
      assert.ok(refused.ms < waited.ms, 'the one beyond the line was refused before the one waiting');
      for (const n of ['5', '6']) {
        assert.equal(await used('login-account', `user0000${n}@example.org`), 0, 'a refusal is not counted');
        assert.equal(await used('login-ip', `192.0.2.${n}`), 0);
      }
      proxy.mode = 'relay';
      assert.equal((await signIn('user00007@example.org', 'pw-user00007', '192.0.2.7')).status, 303);
    });
  });
}
